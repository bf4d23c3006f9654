"""One job at a time on a machine reached over SSH, from this controller.

A test box runs one job at a time (anything else on it is noise). A lab worker that drives a
machine (`perflab worker --machine NAME`) and a `perflab run --on NAME` typed on the same
controller must therefore not use it at once: whoever opens a place on a machine (the runner,
for every job that runs there; a bisection shipping a commit's tree there) holds an exclusive
flock on a file named after the machine's address (host and port, not the name it was given
by: `--on box1` and `--on ssh://perf@box1.lab` are the same machine when box1 is configured as
that address), and the other waits, saying once whom it waits for.

The files are in one directory for every user of the controller ($PERFLAB_MACHINE_LOCKS, else
/tmp/perflab-machine-locks, mode 1777, each file mode 666): a worker running as root and a user's
`perflab run` exclude each other too. A flock is the kernel's: it goes with its holder, also after
kill -9, so nothing stale is ever left to clear.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import socket
import sys
from collections.abc import Iterator

from perflab.core import filelock

LOCKS_ENV = "PERFLAB_MACHINE_LOCKS"
DEFAULT_DIR = "/tmp/perflab-machine-locks"
POLL_S = 0.2


def directory() -> str:
    return os.environ.get(LOCKS_ENV) or DEFAULT_DIR


def machine_key(machine) -> str:
    """The address a machine is reached at (host[:port], without the user): the lock's name."""
    host = machine.destination.rpartition("@")[2]
    return f"{host}:{machine.port or 22}"


def lock_path(machine) -> str:
    key = machine_key(machine)
    readable = re.sub(r"[^A-Za-z0-9._-]", "_", key)[:60]
    return os.path.join(directory(), f"{readable}-{hashlib.sha1(key.encode()).hexdigest()[:8]}.lock")


def _open(path: str) -> int:
    top = os.path.dirname(path)
    if not os.path.isdir(top):
        with contextlib.suppress(FileExistsError):
            os.mkdir(top, 0o777)
            os.chmod(top, 0o1777)       # every user of the controller, each removing only their own
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    with contextlib.suppress(OSError):
        os.fchmod(fd, 0o666)            # the umask's bits back: another user's perflab takes it too
    return fd


def holder(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read(300).strip() or "?"
    except OSError:
        return "?"


@contextlib.contextmanager
def held(machine, what: str = "", say=None) -> Iterator[None]:
    """The machine, ours alone while the block runs; waits (Ctrl-C/SIGTERM end the wait) while
    another process of this controller holds it, saying so once through `say` (stderr by default)."""
    from perflab.execution import interrupt

    path = lock_path(machine)
    fd = _open(path)

    @contextlib.contextmanager
    def waiting() -> Iterator[None]:
        line = (f"waiting for machine {machine.on}: it runs one job at a time, and "
                f"{holder(path)} holds it ({path})")
        (say or (lambda text: print(f"perflab: {text}", file=sys.stderr, flush=True)))(line)
        yield

    try:
        filelock.take(fd, waiting, POLL_S, between=interrupt.check,
                      holding=f"pid {os.getpid()} on {socket.gethostname()}{': ' + what if what else ''}\n")
        yield
    finally:
        os.close(fd)                    # the flock goes with the descriptor


def target_machine(target):
    """The machine a target reaches over SSH (its `machine`), or None for one that reaches none."""
    machine = getattr(type(target), "machine", None) and getattr(target, "machine", None)
    if machine is None:
        return None        # the host, a guest: no import of the SSH target for them
    from perflab.execution.targets.ssh_machine import Machine

    return machine if isinstance(machine, Machine) else None


@contextlib.contextmanager
def holding(target, what: str = "") -> Iterator[None]:
    """The target's machine held while the block runs (nothing for a target that reaches none)."""
    machine = target_machine(target)
    if machine is None:
        yield
        return
    with held(machine, what):
        yield


__all__ = ["held", "holding", "lock_path", "machine_key", "target_machine"]

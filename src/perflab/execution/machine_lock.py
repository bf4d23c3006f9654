"""One job at a time on a machine reached over SSH: a lock on this controller, and one on the machine.

A test box runs one job at a time (anything else on it is noise). Whoever opens a place on a
machine (the runner, for every job that runs there; a bisection shipping a commit's tree there)
holds two locks while it is there, taken in this order:

1. This controller's: an exclusive flock on a file named after the machine's address (host and
   port as ssh resolves them, not the name it was given by: `--on box1` and `--on
   ssh://perf@box1.lab` are the same machine when box1 is configured, in perflab's configuration
   or the ssh config, as that address), in one directory for every user of the
   controller ($PERFLAB_MACHINE_LOCKS, else /tmp/perflab-machine-locks, mode 1777, each file mode
   666). A lab worker and a `perflab run --on` typed on the same controller wait for each other
   here, without a word to the machine.
2. The machine's own (`FarLease`): a shell of an ssh session of its own (no ControlMaster: the
   shared connection is dropped and remade around a kexec, this one must not be) holds a flock on
   the directory /tmp/perflab-machine-lock there (mode 1777: every user of the machine), writes
   who holds it (host, pid, job) in holder.UID beside, and waits for perflab's lines. Two
   controllers (two hosts, or two users with different lock directories) driving one machine
   wait for each other here; the one that waits says whom for. The flock is the far kernel's: it
   goes when that shell ends, and the shell ends when its session does (the end of its stdin:
   perflab gone, also after kill -9, whose ssh dies with it), or after IDLE_SECONDS without a line
   from perflab (it sends one every IDLE_SECONDS/4; a cut connection).

A machine rebooted under its holder (kexec: the kernel under test, or the way back) loses the far
lock with the shell that held it. `keeping(reconnect)` wraps the reconnection the kexec switch
polls with (execution/targets/kexec.py): before anything else reaches the machine again, the lost
lock is taken again. The window (the seconds between the machine's sshd answering and that
poll) is in docs/lab.md, "One job at a time per machine".

Under the machine lock, the session also sweeps what a killed bisection left there: the copies
of its commits' trees (automate/far_tree.py, $TMPDIR/perflab-tree-KEY) whose owner no longer
holds its own flock on them (a live bisection's session does, for the bisection's whole time).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import select
import shlex
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from perflab.core import filelock
from perflab.core.process import die_with_parent, kill_group

LOCKS_ENV = "PERFLAB_MACHINE_LOCKS"
DEFAULT_DIR = "/tmp/perflab-machine-locks"
POLL_S = 0.2
FAR_DIR = "/tmp/perflab-machine-lock"      # on the machine: the directory whose flock is the machine's lock
# ... unless the machine's own environment names another (its sshd's SetEnv): a machine setting, so
# every controller reaching that machine agrees on it. The tests' sshd servers, all on one kernel,
# each name their own: else every test machine would be one machine to the lock.
FAR_DIR_ENV = "PERFLAB_MACHINE_LOCK"
IDLE_SECONDS = 60                          # the far shell ends after this long without a line from perflab
LOST_RETRY_S = 10                          # a waiter whose session ended (the machine rebooted) tries again
LOST_GIVE_UP_S = 900                       # ... for this long without reaching the machine, then target down
TREE_PREFIX = "perflab-tree-"              # a bisection's copies there (automate/far_tree.py), swept when dead


def directory() -> str:
    return os.environ.get(LOCKS_ENV) or DEFAULT_DIR


def machine_key(machine) -> str:
    """The address a machine is reached at (host[:port], without the user; the hop before it when
    ssh goes through one): the lock's name. Asked of ssh's own configuration (`ssh -G`, which reads
    the config and reaches nothing), so an ssh config's Host alias is the HostName and Port it
    stands for: `--on box1` (Host box1, HostName 10.0.0.5) and `ssh://10.0.0.5` are one machine,
    and two configs' same alias for two addresses are two."""
    key = _resolved.get(machine)
    if key is None:
        key = _resolved[machine] = _ssh_address(machine) or \
            f"{machine.destination.rpartition('@')[2]}:{machine.port or 22}"
    return key


_resolved: dict = {}


def _ssh_address(machine) -> str | None:
    """host:port[ via HOP] as `ssh -G` resolves the machine's destination, or None (no ssh, an
    ssh without -G, an unreadable config: the address as written is the name then)."""
    argv = machine.ssh("none", "-G")
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    said = {}
    for line in out.splitlines():
        name, _, value = line.partition(" ")
        said.setdefault(name.lower(), value.strip())
    if not said.get("hostname") or not said.get("port", "").isdigit():
        return None
    hop = said.get("proxyjump") or said.get("proxycommand") or ""
    return f"{said['hostname']}:{said['port']}" + (f" via {hop}" if hop and hop != "none" else "")


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


def _say(line: str) -> None:
    print(f"perflab: {line}", file=sys.stderr, flush=True)


def identity(what: str = "") -> str:
    """Who holds a lock, as the waiter is told: this process, its host, its job."""
    return f"pid {os.getpid()} on {socket.gethostname()}{': ' + what if what else ''}".replace("\n", " ")


# -- the lock on the machine ------------------------------------------------------------

def _base(machine) -> str:
    """The machine's directory of perflab's files (run directories, trees), as a shell word."""
    return shlex.quote(machine.tmpdir) if machine.tmpdir else '"${TMPDIR:-/tmp}"'


def keep_alive() -> str:
    """The end of a lease's script: each line perflab sends echoed back, until its stdin ends or
    nothing came for IDLE_SECONDS (`timeout` ends the read). The flock goes with the shell (its
    descriptor 9 is not the readers': a reader outliving a killed shell must not keep it)."""
    return f"while timeout {IDLE_SECONDS} sh -c 'IFS= read -r x && echo \"$x\"' 9<&-; do :; done"


NEEDS_FLOCK = ("command -v flock >/dev/null 2>&1 && command -v timeout >/dev/null 2>&1 || "
               "{ echo 'NONE flock(1) or timeout(1) is not on its PATH (util-linux, coreutils)'; exit 0; }")
SIGNAL_TRAPS = "trap 'exit 129' HUP; trap 'exit 130' INT; trap 'exit 143' TERM"


def machine_script(machine, who: str) -> str:
    """The remote command that takes the machine's lock (saying WAIT HOLDER while another holds it),
    writes `who` as its holder, sweeps dead bisections' trees, says HELD and keeps it."""
    lines = [
        "umask 022", NEEDS_FLOCK, f'L="${{{FAR_DIR_ENV}:-{FAR_DIR}}}"',
        '[ -d "$L" ] || mkdir -m 1777 "$L" 2>/dev/null || [ -d "$L" ] || { echo "NONE cannot make $L"; exit 0; }',
        'exec 9<"$L" || { echo "NONE cannot open $L"; exit 0; }',
        'h="$L/holder.$(id -u)"', SIGNAL_TRAPS,
        # Saying whom it waits for every 2 s is also how a waiter notices perflab gone (SIGPIPE).
        "until flock -n 9; do",
        '  w=$(ls -t "$L"/holder.* 2>/dev/null | head -n 1)',
        '  echo "WAIT $(head -c 300 "$w" 2>/dev/null | tr -d \'\\n\')"',
        "  flock -w 2 9 && break",
        "done",
        "trap 'rm -f \"$h\"' EXIT",
        f"printf '%s\\n' {shlex.quote(who)} > \"$h\" 2>/dev/null",
        # A bisection's copies whose owner holds no flock on them any more: a killed perflab's.
        f'for d in {_base(machine)}/{TREE_PREFIX}*; do',
        '  [ -d "$d" ] && [ -O "$d" ] || continue',
        '  if flock -n "$d" true 2>/dev/null 9<&-; then rm -rf "$d" && echo "SWEPT $d"; fi',
        "done",
        "echo HELD", keep_alive()]
    return "exec /bin/sh -c " + shlex.quote("\n".join(lines))


class FarLease:
    """A flock held on the machine by the shell of one ssh session of its own, for as long as this
    object keeps the session (docs: the module's). `script` says, line by line: WAIT HOLDER (another
    holds it), SWEPT PATH, NONE WHY (no lock can be taken there), BUSY WHAT, HELD [TEXT]; then it
    echoes each line it is sent."""

    def __init__(self, machine, script: str):
        self.machine, self.script = machine, script
        self.process: subprocess.Popen | None = None
        self.err: Path | None = None
        self.text = ""                     # what followed HELD
        self.none = ""                     # why no lock was taken (NONE), when so
        self.busy = ""                     # BUSY's words: the script refused
        self.swept: list[str] = []
        self._buf = b""
        self._write = threading.Lock()
        self._echoes: dict[str, threading.Event] = {}
        self._done = threading.Event()
        self._keeper: threading.Thread | None = None
        self.lost = threading.Event()

    # the session

    def _start(self) -> None:
        from perflab.execution import scratch

        if self.err is not None:
            with contextlib.suppress(OSError):
                self.err.unlink()               # a previous try's
        self._buf = b""
        # In this process's scratch directory: removed at exit, and reaped after a kill -9.
        fd, err = tempfile.mkstemp(prefix="lease-", suffix=".err", dir=scratch.directory())
        self.err = Path(err)
        command = self.machine.ssh("none", "-o", "ControlMaster=no", "-T") + [self.script]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=fd,
                                        start_new_session=True, preexec_fn=die_with_parent, bufsize=0)
        os.close(fd)

    def _last_words(self) -> str:
        try:
            text = self.err.read_text(errors="replace") if self.err else ""
        except OSError:
            return ""
        return " ".join(line.strip() for line in text.replace("\r", "").splitlines()[-3:] if line.strip())

    def _lines(self, timeout: float) -> list[str] | None:
        """Complete lines come within `timeout` ([] when none); None at the end of the session."""
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        if not ready:
            return []
        data = os.read(self.process.stdout.fileno(), 4096)
        if not data:
            return None
        self._buf += data
        *whole, self._buf = self._buf.split(b"\n")
        return [line.decode(errors="replace") for line in whole]

    def _kill(self) -> None:
        if self.process is None:
            return
        with contextlib.suppress(OSError):
            self.process.stdin.close()       # the far shell's stdin ends: it removes its holder file, exits
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(10)
        kill_group(self.process)

    def take(self, waiting: Callable[[str], None] = lambda who: None, between: Callable[[], None] = lambda: None,
             again: bool = True) -> bool:
        """The lock taken on the machine (True), or none to take there (False, `none` says why);
        `waiting(HOLDER)` each time another holder is named. SshDown when the machine cannot be
        reached; when it was reached and its session ended before the lock was ours (the holder
        rebooted it: kexec), tried `again` every LOST_RETRY_S for up to LOST_GIVE_UP_S."""
        from perflab.execution.targets.ssh_machine import SshDown

        reached, told = None, None
        connect = self.machine.connect_timeout + 30
        while True:
            self._start()
            started, heard = time.monotonic(), False
            try:
                while True:
                    between()
                    lines = self._lines(POLL_S)
                    if lines is None:
                        break
                    if not lines and not heard and time.monotonic() - started > connect:
                        break
                    for line in lines:
                        heard = True
                        word, _, rest = line.partition(" ")
                        if word == "WAIT" and rest != told:
                            told = rest
                            waiting(rest or "?")
                        elif word == "SWEPT":
                            self.swept.append(rest)
                        elif word == "NONE":
                            self.none = rest
                            self._kill()
                            return False
                        elif word == "BUSY":
                            self.busy = rest
                            self._kill()
                            return False
                        elif word == "HELD":
                            self.text = rest
                            self._keep()
                            return True
            except BaseException:
                self._kill()
                raise
            said = self._last_words()
            self._kill()
            reached = time.monotonic() if heard else reached
            if not again or reached is None or time.monotonic() - reached > LOST_GIVE_UP_S:
                raise SshDown(f"target down: cannot reach {self.machine.on} over SSH: "
                              f"{said or 'its session ended before it took the lock there'}")
            # It answered before and is gone now: rebooted by the holder (kexec), most likely. Again.
            end = time.monotonic() + LOST_RETRY_S
            while time.monotonic() < end:
                between()
                time.sleep(POLL_S)

    # held: ticks, echoes

    def _send(self, line: str) -> bool:
        try:
            with self._write:
                os.write(self.process.stdin.fileno(), line.encode() + b"\n")
            return True
        except (OSError, ValueError):
            self.lost.set()
            return False

    def _keep(self) -> None:
        self.lost.clear()
        self._done.clear()
        self._keeper = threading.Thread(target=self._keeping, name="perflab-far-lock", daemon=True)
        self._keeper.start()

    def _keeping(self) -> None:
        last = time.monotonic()
        while not self._done.is_set():
            try:
                lines = self._lines(1.0)
            except (OSError, ValueError):
                lines = None
            if lines is None:
                self.lost.set()
                return
            for line in lines:
                if line in self._echoes:
                    self._echoes[line].set()
            if time.monotonic() - last >= IDLE_SECONDS / 4:
                last = time.monotonic()
                if not self._send("T"):
                    return

    def alive(self, timeout: float | None = None) -> bool:
        """Whether the far shell still holds it: its session answers a line within `timeout`."""
        if self.process is None or self.lost.is_set() or self.process.poll() is not None:
            return False
        token = f"P{time.monotonic_ns()}"
        self._echoes[token] = echoed = threading.Event()
        try:
            if not self._send(token):
                return False
            return echoed.wait(self.machine.connect_timeout if timeout is None else timeout)
        finally:
            self._echoes.pop(token, None)

    def release(self) -> None:
        self._done.set()
        if self.process is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()      # the far shell ends; the keeper reads the session's end
        if self._keeper is not None and self._keeper is not threading.current_thread():
            self._keeper.join(5)
        self._kill()
        if self.err is not None:
            with contextlib.suppress(OSError):
                self.err.unlink()
        self.process = None


# Leases held by this process, by machine address: kept across a reboot by `keeping`.
_HELD: dict[str, tuple[FarLease, Callable[[str], None]]] = {}


def keeping(reconnect: Callable):
    """`reconnect(machine)` that first takes the machine's lock again when this process held it and
    lost it (the machine rebooted): before anything else of ours reaches the machine."""
    def again(machine):
        found = _HELD.get(machine_key(machine))
        if found is not None:
            lease, waiting = found
            if not lease.alive():
                lease.release()
                lease.take(waiting, again=False)     # not up yet: SshDown, and the caller polls again
        return reconnect(machine)
    return again


@contextlib.contextmanager
def held_here(machine, what: str = "", say=None) -> Iterator[None]:
    """This controller's lock of the machine (the first of `held`'s two), ours while the block runs."""
    from perflab.execution import interrupt

    say = say or _say
    path = lock_path(machine)
    fd = _open(path)

    @contextlib.contextmanager
    def waiting() -> Iterator[None]:
        say(f"waiting for machine {machine.on}: it runs one job at a time, and "
            f"{holder(path)} holds it ({path})")
        yield

    try:
        filelock.take(fd, waiting, POLL_S, between=interrupt.check, holding=identity(what) + "\n")
        yield
    finally:
        os.close(fd)                    # this controller's flock goes with the descriptor


@contextlib.contextmanager
def held(machine, what: str = "", say=None) -> Iterator[None]:
    """The machine, ours alone while the block runs: this controller's lock, then the machine's.
    Waits (Ctrl-C/SIGTERM end the wait) while another holds either, saying whom for through `say`
    (stderr by default): once on this controller, and each time the machine names another holder."""
    from perflab.execution import interrupt

    say = say or _say

    def waiting_far(who: str) -> None:
        say(f"waiting for machine {machine.on}: it runs one job at a time, and {who} holds it "
            f"(the lock on the machine, ${FAR_DIR_ENV} there or {FAR_DIR})")

    key = machine_key(machine)
    with held_here(machine, what, say):
        lease = FarLease(machine, machine_script(machine, identity(what)))
        if lease.take(waiting_far, between=interrupt.check):
            _HELD[key] = (lease, waiting_far)
            for path in lease.swept:
                say(f"{machine.on}: removed {path}, the copy of a bisection whose perflab is gone")
        else:
            say(f"{machine.on}: no lock taken on the machine, only on this controller: {lease.none}")
        try:
            yield
        finally:
            _HELD.pop(key, None)
            lease.release()


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


__all__ = ["FAR_DIR", "FAR_DIR_ENV", "FarLease", "held", "held_here", "holding", "keeping", "lock_path", "machine_key", "machine_script",
           "target_machine"]

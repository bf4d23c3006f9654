"""The value types of one benchmark process: what to start (ProcessSpec) and what came of it
(ProcessResult). Families build specs and read results; only the executor
(`perflab.execution.executor`) starts processes.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
import contextlib
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

# The directory a run works in when its processes name none: a commit's worktree while a
# Measurer runs jobs there (`./prog` is the program built at that commit). None: perflab's own.
# Scoped to the run instead of os.chdir, which would move the whole process (and its threads).
_run_directory: ContextVar[str | None] = ContextVar("perflab_run_directory", default=None)


def run_directory() -> str | None:
    return _run_directory.get()


def in_run_directory(path: str) -> str:
    """A relative path as the run's processes see it (unchanged when the run has no directory of its own)."""
    base = _run_directory.get()
    return os.path.join(base, path) if base and not os.path.isabs(path) else path


@contextmanager
def running_in(directory: str | None) -> Iterator[None]:
    """Within: processes start in `directory` unless their spec names one (None: no change)."""
    token = _run_directory.set(directory) if directory else None
    try:
        yield
    finally:
        if token is not None:
            _run_directory.reset(token)


@dataclass
class ProcessSpec:
    """One benchmark process: what to start and how."""

    argv: list[str]
    item: str = ""                  # what it is, in failure messages ("lat_ctx", a command line)
    cwd: str | None = None
    env: dict[str, str] | None = None
    timeout: float | None = None
    capture_stdout: bool = True
    no_aslr: bool = False           # personality(ADDR_NO_RANDOMIZE) for the benchmark
    cpus: str | None = None         # "0" or "0,2-3": bind the benchmark to these CPUs
    record: bool = True             # False: an untimed helper (e.g. --prepare), judged but not parsed
    output: str | None = None       # a file stdout and stderr are appended to (a build's log), not captured


@dataclass
class ProcessResult:
    wall: float                     # seconds, measured by the launcher around fork..wait4
    user: float
    sys: float
    maxrss_kib: int
    voluntary_switches: int
    involuntary_switches: int
    exit_status: int                # 128+N when killed by signal N, as a shell says
    signal: int                     # the signal that ended it, 0 when it exited
    timed_out: bool
    interrupted: bool               # stopped because perflab was asked to stop
    stdout: str
    stderr_tail: str

    @property
    def ok(self) -> bool:
        return self.exit_status == 0 and not self.timed_out and not self.interrupted

    def describe_failure(self, timeout: float | None, tail_lines: int = 5) -> str:
        """'timed out after 2 s (killed)' / 'killed by SIGSEGV' / 'exited with status 3', with stderr's tail."""
        if self.timed_out:
            why = f"timed out after {timeout:g} s (killed)"
        elif self.signal:
            try:
                why = f"killed by {signal.Signals(self.signal).name}"
            except ValueError:
                why = f"killed by signal {self.signal}"
        else:
            why = f"exited with status {self.exit_status}"
        return why + self.stderr_summary(tail_lines)

    def stderr_summary(self, lines: int = 5) -> str:
        """': last | lines | of stderr' (empty when it printed nothing), for failure messages."""
        tail = [line.strip() for line in self.stderr_tail.splitlines() if line.strip()][-lines:]
        return ": " + " | ".join(tail) if tail else ""


def process_start_time(pid: int) -> str | None:
    """The kernel's start time of a process, to tell a live pid from a reused one."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode(errors="replace")
    except OSError:
        return None
    # The command name may contain spaces and parentheses; fields follow the last ')'.
    fields = data[data.rindex(")") + 2 :].split()
    return fields[19]  # field 22 of stat(5): starttime


def kill_group(process) -> None:
    """A child started in a process group of its own (start_new_session), ended whatever state it
    is in: the whole group killed if it still runs, reaped, its pipes closed."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    for stream in (process.stdin, process.stdout):
        if stream:
            with contextlib.suppress(OSError):
                stream.close()


def die_with_parent() -> None:
    """For `preexec_fn`, in the child between fork and exec: SIGKILL it when the thread that
    started it dies (PR_SET_PDEATHSIG), so a QEMU or an ssh never outlives a perflab killed by
    kill -9."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)     # 1: PR_SET_PDEATHSIG

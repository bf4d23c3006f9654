"""The value types of one benchmark process: what to start (ProcessSpec) and what came of it
(ProcessResult). Families build specs and read results; only the executor
(`perflab.execution.executor`) starts processes.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass


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

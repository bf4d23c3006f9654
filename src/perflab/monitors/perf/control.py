"""perf under the launcher, counting only during the timed part.

perf is started through the runner's launcher (execution.executor.start_background:
its own process group, gone with perflab even on kill -9) ahead of use, with
counting disabled (`-D -1`) and a control FIFO (`--control fifo:CTL,ACK`),
and waited for until it answers "ping"; enable writes "enable" and returns once
perf acknowledged, so counting starts at the timed part and perf's own start-up
is in no timed part. disable writes "disable" and waits for the ack; perf is
then stopped with SIGINT (it writes its file) and the next one started.
PerfMonitor is what perf-stat and perf-profile share on top of that.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import ClassVar

from perflab.core.errors import PerflabError
from perflab.execution import scratch
from perflab.monitors.base import Monitor, Unavailable

ACK_TIMEOUT = 30.0        # perf record -a -g synthesises every process's maps before it can enable
STOP_TIMEOUT = 60.0       # perf record writes its file after SIGINT


class PerfFailed(PerflabError):
    """perf ended or misbehaved mid-run; the message carries perf's own words."""


def controlled(argv: list[str], ctl: str, ack: str) -> list[str]:
    """`perf SUBCOMMAND ...` started disabled (`-D -1`), driven through the FIFOs ctl and ack."""
    return [*argv[:2], "-D", "-1", "--control", f"fifo:{ctl},{ack}", *argv[2:]]


class ControlledPerf:
    """One perf process started disabled, enabled and disabled through its control FIFOs."""

    def __init__(self, workdir: Path, argv: list[str], stderr: Path):
        from perflab.execution.executor import start_background

        ctl, ack = workdir / "ctl.fifo", workdir / "ack.fifo"
        for fifo in (ctl, ack):
            if not fifo.exists():
                os.mkfifo(fifo, 0o600)
        # Read-write opens never block on a FIFO (Linux), whether or not perf has opened its end.
        self._ctl = os.open(ctl, os.O_RDWR | os.O_CLOEXEC)
        self._ack = os.open(ack, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
        self._drain_ack()
        self.stderr = stderr
        self.output: Path | None = None   # the file perf writes (set by its monitor)
        try:
            self.process = start_background(controlled(argv, str(ctl), str(ack)), stderr=str(stderr))
        except BaseException:
            self._close_fds()
            raise

    def _drain_ack(self) -> None:
        try:
            while os.read(self._ack, 4096):
                pass
        except BlockingIOError:
            pass

    def _command(self, word: str, timeout: float) -> float:
        """Send a control command (enable, disable, ping); the monotonic time perf acknowledged it."""
        os.write(self._ctl, word.encode() + b"\n")
        deadline = time.monotonic() + timeout
        got = b""
        while b"ack" not in got:
            left = deadline - time.monotonic()
            if left <= 0:
                raise PerfFailed(f"perf did not acknowledge {word!r} within {timeout:g} s{self.tail()}")
            ready, _, _ = select.select([self._ack], [], [], min(left, 0.1))
            if ready:
                try:
                    got += os.read(self._ack, 64)
                except BlockingIOError:
                    pass
            elif not self.process.alive:
                raise PerfFailed(f"perf exited (status {self.process.exit_status}) before {word!r}{self.tail()}")
        return time.monotonic()

    def ready(self) -> None:
        """Wait until perf has set its events up and reads its commands (a "ping" answered)."""
        self._command("ping", ACK_TIMEOUT)

    def enable(self) -> float:
        return self._command("enable", ACK_TIMEOUT)

    def disable(self) -> float:
        return self._command("disable", 10.0)

    def finish(self) -> int:
        """SIGINT (perf writes its output), wait; the launcher kills it if it hangs."""
        try:
            return self.process.stop(signal.SIGINT, STOP_TIMEOUT)
        finally:
            self._close_fds()

    def kill(self) -> None:
        try:
            self.process.stop(signal.SIGTERM, 2.0)
        finally:
            self._close_fds()

    def _close_fds(self) -> None:
        for fd in (self._ctl, self._ack):
            try:
                os.close(fd)
            except OSError:
                pass
        self._ctl = self._ack = -1

    def tail(self) -> str:
        try:
            lines = [l.strip() for l in self.stderr.read_text(errors="replace").splitlines()
                     if l.strip() and not l.startswith("Events ")]
        except OSError:
            return ""
        return ": " + " | ".join(lines[-3:]) if lines else ""


WORKDIR_PREFIX = "perflab-perf-"


class PerfMonitor(Monitor):
    """What perf-stat and perf-profile share: a temp dir and a perf started ahead of use.

    perf is launched (disabled) before it is needed — in check() and again after each
    use — so begin() only writes "enable": perf's start-up (0.5 s and a burst of page
    faults for `perf record -a -g`) never falls in a timed part, neither this monitor's
    nor another perf monitor's counting beside it. Launches happen in the main thread
    (check, end, collect), where the launcher's parent-death signal belongs.
    """

    sampled: ClassVar[bool] = False

    def __init__(self, options):
        super().__init__(options)
        self._dir: Path | None = None
        self._perf: ControlledPerf | None = None
        self._started = 0.0
        self._count = 0

    def workdir(self) -> Path:
        if self._dir is None:
            # In the process's scratch directory: a kill -9 leaves it to the next command's reap.
            self._dir = Path(tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-{self.name}-",
                                              dir=scratch.directory()))
        return self._dir

    def perf_argv(self, output: Path, perf: str | None = None) -> list[str]:
        """perf's command line writing to `output` (without -D and --control), with the perf command
        `perf` (where the processes run: perflab.monitors.guest) or this machine's."""
        raise NotImplementedError

    def output_name(self, n: int) -> str:
        raise NotImplementedError

    def _launch(self) -> ControlledPerf:
        self._count += 1
        output = self.workdir() / self.output_name(self._count)
        perf = ControlledPerf(self.workdir(), self.perf_argv(output), self.workdir() / f"perf-{self._count}.err")
        perf.output = output
        self._perf = perf
        return perf

    def _prelaunch(self) -> None:
        """Start the next perf now and wait until it is ready, outside any timed part;
        begin() retries if this fails."""
        if self._perf is None:
            try:
                self._launch().ready()
            except PerflabError:
                if self._perf is not None:
                    self._perf.kill()
                self._perf = None

    def _enable(self) -> None:
        perf = self._perf
        if perf is not None and not perf.process.alive:
            perf.kill()
            perf = self._perf = None
        if perf is None:
            perf = self._launch()
        try:
            self._started = perf.enable()
        except BaseException:
            self._perf = None
            perf.kill()
            raise

    def _disable(self) -> float:
        """Seconds counted since enable."""
        perf = self._perf
        try:
            return perf.disable() - self._started
        except BaseException:
            self._perf = None
            perf.kill()
            raise

    def _finish(self) -> Path:
        """Stop perf (it writes its file); the file."""
        perf, self._perf = self._perf, None
        status = perf.finish()
        # perf stat ends 0 after SIGINT; perf record too, or 130 / -2 depending on the version.
        if status not in (0, 130, 2, 254):
            raise PerfFailed(f"perf exited with status {status}{perf.tail()}")
        if not perf.output.exists():
            raise PerfFailed(f"perf wrote no {perf.output}{perf.tail()}")
        return perf.output

    def check_launch(self) -> None:
        """The first launch, in check(): a perf that cannot start makes the monitor unavailable."""
        try:
            self._launch().ready()
        except PerflabError as e:
            if self._perf is not None:
                self._perf.kill()
                self._perf = None
            raise Unavailable(f"perf does not start here: {e}") from None

    def close(self) -> None:
        if self._perf is not None:
            perf, self._perf = self._perf, None
            perf.kill()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

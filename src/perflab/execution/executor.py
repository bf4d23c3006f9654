"""The one executor: start a benchmark process, measure it alone, clean up.

Every benchmark process of every family starts here, through the C launcher
in execution/c/launch.c (built on first use with the machine's compiler). The
launcher forks the benchmark into its own process group, takes the wall time
and the rusage (wait4) of the benchmark alone — not of this Python process,
whose RSS high-water mark a child spawned from it would inherit — kills the
whole group at the timeout (SIGTERM, SIGKILL after a grace period; orphans
too, as a child subreaper), and dies with perflab (parent-death signal), so
kill -9 of perflab leaves no benchmark running.

An argv wrapper (e.g. `perf stat -o F --`) is put in front of the command and
start/stop hooks run around it; the monitors use both.
"""

from __future__ import annotations

import errno as errno_names
import os
import signal
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from perflab.core import cbuild
from perflab.core.errors import PerflabError
from perflab.core.process import ProcessResult, ProcessSpec, run_directory

LAUNCHER_DIR = Path(__file__).parent / "c"
STDERR_TAIL_BYTES = 2000
STDOUT_LIMIT_BYTES = 64 << 20    # what is read back of a benchmark's stdout
DEFAULT_GRACE = 2.0              # seconds between SIGTERM and SIGKILL at a timeout

_launcher: Path | None = None
# The launcher now running: a SIGINT/SIGTERM handler stops it (runner.interrupt).
current_launcher: int | None = None
_stop_sent = False


def stop_current() -> None:
    """Ask the running launcher to stop its benchmark (safe in a signal handler)."""
    global _stop_sent
    _stop_sent = True
    pid = current_launcher
    if pid is not None:
        try:
            os.kill(pid, signal.SIGTERM)   # the launcher stops the benchmark's whole group
        except ProcessLookupError:
            pass


def launcher_options(spec: ProcessSpec, grace: float, cwd: str | None) -> list[str]:
    """The launcher's options for `spec` (launch.c's -G -T -R -c -C), on the host or in a guest."""
    options = ["-G", f"{grace:g}"]
    if spec.timeout:
        options += ["-T", repr(float(spec.timeout))]
    if spec.no_aslr:
        options.append("-R")
    if spec.cpus:
        options += ["-c", spec.cpus]
    if cwd:
        options += ["-C", cwd]
    return options


def launcher() -> Path:
    """The launcher binary (compiled once per compiler/source, cached by cbuild)."""
    global _launcher
    if _launcher is None:
        # The machine's own `cc` first: $CC names the compiler under test (a cross or
        # broken one, in a test), which should not decide whether anything can run.
        errors = []
        for cc in dict.fromkeys(["cc", cbuild.cc_command()]):
            try:
                _launcher = cbuild.build("launch", LAUNCHER_DIR, cc=cc)
                break
            except cbuild.BuildError as e:
                errors.append(e.detail)
        else:
            raise PerflabError(f"cannot build perflab's process launcher: {'; '.join(errors)}")
    return _launcher


@dataclass
class Readings:
    """Files read where the process runs (a guest's /proc): at its start, every `interval`
    seconds, at its end. The target fills `taken`: (seconds on the clock of the place, {path: text}),
    and `left_out`: the paths of readings not sent back (the run's readings passed the place's limit)."""

    paths: tuple[str, ...]
    interval: float
    taken: list[tuple[float, dict[str, str]]] = field(default_factory=list)
    left_out: set[str] = field(default_factory=set)


@dataclass
class InstructionCounts:
    """Instructions the process's machine executed while it ran, per block of kernel code, counted
    by the emulator (execution/vm/c/insns.c). The target fills `windows`: channel (0 the whole
    process, 1 the benchmark's own measured part) -> {block address: instructions}, address 0
    being all of user space; and `symbols`, the kernel's /proc/kallsyms as the machine had it."""

    windows: dict[int, dict[int, int]] = field(default_factory=dict)
    symbols: str = ""
    symbols_from: str = ""      # where `symbols` came from (the guest's /proc/kallsyms, a System.map)
    note: str = ""              # what was odd about the window (a guest that ran the markers itself)


@dataclass
class Helper:
    """A program started where the process runs, around it (a monitor's perf in a guest): before
    it, told "enable" just before the process starts and "disable" just after it ended on its
    control FIFO (`ctl`, answered on `ack`), then SIGINT; then `post` runs (perf script), if
    given. `root`: the directory both run chrooted in (the host's root over 9p). The target
    fills `output` (the file `out`; empty when the helper did not run) and `stderr`, and
    `left_out` when the file was not sent back: the run's readings passed the place's limit."""

    argv: list[str]
    root: str
    ctl: str
    ack: str
    out: str
    post: list[str] = field(default_factory=list)
    output: str = ""
    stderr: str = ""
    left_out: bool = False


@dataclass
class Hooks:
    """Callables run just before the benchmark starts and just after it ends; and what an
    instrument asks of the place the process runs in (`inside`: Readings, InstructionCounts, Helper),
    which only a target that runs processes elsewhere (a VM guest) fulfils."""

    start: list[Callable[[], None]] = field(default_factory=list)
    stop: list[Callable[[], None]] = field(default_factory=list)
    inside: list = field(default_factory=list)


def parse_result(text: str, display: str) -> dict[str, str]:
    lines = [line for line in text.splitlines() if line.strip()]
    if lines and lines[-1].startswith("execerror="):
        code = int(lines[-1].split("=", 1)[1])
        raise PerflabError(f"cannot start {display!r}: {os.strerror(code)} ({errno_names.errorcode.get(code, code)})")
    if not lines or not lines[-1].startswith("exit="):
        raise PerflabError(f"{display!r}: perflab's launcher ended without a result (was it killed?)")
    return dict(word.split("=", 1) for word in lines[-1].split())


@contextmanager
def _output_files(spec: ProcessSpec) -> Iterator[tuple]:
    """(stderr, stdout) of the process: a temporary file whose tail is kept and one captured (or
    /dev/null); or both the spec's `output` file (a build's log), appended to, its tail read back."""
    if spec.output is not None:
        with open(spec.output, "a+b") as log:
            yield log, log
        return
    with tempfile.TemporaryFile() as err, (tempfile.TemporaryFile() if spec.capture_stdout
                                           else open(os.devnull, "wb")) as out:
        yield err, out


def execute(spec: ProcessSpec, *, wrapper: Sequence[str] = (), hooks: Hooks | None = None,
            grace: float = DEFAULT_GRACE) -> ProcessResult:
    """Run one benchmark process to its end and measure it.

    Raises PerflabError when the program cannot be started at all.
    """
    global current_launcher, _stop_sent
    _stop_sent = False
    display = spec.item or " ".join(spec.argv)
    cwd = spec.cwd or run_directory()
    if cwd and not os.path.isdir(cwd):
        raise PerflabError(f"{display!r}: working directory {cwd} does not exist")
    argv = [*wrapper, *spec.argv]
    options = launcher_options(spec, grace, cwd)
    command = [os.fsencode(str(launcher())), *map(os.fsencode, options), b"--", *map(os.fsencode, argv)]
    env = os.environb if spec.env is None else {os.fsencode(k): os.fsencode(v) for k, v in spec.env.items()}
    hooks = hooks or Hooks()
    with _output_files(spec) as (err, out):
        read_end, write_end = os.pipe()
        try:
            actions = [
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, out.fileno(), 1),
                (os.POSIX_SPAWN_DUP2, err.fileno(), 2),
                (os.POSIX_SPAWN_DUP2, write_end, 3),
            ]
            for start in hooks.start:
                start()
            try:
                pid = os.posix_spawn(command[0], command, env, file_actions=actions)
            except OSError as e:
                raise PerflabError(f"cannot start perflab's launcher for {display!r}: {e.strerror}") from None
            current_launcher = pid
            os.close(write_end)
            write_end = -1
            chunks = []
            try:
                while True:
                    chunk = os.read(read_end, 4096)     # EOF when the launcher exits
                    if not chunk:
                        break
                    chunks.append(chunk)
                os.waitpid(pid, 0)
            except BaseException:
                # Not expected (SIGINT/SIGTERM are flags while a run is recorded), but never
                # leave the benchmark running.
                try:
                    os.kill(pid, signal.SIGTERM)
                    os.waitpid(pid, 0)
                except (ProcessLookupError, ChildProcessError):
                    pass
                raise
            finally:
                current_launcher = None
                for stop in hooks.stop:
                    stop()
        finally:
            os.close(read_end)
            if write_end >= 0:
                os.close(write_end)
        text = b"".join(chunks).decode(errors="replace")
        if _stop_sent and "exit=" not in text and "execerror=" not in text:
            # Stopped before the launcher was ready for signals: nothing ran to measure.
            return ProcessResult(0.0, 0.0, 0.0, 0, 0, 0, 128 + signal.SIGTERM, signal.SIGTERM, False, True, "", "")
        fields = parse_result(text, display)
        stdout = ""
        if spec.capture_stdout and spec.output is None:
            out.seek(0)
            stdout = out.read(STDOUT_LIMIT_BYTES).decode(errors="replace")
        size = err.seek(0, os.SEEK_END)
        err.seek(max(0, size - STDERR_TAIL_BYTES))
        tail = err.read().decode(errors="replace")
    return ProcessResult(
        wall=float(fields["wall"]), user=float(fields["utime"]), sys=float(fields["stime"]),
        maxrss_kib=int(fields["maxrss"]), voluntary_switches=int(fields["nvcsw"]),
        involuntary_switches=int(fields["nivcsw"]), exit_status=int(fields["exit"]),
        signal=int(fields["signal"]), timed_out=fields["timedout"] == "1",
        interrupted=fields["interrupted"] == "1", stdout=stdout, stderr_tail=tail,
    )


class Background:
    """A long-running helper (a monitor's `perf record`) started through the launcher.

    The helper runs in its own process group under the launcher, which dies
    with perflab (parent-death signal) and then kills the helper's group, so a
    helper never outlives perflab, kill -9 included. Not timed, not measured.
    """

    def __init__(self, argv: list[str], launcher_pid: int, helper_pid: int, result_fd: int):
        self.argv = argv
        self.pid = helper_pid            # the helper itself (its process group id too)
        self.launcher_pid = launcher_pid
        self._fd = result_fd
        self._buffer = b""
        self._exit: int | None = None    # the helper's exit status (128+N when killed by N)

    @property
    def alive(self) -> bool:
        return self._exit is None and not self._drain(0)

    @property
    def exit_status(self) -> int | None:
        return self._exit

    def _drain(self, timeout: float | None) -> bool:
        """Read the launcher's report until it ends (True) or `timeout` seconds pass (False)."""
        import select
        import time

        if self._fd < 0:
            return True
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self._fd], [], [], wait)
            if not ready:
                return False
            chunk = os.read(self._fd, 4096)
            if chunk:
                self._buffer += chunk
                continue
            os.close(self._fd)
            self._fd = -1
            try:
                os.waitpid(self.launcher_pid, 0)
            except ChildProcessError:
                pass
            fields = {}
            for line in self._buffer.decode(errors="replace").splitlines():
                if line.startswith("exit="):
                    fields = dict(word.split("=", 1) for word in line.split())
            self._exit = int(fields.get("exit", 128 + signal.SIGKILL))
            return True

    def wait(self, timeout: float | None = None) -> int | None:
        """The helper's exit status once it ended; None if it still runs after `timeout` seconds."""
        self._drain(timeout)
        return self._exit

    def send(self, sig: int) -> None:
        """Send `sig` to the helper's process group (not to the launcher)."""
        if self._exit is None:
            try:
                os.killpg(self.pid, sig)
            except ProcessLookupError:
                pass

    def stop(self, sig: int = signal.SIGINT, timeout: float = 10.0) -> int:
        """Ask the helper to finish (`sig`, SIGINT lets perf write its file), wait up to `timeout` s;
        then the launcher kills its group (SIGTERM, SIGKILL after its grace time)."""
        if self._exit is None:
            self.send(sig)
            if self.wait(timeout) is None:
                try:
                    os.kill(self.launcher_pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                self.wait()
        return self._exit if self._exit is not None else 128 + signal.SIGKILL

    close = stop


def _output_fd(target, stack) -> int:
    """stdout/stderr of a helper: None -> /dev/null, an int fd, or a path (created or truncated)."""
    if target is None:
        target = os.devnull
    if isinstance(target, int):
        return target
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    stack.append(fd)
    return fd


def start_background(argv: Sequence[str], *, stdout=None, stderr=None, cwd: str | None = None,
                     grace: float = DEFAULT_GRACE) -> Background:
    """Start a helper process in the background through the launcher; returns once it has exec'd.

    Call it from the main thread: the launcher's parent-death signal fires when the
    thread that started it ends. stdout/stderr: None (/dev/null), a path or a file descriptor.
    Raises PerflabError when the program cannot be started.
    """
    display = " ".join(argv)
    options = ["-G", f"{grace:g}"]
    cwd = cwd or run_directory()
    if cwd:
        options += ["-C", cwd]
    command = [os.fsencode(str(launcher())), *map(os.fsencode, options), b"--", *map(os.fsencode, argv)]
    opened: list[int] = []
    read_end, write_end = os.pipe()
    try:
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, _output_fd(stdout, opened), 1),
            (os.POSIX_SPAWN_DUP2, _output_fd(stderr, opened), 2),
            (os.POSIX_SPAWN_DUP2, write_end, 3),
        ]
        try:
            # Its own process group: a terminal's Ctrl-C reaches perflab, which stops the
            # helper in order (perf writes its file), not the helper directly.
            pid = os.posix_spawn(command[0], command, os.environb, file_actions=actions, setpgroup=0)
        except OSError as e:
            os.close(read_end)
            raise PerflabError(f"cannot start perflab's launcher for {display!r}: {e.strerror}") from None
    finally:
        os.close(write_end)
        for fd in opened:
            os.close(fd)
    os.set_inheritable(read_end, False)
    # The launcher says "pid=N" once the helper has exec'd, or "execerror=E".
    text = b""
    while b"\n" not in text:
        chunk = os.read(read_end, 4096)
        if not chunk:
            break
        text += chunk
    first, _, rest = text.partition(b"\n")
    line = first.decode(errors="replace")
    if not line.startswith("pid="):
        os.close(read_end)
        os.waitpid(pid, 0)
        parse_result(line, display)     # raises with the reason
        raise PerflabError(f"{display!r}: perflab's launcher ended without starting it")
    helper = Background(list(argv), pid, int(line.split("=", 1)[1]), read_end)
    helper._buffer = rest
    return helper

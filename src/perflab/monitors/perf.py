"""perf-stat and perf-profile: perf(1) beside the benchmark, only during its timed part.

Both start perf through the runner's launcher (runner.executor.start_background:
its own process group, gone with perflab even on kill -9) ahead of use, with
counting disabled (`-D -1`) and a control FIFO (`--control fifo:CTL,ACK`),
and wait until it answers "ping"; begin() writes "enable" and returns once
perf acknowledged, so counting starts at the timed part and perf's own
start-up is in no timed part. end() writes "disable" and waits for the ack;
perf is then stopped with SIGINT (it writes its file) and the next one started.

perf-stat (`perf stat -a -x; -I MS`): interval counts summed per event.
Software and hardware events give `perf-stat.EVENT` (per second of counted
time) and `perf-stat.EVENT.total`; tracepoints (`group:name`) give
`perf-stat.GROUP:NAME` (the count) and `perf-stat.GROUP:NAME.per_s`. What this
machine cannot count (hardware counters in a VM, a tracepoint group this
kernel lacks) is found once per perflab process and listed as unsupported.

perf-profile (`perf record -a -g`): read back with `perf script` and reduced
here, as `perf report --children` would: per symbol the share of samples
(weighted by period) whose leaf it is (self) and whose call chain contains it
(children), and LKP's 5-frame call traces. docs/monitors-perf.md.
"""

from __future__ import annotations

import difflib
import fnmatch
import hashlib
import json
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Iterable, Iterator
from typing import ClassVar, Literal

from pydantic import Field, field_validator

from perflab.core.errors import PerflabError
from perflab.monitors.base import Collected, Monitor, MonitorOptions, Unavailable, informational

PARANOID = "/proc/sys/kernel/perf_event_paranoid"
TRACEFS_EVENTS = ("/sys/kernel/tracing/events", "/sys/kernel/debug/tracing/events")
# The software events LKP's perf-stat counts, and the two hardware events every report shows.
DEFAULT_EVENTS = ("context-switches", "cpu-migrations", "page-faults", "minor-faults", "major-faults",
                  "cpu-clock", "task-clock", "cycles", "instructions")
SEP = ";"                 # perf stat's field separator (-x): PMU event terms may contain commas
ACK_TIMEOUT = 30.0        # perf record -a -g synthesises every process's maps before it can enable
STOP_TIMEOUT = 60.0       # perf record writes its file after SIGINT
METRIC_MAX = 255          # the store's metric column

# What this perflab process found out about perf, once (perf's start-up costs ~50 ms a call).
_DETECTED: dict[str, object] = {}


class PerfFailed(PerflabError):
    """perf ended or misbehaved mid-run; the message carries perf's own words."""


def _monitor_error(message: str) -> Exception:
    from perflab.monitors import MonitorError   # the package imports this module lazily

    return MonitorError(message)


# ---- what the machine can do ------------------------------------------------------------------

def perf_binary() -> str:
    """The perf command, checked to run (Debian's /usr/bin/perf is a wrapper that fails without
    the package for the running kernel); Unavailable naming the package otherwise."""
    path = shutil.which("perf")
    key = f"binary:{path}"
    if key not in _DETECTED:
        found: object = Unavailable("perf not found: install the linux-perf package (perf for the running kernel)")
        if path:
            try:
                proc = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
                if proc.returncode == 0 and proc.stdout.startswith("perf version"):
                    found = path
                else:
                    why = (proc.stderr or proc.stdout).strip().splitlines()
                    found = Unavailable(f"{path} does not run ({why[0] if why else f'exit {proc.returncode}'}): "
                                        "install the linux-perf package for the running kernel")
            except (OSError, subprocess.TimeoutExpired) as e:
                found = Unavailable(f"{path} does not run ({e}): install the linux-perf package")
        _DETECTED[key] = found
    found = _DETECTED[key]
    if isinstance(found, Unavailable):
        raise found
    return str(found)


def _has_capability(bit: int) -> bool:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> bit & 1)
    except (OSError, ValueError):
        pass
    return False


def check_permission(tracepoints: bool, paranoid_path: str = PARANOID, privileged: bool | None = None) -> None:
    """System-wide counting (-a) as a user needs perf_event_paranoid <= 0, tracepoints <= -1,
    unless the process is privileged: root, or CAP_PERFMON (38) / CAP_SYS_ADMIN (21)."""
    if privileged is None:
        privileged = os.geteuid() == 0 or _has_capability(38) or _has_capability(21)
    if privileged:
        return
    try:
        level = int(Path(paranoid_path).read_text().split()[0])
    except (OSError, ValueError, IndexError) as e:
        raise Unavailable(f"cannot read {paranoid_path} ({e}); perf needs it to count system-wide") from None
    needed = -1 if tracepoints else 0
    if level > needed:
        what = "system-wide tracepoint counting" if tracepoints else "system-wide counting (perf -a)"
        raise Unavailable(f"{paranoid_path} is {level}; {what} as a non-root user needs {needed} or lower "
                          f"(sysctl kernel.perf_event_paranoid={needed}), or run perflab as root")


def is_tracepoint(event: str) -> bool:
    """`sched:sched_switch`, `pagefault:*` — not `cycles:u` (a modifier) nor `cpu/.../` (PMU terms)."""
    if "/" in event or ":" not in event:
        return False
    return not re.fullmatch(r"[ukhIGHpPSDWe]+", event.split(":", 1)[1])


def tracefs_events() -> Path | None:
    for d in TRACEFS_EVENTS:
        try:
            if os.path.isdir(d) and os.listdir(d):
                return Path(d)
        except OSError:
            continue
    return None


def expand_tracepoints(events: list[str]) -> tuple[list[str], list[str]]:
    """Tracepoint globs -> the tracepoints this kernel has; (events, unsupported with the reason).

    Without a readable tracefs the names are left to perf (it expands globs itself).
    """
    root = tracefs_events()
    out: list[str] = []
    unsupported: list[str] = []
    for event in events:
        if not is_tracepoint(event) or root is None:
            out.append(event)
            continue
        group, pattern = event.split(":", 1)
        gdir = root / group
        if not gdir.is_dir():
            unsupported.append(f"{event} (no tracepoint group {group!r} on this kernel)")
            continue
        names = sorted(n for n in os.listdir(gdir) if (gdir / n).is_dir())
        matched = [n for n in names if fnmatch.fnmatchcase(n, pattern)]
        if not matched:
            near = difflib.get_close_matches(pattern, names, n=2)
            hint = f"; near: {', '.join(f'{group}:{n}' for n in near)}" if near else ""
            unsupported.append(f"{event} (no such tracepoint on this kernel{hint})")
            continue
        out.extend(f"{group}:{n}" for n in matched if f"{group}:{n}" not in out)
    return out, unsupported


def _syntax_error(stderr: str) -> str | None:
    """perf's reason when it refused an event name ('unknown tracepoint', 'parser error' ...)."""
    if "event syntax error" not in stderr:
        return None
    for line in stderr.splitlines():
        if "\\___" in line:
            return line.split("\\___", 1)[1].strip()
    return "event syntax error"


def probe_events(events: list[str]) -> dict[str, str]:
    """Which events this machine counts: {event: "ok" | reason it cannot}. Cached per process.

    An event name perf does not know at all raises MonitorError (naming it, pointing at `perf
    list`); a tracepoint perf cannot find and a counter the machine lacks are reasons, not errors.
    """
    perf = perf_binary()
    todo = [e for e in events if f"event:{e}" not in _DETECTED]
    if todo:
        verdicts = _probe(perf, todo)
        if verdicts is None:   # perf refused the list: find the culprit(s) one by one
            verdicts = {}
            for e in todo:
                verdicts.update(_probe(perf, [e]) or {})
        for e, v in verdicts.items():
            _DETECTED[f"event:{e}"] = v
    out = {}
    for e in events:
        v = _DETECTED[f"event:{e}"]
        if isinstance(v, Exception):
            raise v
        out[e] = str(v)
    return out


def _probe(perf: str, events: list[str]) -> dict[str, object] | None:
    args = [perf, "stat", "-a", "-x", SEP]
    for e in events:
        args += ["-e", e]
    try:
        proc = subprocess.run([*args, "--", "true"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Unavailable(f"perf stat does not run here: {e}") from None
    reason = _syntax_error(proc.stderr)
    if proc.returncode != 0 and reason is not None:
        if len(events) > 1:
            return None
        event = events[0]
        if is_tracepoint(event) or "tracepoint" in reason:
            return {event: f"not on this kernel (perf: {reason})"}
        return {event: _monitor_error(
            f"perf-stat: unknown event {event!r} (perf: {reason}); `perf list` lists the events this machine knows")}
    if proc.returncode != 0:
        words = [l.strip() for l in proc.stderr.splitlines() if l.strip()]
        raise Unavailable(f"perf stat -a fails here: {' | '.join(words[:3]) or f'exit {proc.returncode}'}")
    out: dict[str, object] = {e: "ok" for e in events}
    for line in proc.stderr.splitlines():
        parts = line.split(SEP)
        if len(parts) >= 3 and parts[0] == "<not supported>":
            name = parts[2]
            for e in events:
                if e == name or e.split(":")[0] == name.split(":")[0] and not is_tracepoint(e):
                    out[e] = "not supported by this machine"
    return out


# ---- perf under the launcher, enabled only for the timed part -------------------------------------

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
            self.process = start_background([*argv[:2], "-D", "-1", "--control", f"fifo:{ctl},{ack}", *argv[2:]],
                                            stderr=str(stderr))
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


def _remove_orphaned_workdirs() -> None:
    """Temp dirs of perflab processes that are gone (kill -9 skips close()): perf.data can be large."""
    root = Path(tempfile.gettempdir())
    try:
        entries = list(root.glob(f"{WORKDIR_PREFIX}*"))
    except OSError:
        return
    for d in entries:
        pid = d.name[len(WORKDIR_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not os.path.exists(f"/proc/{pid}"):
            shutil.rmtree(d, ignore_errors=True)


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
            _remove_orphaned_workdirs()
            self._dir = Path(tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-{self.name}-"))
        return self._dir

    def perf_argv(self, output: Path) -> list[str]:
        """perf's command line writing to `output` (without -D and --control)."""
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


# ---- perf-stat --------------------------------------------------------------------------------

class PerfStatOptions(MonitorOptions):
    events: list[str] = Field(list(DEFAULT_EVENTS), description="perf events: software, hardware, tracepoints "
                              "(globs such as pagefault:*); `perf list` names them")

    @field_validator("events", mode="before")
    @classmethod
    def _event_list(cls, v):
        if isinstance(v, str):
            v = [e for e in v.replace("+", " ").split() if e]
        return v

    @field_validator("events")
    @classmethod
    def _events_named(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("name at least one event")
        for e in v:
            if not e.strip() or any(c.isspace() for c in e):
                raise ValueError(f"{e!r} is not an event name (`perf list` lists them)")
        return list(dict.fromkeys(v))


@dataclass
class StatPart:
    """What one perf stat gave for one timed process."""

    process: int | None
    seconds: float
    totals: dict[str, float]
    units: dict[str, str]
    rows: list[tuple[float, dict[str, float]]] = field(default_factory=list)


def online_cpus() -> int:
    try:
        text = Path("/sys/devices/system/cpu/online").read_text().strip()
        n = 0
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            n += int(hi or lo) - int(lo) + 1
        return n
    except (OSError, ValueError):
        return os.cpu_count() or 1


def parse_stat_intervals(text: str, ncpus: int) -> tuple[dict[str, float], dict[str, str], list[tuple[float, dict[str, float]]], set[str]]:
    """`perf stat -x; -I` output -> totals per event, units, per-interval rates, unsupported events.

    An interval's counted time is the counters' running time over the CPUs
    (system-wide counting sums it over every CPU); intervals where nothing
    was counted (before enable, after disable) are skipped.
    """
    totals: dict[str, float] = {}
    units: dict[str, str] = {}
    unsupported: set[str] = set()
    by_time: dict[str, dict[str, tuple[float, float]]] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(SEP)
        if len(parts) < 5:
            continue
        stamp, value, unit, event, running = parts[:5]
        if value == "<not supported>":
            unsupported.add(event)
            continue
        units.setdefault(event, unit)
        if value == "<not counted>":
            totals.setdefault(event, 0.0)
            continue
        try:
            count, ran = float(value), float(running or 0)
        except ValueError:
            continue
        totals[event] = totals.get(event, 0.0) + count
        by_time.setdefault(stamp, {})[event] = (count, ran)
    rows = []
    t = 0.0
    for stamp in sorted(by_time, key=float):
        counted = max(ran for _, ran in by_time[stamp].values()) / 1e9 / max(1, ncpus)
        if counted <= 0:
            continue
        t += counted
        rows.append((round(t, 6), {e: c / counted for e, (c, _) in by_time[stamp].items()}))
    return totals, units, rows, unsupported


def stat_samples(totals: dict[str, float], units: dict[str, str], seconds: float):
    """The samples of the summed counts: the naming rule of docs/monitors-perf.md."""
    out = []
    for event, count in totals.items():
        unit = units.get(event, "")
        rate = count / seconds if seconds > 0 else 0.0
        if is_tracepoint(event):
            out.append(informational(f"perf-stat.{event}", count, unit))
            out.append(informational(f"perf-stat.{event}.per_s", rate, f"{unit}/s"))
        else:
            out.append(informational(f"perf-stat.{event}", rate, f"{unit}/s"))
            out.append(informational(f"perf-stat.{event}.total", count, unit))
    return out


class PerfStat(PerfMonitor):
    name = "perf-stat"
    summary = "perf stat -a of software, hardware and tracepoint events during the timed part"
    records = ("perf-stat.context-switches (/s), perf-stat.context-switches.total, "
               "perf-stat.sched:sched_switch (count), perf-stat.sched:sched_switch.per_s")
    Options = PerfStatOptions

    def __init__(self, options: PerfStatOptions):
        super().__init__(options)
        self.events: list[str] = []
        self._parts: list[StatPart] = []
        self._process: int | None = None

    def check(self) -> None:
        perf_binary()
        wanted = list(self.options.events)
        check_permission(any(is_tracepoint(e) for e in wanted))
        events, unsupported = expand_tracepoints(wanted)
        verdicts = probe_events(events)
        for e, v in verdicts.items():
            if v == "ok":
                self.events.append(e)
            else:
                unsupported.append(e if v == "not supported by this machine" else f"{e} ({v})")
        self.unsupported = unsupported
        if not self.events:
            raise Unavailable(f"none of the events can be counted here: {', '.join(unsupported)}")
        self.check_launch()

    def output_name(self, n: int) -> str:
        return f"stat-{n}.txt"

    def perf_argv(self, output: Path) -> list[str]:
        interval_ms = max(10, int(round(self.options.interval * 1000)))
        argv = [perf_binary(), "stat", "-a", "-x", SEP, "-I", str(interval_ms)]
        for e in self.events:
            argv += ["-e", e]
        return [*argv, "-o", str(output)]

    def begin(self, now: float, process: int | None) -> None:
        self._process = process
        self._enable()

    def end(self, now: float) -> None:
        # One perf stat per timed process: its intervals are that process's series.
        if self._perf is None:
            return
        seconds = self._disable()
        out = self._finish()
        text = out.read_text(errors="replace")
        out.unlink(missing_ok=True)
        totals, units, rows, unsupported = parse_stat_intervals(text, online_cpus())
        if not totals and not unsupported:
            raise PerfFailed(f"perf stat wrote no counts to {out}")
        self._parts.append(StatPart(self._process, seconds, totals, units, rows))
        self._prelaunch()

    def collect(self) -> Collected:
        parts, self._parts = self._parts, []
        if not parts:
            return Collected()
        totals: dict[str, float] = {}
        units: dict[str, str] = {}
        for p in parts:
            for e, c in p.totals.items():
                totals[e] = totals.get(e, 0.0) + c
            units.update(p.units)
        seconds = sum(p.seconds for p in parts)
        series = [(p.process, t, values) for p in parts for t, values in p.rows]
        return Collected(samples=stat_samples(totals, units, seconds), series=series)


# ---- perf-profile -----------------------------------------------------------------------------

class PerfProfileOptions(MonitorOptions):
    event: Literal["auto", "cycles", "cpu-clock"] = Field(
        "auto", description="sampled event: auto is cycles where the machine counts it, cpu-clock otherwise")
    freq: int = Field(999, ge=1, le=100000, description="samples per second per CPU (perf record -F)")
    call_graph: Literal["fp", "dwarf"] = Field("fp", description="how perf walks stacks (fp: frame pointers)")
    min_children: float = Field(0.5, ge=0, le=100, description="store a symbol whose children%% reaches this")
    min_self: float = Field(0.1, ge=0, le=100, description="... or whose self%% reaches this")
    calltraces: int = Field(10, ge=0, le=1000, description="how many call traces to store at most")
    min_calltrace: float = Field(1.0, ge=0, le=100, description="store a call trace whose share reaches this")


KERNEL_SPACE = 1 << 63      # x86-64 and arm64 kernel addresses have the top bit set
CALLTRACE_FRAMES = 5        # LKP's call traces: a frame and its 4 callers
UNKNOWN = "[unknown]"


@dataclass
class Frame:
    ip: int
    symbol: str
    dso: str

    @property
    def kernel(self) -> bool:
        return self.ip >= KERNEL_SPACE or self.dso == "[kernel.kallsyms]"


@dataclass
class ProfileSample:
    comm: str
    pid: int
    period: int
    frames: list[Frame]      # leaf first


def parse_perf_script(lines: Iterable[str] | str) -> Iterator[ProfileSample]:
    """`perf script -F comm,pid,period,ip,sym,dso` of a -g recording -> samples, leaf first, one at a time.

    A sample is a header line ("comm pid period"; comm may hold spaces) and its
    frames ("addr symbol (dso)"; the symbol may hold spaces and parentheses).
    """
    if isinstance(lines, str):
        lines = lines.splitlines()
    current: ProfileSample | None = None
    for line in lines:
        if not line.strip():
            if current is not None:
                yield current
            current = None
            continue
        if line[0] in " \t" and current is not None:
            body = line.strip()
            addr, _, rest = body.partition(" ")
            symbol, sep, dso = rest.rpartition(" (")
            if not sep:
                symbol, dso = rest, UNKNOWN + ")"
            try:
                ip = int(addr, 16)
            except ValueError:
                continue
            current.frames.append(Frame(ip, symbol.strip() or UNKNOWN, dso[:-1] if dso.endswith(")") else dso))
            continue
        words = line.split()
        if len(words) < 3:
            continue
        try:
            pid, period = int(words[-2]), int(words[-1])
        except ValueError:
            continue
        if current is not None:
            yield current
        current = ProfileSample(" ".join(words[:-2]), pid, period, [])
    if current is not None:
        yield current


@dataclass
class SymbolShare:
    symbol: str
    kind: str          # "[k]" kernel, "[.]" user space
    comm: str          # the command with most of its samples
    children: float    # percent of all samples (by period) whose chain contains it
    self: float        # percent whose leaf it is


@dataclass
class Profile:
    total: int                                 # summed period of every sample
    samples: int
    symbols: dict[str, SymbolShare]
    calltraces: dict[tuple[str, ...], float]   # leaf-first 5-frame windows -> percent

    def top(self, n: int, by: str = "children") -> list[SymbolShare]:
        return sorted(self.symbols.values(), key=lambda s: (-getattr(s, by), s.symbol))[:n]


def reduce_profile(samples: Iterable[ProfileSample]) -> Profile:
    """Self and children shares per symbol as `perf report --children --sort sym` computes them,
    weighted by period; a symbol counts once per sample however often it recurs.

    Identical stacks are summed first (a hot loop repeats its stack thousands of times),
    so memory and time go with the distinct stacks, not with the samples.
    """
    stacks: dict[tuple, int] = {}
    total = count = 0
    for s in samples:
        count += 1
        total += s.period
        if s.frames:
            key = (s.comm, tuple(f.symbol for f in s.frames), tuple(f.kernel for f in s.frames))
            stacks[key] = stacks.get(key, 0) + s.period
    self_w: dict[str, int] = {}
    children_w: dict[str, int] = {}
    comm_w: dict[str, dict[str, int]] = {}
    kernel: dict[str, bool] = {}
    trace_w: dict[tuple[str, ...], int] = {}
    for (comm, names, kernels), period in stacks.items():
        if names[0] != UNKNOWN:
            self_w[names[0]] = self_w.get(names[0], 0) + period
        for name, k in zip(names, kernels):
            if name != UNKNOWN and name not in kernel:
                kernel[name] = k
        for sym in set(names) - {UNKNOWN}:
            children_w[sym] = children_w.get(sym, 0) + period
            per_comm = comm_w.setdefault(sym, {})
            per_comm[comm] = per_comm.get(comm, 0) + period
        windows = {names[i:i + CALLTRACE_FRAMES] for i in range(len(names)) if names[i] != UNKNOWN}
        for w in windows:
            trace_w[w] = trace_w.get(w, 0) + period
    scale = 100.0 / total if total else 0.0
    symbols = {}
    for sym, w in children_w.items():
        comm = max(comm_w[sym].items(), key=lambda kv: (kv[1], kv[0]))[0]
        symbols[sym] = SymbolShare(sym, "[k]" if kernel.get(sym) else "[.]", comm, w * scale,
                                   self_w.get(sym, 0) * scale)
    return Profile(total, count, symbols, {w: v * scale for w, v in trace_w.items()})


def metric_name(prefix: str, symbol: str) -> str:
    """prefix + symbol, cut to the store's column with a hash of the whole name kept."""
    name = prefix + symbol
    if len(name) <= METRIC_MAX:
        return name
    digest = hashlib.sha1(name.encode()).hexdigest()[:10]
    return name[:METRIC_MAX - 11] + "~" + digest


def profile_samples(profile: Profile, options: PerfProfileOptions):
    """LKP's perf-profile metrics of one repetition: symbols above the floors, the top call traces."""
    out = []
    for s in sorted(profile.symbols.values(), key=lambda s: (-s.children, s.symbol)):
        if s.children >= options.min_children or s.self >= options.min_self:
            out.append(informational(metric_name("perf-profile.children.cycles-pp.", s.symbol), s.children, "%"))
            out.append(informational(metric_name("perf-profile.self.cycles-pp.", s.symbol), s.self, "%"))
    traces = sorted(((v, w) for w, v in profile.calltraces.items()
                     if len(w) > 1 and v >= options.min_calltrace), key=lambda vw: (-vw[0], vw[1]))
    for v, w in traces[:options.calltraces]:
        out.append(informational(metric_name("perf-profile.calltrace.cycles-pp.", ".".join(w)), v, "%"))
    return out


SYMBOLS_FIELD_KIND = "symbol"


def symbol_row(profile: Profile, options: PerfProfileOptions) -> dict[str, float]:
    """The per-symbol facts the stored metrics cannot say (comm, [k]/[.]): one series row whose
    field names are JSON ["symbol", kind, comm, symbol] and whose values are the children%.

    Field names carry the strings so the row stays {field: number} like every series row.
    """
    return {json.dumps([SYMBOLS_FIELD_KIND, s.kind, s.comm, s.symbol]): round(s.children, 4)
            for s in profile.symbols.values()
            if s.children >= options.min_children or s.self >= options.min_self}


def symbols_from_series(values: dict[str, float]) -> dict[str, tuple[str, str]]:
    """symbol_row's fields back to {symbol: (comm, kind)}; other fields are ignored."""
    out = {}
    for key in values:
        if not key.startswith("["):
            continue
        try:
            tag, kind, comm, symbol = json.loads(key)
        except (ValueError, TypeError):
            continue
        if tag == SYMBOLS_FIELD_KIND:
            out[symbol] = (comm, kind)
    return out


def perf_script(perf: str, data: Path) -> Iterator[str]:
    """perf script's lines, streamed (a long system-wide profile is millions of lines)."""
    err = data.with_suffix(".script.err")
    with open(err, "wb") as errfile:
        proc = subprocess.Popen([perf, "script", "-i", str(data), "-F", "comm,pid,period,ip,sym,dso"],
                                stdout=subprocess.PIPE, stderr=errfile, text=True, errors="replace")
        try:
            yield from proc.stdout
        finally:
            proc.stdout.close()
            if proc.poll() is None:
                proc.kill()
            status = proc.wait()
    words = [l.strip() for l in err.read_text(errors="replace").splitlines() if l.strip()]
    err.unlink(missing_ok=True)
    if status != 0:
        raise PerfFailed(f"perf script -i {data} failed: {' | '.join(words[-3:]) or status}")


class PerfProfile(PerfMonitor):
    name = "perf-profile"
    summary = "perf record -a -g during the timed part: children/self % per symbol, top call traces"
    records = ("perf-profile.children.cycles-pp.SYMBOL, perf-profile.self.cycles-pp.SYMBOL (%), "
               "perf-profile.calltrace.cycles-pp.LEAF.CALLER... (%)")
    Options = PerfProfileOptions

    def __init__(self, options: PerfProfileOptions):
        super().__init__(options)
        self.event = "cpu-clock"
        self._seconds = 0.0      # counted in this repetition so far

    def check(self) -> None:
        perf_binary()
        check_permission(False)
        wanted = self.options.event
        if wanted in ("auto", "cycles"):
            if probe_events(["cycles"])["cycles"] == "ok":
                self.event = "cycles"
            elif wanted == "cycles":
                self.unsupported = ["cycles (sampling cpu-clock instead)"]
        if probe_events(["cpu-clock"])["cpu-clock"] != "ok" and self.event == "cpu-clock":
            raise Unavailable("perf cannot sample cpu-clock here")
        self.notes.append(f"perf-profile sampled {self.event} at {self.options.freq} Hz "
                          f"(metric names keep LKP's cycles-pp)")
        self.check_launch()

    def output_name(self, n: int) -> str:
        return f"perf-{n}.data"

    def perf_argv(self, output: Path) -> list[str]:
        graph = ["-g"] if self.options.call_graph == "fp" else ["--call-graph", "dwarf"]
        # --no-buildid: perf script reads the file at once, on this machine, so the build-id pass
        # perf record makes at its end (hundreds of ms) buys nothing.
        return [perf_binary(), "record", "-a", *graph, "-e", self.event, "-F", str(self.options.freq),
                "-q", "--no-buildid", "-o", str(output)]

    def begin(self, now: float, process: int | None) -> None:
        self._enable()

    def end(self, now: float) -> None:
        # One perf record per repetition, enabled only during its timed processes.
        if self._perf is not None:
            self._seconds += self._disable()

    def collect(self) -> Collected:
        if self._perf is None or self._seconds == 0:
            return Collected()
        seconds, self._seconds = self._seconds, 0.0
        data = self._finish()
        try:
            profile = reduce_profile(parse_perf_script(perf_script(perf_binary(), data)))
        finally:
            data.unlink(missing_ok=True)
            self._prelaunch()
        out = profile_samples(profile, self.options)
        out.append(informational("perf-profile.samples", profile.samples, ""))
        return Collected(samples=out, series=[(None, round(seconds, 6), symbol_row(profile, self.options))])

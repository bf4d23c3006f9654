"""Monitors: the evidence beside the verdict (LKP's vmstat, proc-vmstat, perf-stat, perf-profile ...).

A job names its monitors (`monitors: {vmstat: {interval: 1}, perf-stat: {events: [...]}}`),
or `perflab run ... --monitor NAME[:opt=val,...]` adds them. The runner makes
one MonitorSet per run: it validates the options, checks once what the
machine can give, and drives every monitor on the executor's start/stop hooks
around each timed benchmark process, with one sampler thread for the
monitors that read /proc. docs/monitors.md lists the names and reductions.
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from perflab.core.errors import UsageProblem

if TYPE_CHECKING:   # pydantic and base load on first use: `perflab detect` only needs monitor_of
    from perflab.monitors.base import Collected, Monitor, MonitorOptions

# name -> "module:Class" (imported on first use: perflab starts fast).
MONITORS: dict[str, str] = {
    "vmstat": "perflab.monitors.procfs:Vmstat",
    "proc-stat": "perflab.monitors.procfs:ProcStat",
    "proc-vmstat": "perflab.monitors.procfs:ProcVmstat",
    "meminfo": "perflab.monitors.procfs:Meminfo",
    "interrupts": "perflab.monitors.procfs:Interrupts",
    "softirqs": "perflab.monitors.procfs:Softirqs",
    "diskstats": "perflab.monitors.procfs:Diskstats",
    "sched_debug": "perflab.monitors.procfs:SchedDebug",
    "perf-stat": "perflab.monitors.perf.stat:PerfStat",
    "perf-profile": "perflab.monitors.perf.profile:PerfProfile",
    "insn-profile": "perflab.monitors.insns:InsnProfile",
}

# What `--monitor default` and the overhead benchmark mean by the default set.
DEFAULT_SET = ("vmstat", "proc-stat", "proc-vmstat", "meminfo", "interrupts", "perf-stat")


class MonitorError(UsageProblem):
    """A monitor, option or event that does not exist, or a bad value; the message lists the valid ones."""


def monitor_class(name: str, where: str = "") -> type[Monitor]:
    prefix = f"{where}: " if where else ""
    if name not in MONITORS:
        raise MonitorError(f"{prefix}unknown monitor {name!r}; valid: {', '.join(MONITORS)}")
    module, _, cls = MONITORS[name].partition(":")
    return getattr(importlib.import_module(module), cls)


def monitor_of(metric: str) -> str | None:
    """The monitor a metric name belongs to ('vmstat.cpu.sy' -> 'vmstat'), None for a benchmark's own."""
    head = metric.split(".", 1)[0]
    return head if head in MONITORS else None


def parse_options(name: str, raw: object, where: str = "") -> MonitorOptions:
    """Raw options (a mapping, or None) -> the monitor's options; MonitorError naming the key."""
    from pydantic import ValidationError

    cls = monitor_class(name, where)
    prefix = f"{where}: " if where else ""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise MonitorError(f"{prefix}monitor {name!r}: expected a mapping of options, got {raw!r}")
    try:
        return cls.Options(**raw)
    except ValidationError as e:
        err = e.errors()[0]
        key = ".".join(str(p) for p in err["loc"]) or name
        valid = ", ".join(cls.Options.model_fields)
        if err["type"] == "extra_forbidden":
            raise MonitorError(f"{prefix}monitor {name!r}: unknown option {key!r}; valid: {valid}") from None
        raise MonitorError(f"{prefix}monitor {name!r}: option {key!r} = {err.get('input')!r}: {err['msg'].removeprefix('Value error, ')}") from None


def validate(monitors: object, where: str = "") -> dict[str, dict]:
    """A job's `monitors` mapping, checked; {name: options as stored} (defaults filled in)."""
    prefix = f"{where}: " if where else ""
    if monitors in (None, {}):
        return {}
    if isinstance(monitors, list):   # `monitors: [vmstat, meminfo]` is accepted too
        monitors = {m: None for m in monitors}
    if not isinstance(monitors, dict):
        raise MonitorError(f"{prefix}key 'monitors': expected a mapping of monitor names to options")
    return {str(name): parse_options(str(name), raw, where).model_dump(mode="json") for name, raw in monitors.items()}


def parse_spec(text: str) -> dict[str, dict]:
    """`--monitor NAME[:opt=val,...]` ('default' is the default set) -> {name: raw options}."""
    from perflab.core.params import parse_scalar

    name, _, rest = text.partition(":")
    name = name.strip()
    if name == "default" and not rest:
        return {m: {} for m in DEFAULT_SET}
    options: dict[str, object] = {}
    if rest:
        # Values may be lists: perf-stat:events=[cs,faults] or events=cs+faults.
        for part in _split_top(rest):
            key, sep, value = part.partition("=")
            if not sep or not key.strip():
                raise MonitorError(f"--monitor {text!r}: expected NAME[:option=value,...]")
            parsed = parse_scalar(value)
            if key.strip() == "events" and isinstance(parsed, str):
                parsed = [e for e in parsed.split("+") if e]
            options[key.strip()] = parsed
    parse_options(name, options, f"--monitor {text!r}")
    return {name: options}


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside [...]."""
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    if current:
        parts.append(current)
    return parts


class MonitorSet:
    """The monitors of one run, driven by the runner around each timed process.

    A monitor that cannot run here (Unavailable), or that fails mid-run, is
    recorded and dropped; the benchmark and the other monitors go on.
    """

    def __init__(self, config: dict[str, dict], warn: Callable[[str], None] = lambda m: None):
        self.warn = warn
        self.active: list[Monitor] = []
        self.record: dict[str, dict] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        try:
            self._check_all(config)
        except BaseException:
            # A bad option or event of a later monitor: the ones already checked may have
            # started processes (perf is started ahead); stop them before the error goes up.
            self.close()
            raise

    def _check_all(self, config: dict[str, dict]) -> None:
        from perflab.monitors.base import Unavailable

        warn = self.warn
        for name, raw in config.items():
            options = parse_options(name, raw)
            mon = monitor_class(name)(options)
            entry = {"options": options.model_dump(mode="json"), "interval": options.interval,
                     "status": "ran", "unsupported": [], "errors": []}
            self.record[name] = entry
            try:
                mon.check()
            except Unavailable as e:
                entry["status"] = "unavailable"
                entry["errors"].append(str(e))
                warn(f"monitor {name} not run: {e}")
                continue
            entry["unsupported"] = list(mon.unsupported)
            if mon.notes:
                entry["notes"] = list(mon.notes)
            if mon.unsupported:
                warn(f"monitor {name}: not supported on this machine, not counted: {', '.join(mon.unsupported)}")
            self.active.append(mon)

    def __bool__(self) -> bool:
        return bool(self.active)

    def _failed(self, mon: Monitor, what: str, e: BaseException) -> None:
        entry = self.record[mon.name]
        entry["status"] = "failed"
        entry["errors"].append(f"{what}: {type(e).__name__}: {e}")
        self.warn(f"monitor {mon.name} failed ({what}: {e}); the run goes on without it")
        if mon in self.active:
            self.active.remove(mon)
        try:
            mon.close()
        except Exception:
            pass

    def begin(self, process: int | None = None) -> None:
        now = time.monotonic()
        for mon in list(self.active):
            try:
                mon.begin(now, process)
            except Exception as e:
                self._failed(mon, "start", e)
        sampled = [m for m in self.active if m.sampled]
        if sampled:
            self._stop.clear()
            self._thread = threading.Thread(target=self._sampler, args=(sampled, now), name="perflab-monitors",
                                            daemon=True)
            self._thread.start()

    def _sampler(self, monitors: list[Monitor], began: float) -> None:
        due = {id(m): began + m.options.interval for m in monitors}
        while True:
            wake = min(due.values())
            if self._stop.wait(max(0.0, wake - time.monotonic())):
                return
            now = time.monotonic()
            for mon in monitors:
                if due[id(mon)] <= now and mon in self.active:
                    try:
                        with self._lock:
                            mon.sample(now)
                    except Exception as e:
                        self._failed(mon, "sample", e)
                    # The next tick keeps the grid (no drift); a late tick does not pile up.
                    due[id(mon)] += mon.options.interval * max(1, int((now - due[id(mon)]) / mon.options.interval) + 1)

    def end(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        now = time.monotonic()
        for mon in list(self.active):
            try:
                mon.end(now)
            except Exception as e:
                self._failed(mon, "stop", e)

    def hooks(self, process: int | None = None):
        from perflab.execution.executor import Hooks

        return Hooks(start=[lambda: self.begin(process)], stop=[self.end])

    def collect(self) -> dict[str, Collected]:
        out = {}
        for mon in list(self.active):
            try:
                out[mon.name] = mon.collect()
                self.record[mon.name]["window"] = mon.counted_window   # what its figures cover (monitors.windows)
            except Exception as e:
                self._failed(mon, "collect", e)
        return out

    def close(self) -> None:
        self.end() if self._thread is not None else None
        for mon in self.active:
            try:
                mon.close()
            except Exception as e:
                self.record[mon.name]["errors"].append(f"close: {type(e).__name__}: {e}")
        self.active = []


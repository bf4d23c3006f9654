"""perf-stat: `perf stat -a -x; -I MS` during the timed part, interval counts summed per event.

Software and hardware events give `perf-stat.EVENT` (per second of counted
time) and `perf-stat.EVENT.total`; tracepoints (`group:name`) give
`perf-stat.GROUP:NAME` (the count) and `perf-stat.GROUP:NAME.per_s`. What this
machine cannot count is found once (perflab.monitors.perf.probe) and listed as
unsupported. docs/monitors-perf.md.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import Field, field_validator

from perflab.execution.targets import HOST_TOOLS
from perflab.monitors.base import Collected, MonitorOptions, Unavailable, informational
from perflab.monitors.perf.control import PerfFailed, PerfMonitor
from perflab.monitors.perf.probe import SEP, check_permission, expand_tracepoints, is_tracepoint, perf_binary, probe_events

# The software events LKP's perf-stat counts, and the two hardware events every report shows.
DEFAULT_EVENTS = ("context-switches", "cpu-migrations", "page-faults", "minor-faults", "major-faults",
                  "cpu-clock", "task-clock", "cycles", "instructions")


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
    needs = frozenset({HOST_TOOLS})      # in a guest: the host's perf, run there (perflab.monitors.guest)

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

    def perf_argv(self, output: Path, perf: str | None = None) -> list[str]:
        interval_ms = max(10, int(round(self.options.interval * 1000)))
        argv = [perf or perf_binary(), "stat", "-a", "-x", SEP, "-I", str(interval_ms)]
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

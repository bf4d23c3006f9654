"""The monitor interface: what a monitor tells the one runner.

A monitor gathers evidence beside a benchmark's own figures (LKP's vmstat,
proc-vmstat, perf-stat, perf-profile ...). It samples only during the timed
part of a run: the runner calls `begin` just before a timed benchmark process
starts and `end` just after it ended (runner.executor's start/stop hooks);
`sample` is called every `interval` seconds in between by the one sampler
thread of the run (perflab.monitors.MonitorSet), so a monitor that reads
/proc needs no process of its own. After each repetition the runner calls
`collect`: the repetition's per-run metrics (LKP's names and reductions) and
its time series, one row per interval.

A monitor knows nothing of the store or of other monitors.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Annotated, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from perflab.core.model import INFORMATIONAL, Sample
from perflab.core.params import in_range
from perflab.execution.targets import HOST_PROCESSES
from perflab.monitors import windows


class MonitorOptions(BaseModel):
    """Options every monitor takes; a monitor's own model extends it. Unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    interval: Annotated[float, in_range(0.01, message="must be a number of seconds >= 0.01")] = Field(
        1.0, description="seconds between two samples of the time series")


class Unavailable(Exception):
    """The monitor cannot run on this machine; the message says what is missing (a package, a setting)."""


@dataclass
class Collected:
    """What one repetition gave: per-run metrics and the time series (t, {field: value})."""

    samples: list[Sample] = field(default_factory=list)
    series: list[tuple[int | None, float, dict[str, float]]] = field(default_factory=list)  # (process, t, values)


class Monitor:
    """A monitor: subclass it and register it in perflab.monitors.MONITORS."""

    name: ClassVar[str]
    summary: ClassVar[str]       # one line: what it is
    records: ClassVar[str]       # what it records, with example metric names
    Options: ClassVar[type[MonitorOptions]] = MonitorOptions
    sampled: ClassVar[bool] = True   # False: the sampler thread never calls sample() (e.g. perf runs its own)
    # What it asks of the place the process runs (perflab.execution.targets' capabilities), which
    # every target fulfils where its processes run or refuses in one line: by default this
    # machine's processes; FILE_READINGS for files read there (a guest's or an SSH machine's agent
    # reads them: perflab.monitors.guest), HOST_TOOLS for perf run beside the process.
    needs: ClassVar[frozenset[str]] = frozenset({HOST_PROCESSES})
    # The window its figures cover, and its metrics (names after "MONITOR.") read from the kernel's
    # tick accounting: declared in perflab.monitors.windows.DECLARED by name, so views need not
    # import this class; by default the benchmark process's life, from the executor's start hook
    # to its stop hook. A monitor that chooses at run time says what it counted in
    # `counted_window` after a repetition.
    window: ClassVar[str] = windows.PROCESS
    tick_sampled: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            cls.window, cls.tick_sampled = windows.declared(cls.name)

    def __init__(self, options: MonitorOptions):
        self.options = options
        self.unsupported: list[str] = []   # parts this machine cannot give (hardware events ...)
        self.notes: list[str] = []         # anything else worth keeping with the run

    @property
    def counted_window(self) -> str:
        """The window the figures collected so far cover (the declared one unless the monitor chose)."""
        return self.window

    def check(self) -> None:
        """Detect once whether this machine can give what was asked; Unavailable if nothing at all.

        Parts that cannot be given are listed in self.unsupported (the run goes on without them).
        """

    def begin(self, now: float, process: int | None) -> None:
        """The timed part of one benchmark process starts (monotonic clock `now`)."""

    def sample(self, now: float) -> None:
        """One tick of the time series (from the sampler thread)."""

    def end(self, now: float) -> None:
        """The timed part ended."""

    def collect(self) -> Collected:
        """The metrics and series of the timed parts since the last collect (one repetition)."""
        return Collected()

    def close(self) -> None:
        """Release everything (stop processes, remove files); called once, also after a failure."""


def informational(metric: str, value: float, unit: str = "") -> Sample:
    return Sample(metric, float(value), unit, INFORMATIONAL)


class Snapshots:
    """Readings of /proc-style counters and gauges over the timed parts of one repetition.

    `add(t, reading)` keeps one reading (field -> number). A timed part is
    begun and ended with a reading each, so a part shorter than the interval
    still has its delta. Reductions follow LKP: counters are last minus first
    (summed over the timed parts), per second over the timed time; gauges are
    the mean of the readings.
    """

    def __init__(self):
        self.parts: list[tuple[int | None, list[tuple[float, dict[str, float]]]]] = []

    def begin(self, process: int | None, t: float, reading: dict[str, float]) -> None:
        self.parts.append((process, [(t, reading)]))

    def add(self, t: float, reading: dict[str, float]) -> None:
        if self.parts:
            self.parts[-1][1].append((t, reading))

    def clear(self) -> None:
        self.parts = []

    @property
    def seconds(self) -> float:
        return sum(r[-1][0] - r[0][0] for _, r in self.parts if len(r) > 1)

    def deltas(self) -> dict[str, float]:
        """Counter fields: last minus first, summed over the timed parts."""
        total: dict[str, float] = {}
        for _, readings in self.parts:
            if len(readings) < 2:
                continue
            first, last = readings[0][1], readings[-1][1]
            for k, v in last.items():
                if k in first:
                    total[k] = total.get(k, 0.0) + (v - first[k])
        return total

    def means(self, fields: Iterable[str] | None = None) -> dict[str, float]:
        """Gauge fields: the mean of every reading."""
        sums: dict[str, float] = {}
        counts: dict[str, int] = {}
        for _, readings in self.parts:
            for _, reading in readings:
                for k, v in reading.items():
                    if fields is None or k in fields:
                        sums[k] = sums.get(k, 0.0) + v
                        counts[k] = counts.get(k, 0) + 1
        return {k: sums[k] / counts[k] for k in sums}

    def interval_rows(self, counters: set[str] | None, gauges: set[str] | None = None):
        """One series row per interval: counters as rate per second over it, gauges as read at its end."""
        rows = []
        for process, readings in self.parts:
            t0 = readings[0][0]
            for (ta, a), (tb, b) in zip(readings, readings[1:]):
                span = tb - ta
                if span <= 0:
                    continue
                values = {}
                for k, v in b.items():
                    if counters is None or k in counters:
                        if k in a:
                            values[k] = (v - a[k]) / span
                    elif gauges is None or k in gauges:
                        values[k] = v
                rows.append((process, round(tb - t0, 6), values))
        return rows

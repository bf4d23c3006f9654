"""What a comparison produces: one row per matched metric, and the result the renderers format.

The rows carry the statistics (perflab.stats.compare) of each head against the base and
LKP's display rules for the monitors' metrics; perflab.analysis.comparison builds them.
"""

from __future__ import annotations

import fnmatch
import math
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property

from perflab.analysis import naming
from perflab.core.model import INFORMATIONAL
from perflab.monitors import MONITORS
from perflab.analysis.selection import Selection
from perflab.stats.compare import CHANGED, IMPROVEMENT, PRIMARY, REGRESSION, Comparison
from perflab.stats.descriptive import Summary

# Which monitor metrics a comparison keeps and the text layouts show (`--monitors`):
# "none" drops them before any statistics, "changed" shows the significant ones
# above the noise floor, "all" shows every one. json and csv carry every row kept.
MONITOR_MODES = ("changed", "all", "none")
# LKP's display rules for the monitor rows of the "changed" view (docs/monitors-compare.md):
# a perf-profile share is shown when it is at least this many percentage points on some
# side; an event counter whose rate stays below RATE_FLOOR, or whose total stays below
# COUNT_FLOOR, on every side is noise (its rate and total rows alike).
PERF_PROFILE_SHARE = 5.0
RATE_FLOOR = 1.0      # events per second
COUNT_FLOOR = 100.0   # events in one repetition
PERF_PROFILE = "perf-profile"
# LKP calls a non-KPI stat changed only when it moved by 5% or more: the monitor FDR group's
# minimum effect (never below --threshold).
MONITOR_MIN_EFFECT = 0.05
RATE, TOTAL = "rate", "total"
_UNSET = object()


@dataclass(frozen=True)
class FdrGroup:
    """One FDR group of one head's comparison (metrics whose false-discovery rate is
    controlled together): how many metrics its adjustment covered."""

    name: str            # "primary", "secondary" or "monitor"
    tested: int          # directional metrics: one Benjamini-Hochberg adjustment per direction over these
    informational: int   # informational metrics: two-sided, adjusted among themselves
    untested: int        # too few samples to be tested: not in the adjustment
    exact: int = 0       # exact metrics (perflab.stats.exact): called against their resolution, not in the adjustment


@dataclass
class MetricRow:
    """One (box, benchmark, params, metric) across the operands."""

    box: str | None
    benchmark: str
    params: dict
    metric: str
    unit: str
    direction: int
    base: Summary
    base_values: list[float]
    # One entry per head operand: its comparison with the base, or None when
    # the head has no samples of this group.
    heads: list[Comparison | None]
    head_values: list[list[float] | None]
    fdr_group: str = PRIMARY  # the FDR group it is tested in: "primary", "secondary" or "monitor"
    monitor: str | None = None  # the monitor that recorded it (perflab.monitors.monitor_of), None for the benchmark's own
    # An event counter of a monitor: RATE (per second) or TOTAL (in a repetition), with the
    # other figure of the same counter when the comparison holds it (see pair_counters).
    counter: str | None = None
    sibling: MetricRow | None = field(default=None, repr=False, compare=False)
    _noise: object = field(default=_UNSET, repr=False, compare=False)  # noise(), computed on first use
    # Its name among the result's rows (analysis.naming: family and the parameters that tell rows apart).
    name: str = field(default="", compare=False)

    @property
    def family(self) -> str:
        """The former name of fdr_group, still read by the renderers and in exports."""
        return self.fdr_group

    @property
    def in_points(self) -> bool:
        """perf-profile shares change by percentage points (LKP prints "+2.3", not a %change)."""
        return self.monitor == PERF_PROFILE and self.unit == "%"

    def top(self) -> float:
        """The largest |center| over the sides (NaN when none): what the display floors compare."""
        centers = [abs(self.base.center)] + [abs(c.head.center) for c in self.heads if c is not None]
        return max((x for x in centers if x == x), default=math.nan)

    def point_change(self, head: int = 0) -> float:
        """Head minus base of the centers (percentage points for a perf-profile share); NaN when absent."""
        cmp = self.heads[head]
        return cmp.head.center - self.base.center if cmp is not None else math.nan

    def change_size(self) -> float:
        """How much the row moved, over its heads: |points| for perf-profile shares, else |%change|."""
        sizes = [abs(self.point_change(i) if self.in_points else c.pct_change)
                 for i, c in enumerate(self.heads) if c is not None]
        return max((x for x in sizes if x == x), default=0.0)

    def significant(self, head: int | None = None) -> bool:
        """Whether a head (any head when None) called a change: regression, improvement or, informational, changed."""
        cmps = self.heads if head is None else [self.heads[head]]
        return any(c is not None and c.verdict in (REGRESSION, IMPROVEMENT, CHANGED) for c in cmps)

    def noise(self) -> str | None:
        """Why the changed view leaves this monitor row out although it changed, or None (docs/monitors-compare.md)."""
        if self._noise is _UNSET:
            self._noise = self._noise_reason()
        return self._noise

    def _noise_reason(self) -> str | None:
        if self.monitor is None:
            return None
        if self.in_points:
            if self.top() < PERF_PROFILE_SHARE:
                return f"perf-profile share below {PERF_PROFILE_SHARE:g}% on every side"
            return None
        figures = {self.counter: self.top()}
        if self.sibling is not None:
            figures[self.sibling.counter] = self.sibling.top()
        if figures.get(RATE, math.inf) < RATE_FLOOR:
            return f"below the floor of {RATE_FLOOR:g} per second on every side"
        if figures.get(TOTAL, math.inf) < COUNT_FLOOR:
            return f"below the floor of {COUNT_FLOOR:g} events per repetition on every side"
        return None

    @property
    def testcase(self) -> str:
        """The group's name among the rows of its result (analysis.naming); alone, its own name."""
        return self.name or naming.name(self.benchmark, self.params)


@dataclass
class ComparisonResult:
    labels: list[str]  # operand labels, base first
    selections: list[Selection]
    rows: list[MetricRow]
    # Groups present on one side only: (operand label, "benchmark params metric") — listed, never dropped.
    one_sided: list[tuple[str, str]]
    common: dict
    env_diff: list[tuple[str, object, object]] | None
    alpha: float
    threshold: float
    warnings: list[str] = field(default_factory=list)
    # Per head: its FDR groups (primary first), and benchstat's geomean row,
    # the geometric mean of the median ratios of the directional metrics of each unit.
    fdr_groups: list[list[FdrGroup]] = field(default_factory=list)
    median_geomeans: list[dict[str, float]] = field(default_factory=list)
    primary: list[str] | None = None  # the --primary globs, None for the default
    monitors: str = "changed"         # --monitors: which monitor rows the text layouts show
    monitors_dropped: int = 0         # monitor groups left out before any statistics (--monitors none)
    exact_threshold: float = math.nan  # the minimum effect of exact metrics (perflab.stats.exact); NaN: threshold
    # Monitor groups present on one side only: (operand label, monitor, "benchmark params metric",
    # the head it is absent from when the operand is the base); the layouts count them per
    # monitor instead of listing hundreds of perf-profile symbols.
    one_sided_monitors: list[tuple[str, str, str, str | None]] = field(default_factory=list)

    def __post_init__(self):
        # One name per row, the same in every layout: what tells the rows apart (analysis.naming).
        for row, text in zip(self.rows, naming.names([(r.benchmark, r.params) for r in self.rows])):
            row.name = text

    @property
    def exact_minimum(self) -> float:
        """The minimum effect exact metrics were called against."""
        return self.threshold if math.isnan(self.exact_threshold) else self.exact_threshold

    @property
    def families(self) -> list[list[FdrGroup]]:
        """The former name of fdr_groups, still read by the renderers and in exports."""
        return self.fdr_groups

    def verdicts(self, head: int = 0, verdict: str = "regression") -> list[MetricRow]:
        return [r for r in self.rows if r.heads[head] is not None and r.heads[head].verdict == verdict]

    @property
    def regressions_found(self) -> bool:
        """A regression of the benchmark's own metrics (monitor metrics never count: --fail-on names them)."""
        return any(r.monitor is None for i in range(len(self.labels) - 1) for r in self.verdicts(i, REGRESSION))

    @property
    def monitor_threshold(self) -> float:
        """The monitor FDR group's minimum effect: LKP's 5% for non-KPI stats, never below --threshold."""
        return max(self.threshold, MONITOR_MIN_EFFECT)

    @property
    def own_rows(self) -> list[MetricRow]:
        return [r for r in self.rows if r.monitor is None]

    # The monitor views below are computed once: a result is not changed after compare() made it.
    @cached_property
    def monitor_rows(self) -> list[MetricRow]:
        """The monitor metrics compared: measured on the base and on a head (one_sided_monitors has the rest)."""
        return [r for r in self.rows if r.monitor is not None and any(c is not None for c in r.heads)]

    def monitor_changed(self, row: MetricRow) -> bool:
        """A monitor row of the changed view: significant on some head, and not noise by LKP's display rules."""
        return row.significant() and row.noise() is None

    def shown_monitor_rows(self) -> list[MetricRow]:
        """The monitor rows the text layouts show under --monitors, in display order (see monitor_sections)."""
        return [r for _monitor, rows in self.monitor_sections() for r in rows]

    def monitor_sections(self) -> list[tuple[str, list[MetricRow]]]:
        """(monitor, rows) in perflab.monitors' order; rows sorted by size of change, largest first.

        perf-profile rows stay in blocks of their kind (calltrace, children, self), as LKP prints them.
        """
        return self._sections

    @cached_property
    def _sections(self) -> list[tuple[str, list[MetricRow]]]:
        if self.monitors == "none":
            return []
        rows = self.monitor_rows if self.monitors == "all" else [r for r in self.monitor_rows if self.monitor_changed(r)]
        by_monitor: dict[str, list[MetricRow]] = defaultdict(list)
        for r in rows:
            by_monitor[r.monitor].append(r)
        order = {name: i for i, name in enumerate(MONITORS)}
        return [(name, sorted(by_monitor[name], key=_display_order))
                for name in sorted(by_monitor, key=lambda m: (order.get(m, len(order)), m))]

    @cached_property
    def monitor_windows(self) -> str:
        """The window the shown monitors' figures cover, once, and which are tick-sampled in a guest
        (perflab.monitors.windows.summary); "" without monitor rows shown."""
        from perflab.monitors.windows import summary

        return summary([sel.runs for sel in self.selections], [m for m, _ in self.monitor_sections()])

    @cached_property
    def _counts(self) -> dict[str, int]:
        """For the layouts' monitor heading: metrics compared, significant, significant but noise, shown."""
        rows = self.monitor_rows
        significant = [r for r in rows if r.significant()]
        return {"compared": len(rows), "significant": len(significant),
                "noise": sum(1 for r in significant if r.noise() is not None),
                "shown": len(self.shown_monitor_rows())}

    def monitor_counts(self) -> dict[str, int]:
        """For the layouts' monitor heading: metrics compared, significant, significant but noise, shown."""
        return dict(self._counts)

    def visible_rows(self) -> list[MetricRow]:
        """The rows a text layout speaks of (caveats, names): the benchmark's own and the monitor rows shown."""
        shown = {id(r) for r in self.shown_monitor_rows()}
        return [r for r in self.rows if r.monitor is None or id(r) in shown]

    def fail_on(self, globs: list[str]) -> list[tuple[str, MetricRow, Comparison]]:
        """(head label, row, comparison) for each metric matching a --fail-on glob that changed significantly.

        For a directional metric of the benchmark's own that is a regression; for an
        informational or monitor metric, whose harmful direction is unknown, any
        significant change, as the changed view of the monitors shows it (above the
        noise floor and the perf-profile share).
        """
        out = []
        for row in self.rows:
            if not any(fnmatch.fnmatchcase(row.metric, g) for g in globs):
                continue
            for label, cmp in zip(self.labels[1:], row.heads):
                if cmp is None:
                    continue
                if row.monitor is not None:
                    hit = cmp.verdict in (REGRESSION, IMPROVEMENT, CHANGED) and row.noise() is None
                elif row.direction == INFORMATIONAL:
                    hit = cmp.verdict == CHANGED
                else:
                    hit = cmp.verdict == REGRESSION
                if hit:
                    out.append((label, row, cmp))
        return out


PROFILE_KINDS = {"calltrace": 0, "children": 1, "self": 2}


def _display_order(row: MetricRow) -> tuple:
    """Within a monitor: perf-profile by kind (perf-profile.KIND.cycles-pp.SYMBOL), then largest change first."""
    kind = PROFILE_KINDS.get(row.metric.split(".")[1], len(PROFILE_KINDS)) if row.in_points and "." in row.metric else 0
    return (kind, -row.change_size(), row.metric)


def pair_counters(rows: list[MetricRow]) -> None:
    """Mark the monitors' event counters RATE or TOTAL, and pair the two figures of one counter.

    The monitors store a counter twice (perflab.monitors): /proc counters as the total
    (unit "") and NAME.per_s (unit "/s"); perf-stat's software events as the rate
    (unit ".../s") and NAME.total; tracepoints as the count and NAME.per_s. A rate is
    a unit ending in "/s"; a total is a metric whose rate is beside it (or that ends
    in .total). Levels and shares (%, KiB, pages, run-queue lengths) are neither.
    """
    # Rows of one group share one params dict (see comparison._rows): its id is the group.
    index = {(r.box, r.benchmark, id(r.params), r.metric): r for r in rows if r.monitor is not None and not r.in_points}
    for (box, bench, params, metric), row in index.items():
        if not row.unit.endswith("/s"):
            continue
        row.counter = RATE
        total_name = metric.removesuffix(".per_s") if metric.endswith(".per_s") else metric + ".total"
        total = index.get((box, bench, params, total_name))
        if total is not None and not total.unit.endswith("/s"):
            total.counter, total.sibling, row.sibling = TOTAL, row, total
    for (_box, _bench, _params, metric), row in index.items():
        if row.counter is None and metric.endswith(".total"):
            row.counter = TOTAL

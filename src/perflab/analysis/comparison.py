"""Compare runs: operands -> matched groups -> statistics -> one result for the renderers.

Renderers (perflab.report) format a ComparisonResult; they compute nothing.
"""

from __future__ import annotations

import fnmatch
import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property

from perflab.core import environment
from perflab.benchmarks.cmd import EXIT, MAXRSS, SYS, USER
from perflab.core.errors import PerflabError, UsageProblem
from perflab.core.model import INFORMATIONAL
from perflab.monitors import MONITORS, monitor_of
from perflab.analysis.selection import Group, Selection, common_facts, groups_of, select
from perflab.stats.compare import (CHANGED, IMPROVEMENT, MONITOR, PRIMARY, REGRESSION, SECONDARY, Comparison,
                                   compare_many, geomean_ratio)
from perflab.stats.descriptive import Summary, summarize_many
from perflab.store import Store

# What /usr/bin/time reports about a command beside its elapsed time: figures
# of the process's resources, not of the work the benchmark measures. By
# default they are secondary metrics (their own FDR family), so that they do
# not dilute the power of the benchmark's own metrics. Every other metric of
# every family (cmd's time.elapsed_time and --metric figures, each LMbench
# figure) is primary. docs/statistics.md explains the choice.
RESOURCE_FIGURES = frozenset({USER, SYS, MAXRSS, EXIT})

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
# LKP calls a non-KPI stat changed only when it moved by 5% or more: the monitor family's
# minimum effect (never below --threshold).
MONITOR_MIN_EFFECT = 0.05
RATE, TOTAL = "rate", "total"
_UNSET = object()


def is_primary(metric: str, primary: list[str] | None = None, benchmark: str = "") -> bool:
    """Whether a metric belongs to the primary FDR family (`--primary GLOB` or the default).

    By default a family's `secondary_metrics` (its harness-side figures) are secondary;
    for benchmarks that are not perflab families (imports), the /usr/bin/time resource figures.
    """
    if primary:
        return any(fnmatch.fnmatchcase(metric, glob) for glob in primary)
    from perflab import benchmarks

    if benchmark in benchmarks.FAMILIES:
        return metric not in (benchmarks.family(benchmark).secondary_metrics | RESOURCE_FIGURES)
    return metric not in RESOURCE_FIGURES


@dataclass(frozen=True)
class Family:
    """One FDR family of one head's comparison: how many metrics its adjustment covered."""

    name: str            # "primary", "secondary" or "monitor"
    tested: int          # directional metrics: one Benjamini-Hochberg adjustment per direction over these
    informational: int   # informational metrics: two-sided, adjusted among themselves
    untested: int        # too few samples to be tested: not in the adjustment


@dataclass
class MetricRow:
    """One (testbox, benchmark, params, metric) across the operands."""

    testbox: str | None
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
    family: str = PRIMARY  # the FDR family it is tested in: "primary", "secondary" or "monitor"
    monitor: str | None = None  # the monitor that recorded it (perflab.monitors.monitor_of), None for the benchmark's own
    # An event counter of a monitor: RATE (per second) or TOTAL (in a repetition), with the
    # other figure of the same counter when the comparison holds it (see _pair_counters).
    counter: str | None = None
    sibling: MetricRow | None = field(default=None, repr=False, compare=False)
    _noise: object = field(default=_UNSET, repr=False, compare=False)  # noise(), computed on first use

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
        """A short name for the group, LKP style: benchmark and its defining params."""
        shown = [str(v) for k, v in self.params.items() if v not in (None, "", [], {})]
        return "/".join([self.benchmark, *shown]) if shown else self.benchmark


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
    # Per head: its FDR families (primary first), and benchstat's geomean row,
    # the geometric mean of the median ratios of the directional metrics of each unit.
    families: list[list[Family]] = field(default_factory=list)
    median_geomeans: list[dict[str, float]] = field(default_factory=list)
    primary: list[str] | None = None  # the --primary globs, None for the default
    monitors: str = "changed"         # --monitors: which monitor rows the text layouts show
    monitors_dropped: int = 0         # monitor groups left out before any statistics (--monitors none)
    # Monitor groups present on one side only: (operand label, monitor, "benchmark params metric",
    # the head it is absent from when the operand is the base); the layouts count them per
    # monitor instead of listing hundreds of perf-profile symbols.
    one_sided_monitors: list[tuple[str, str, str, str | None]] = field(default_factory=list)

    def verdicts(self, head: int = 0, verdict: str = "regression") -> list[MetricRow]:
        return [r for r in self.rows if r.heads[head] is not None and r.heads[head].verdict == verdict]

    @property
    def regressions_found(self) -> bool:
        """A regression of the benchmark's own metrics (monitor metrics never count: --fail-on names them)."""
        return any(r.monitor is None for i in range(len(self.labels) - 1) for r in self.verdicts(i, REGRESSION))

    @property
    def monitor_threshold(self) -> float:
        """The monitor family's minimum effect: LKP's 5% for non-KPI stats, never below --threshold."""
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


def _pair_counters(rows: list[MetricRow]) -> None:
    """Mark the monitors' event counters RATE or TOTAL, and pair the two figures of one counter.

    The monitors store a counter twice (perflab.monitors): /proc counters as the total
    (unit "") and NAME.per_s (unit "/s"); perf-stat's software events as the rate
    (unit ".../s") and NAME.total; tracepoints as the count and NAME.per_s. A rate is
    a unit ending in "/s"; a total is a metric whose rate is beside it (or that ends
    in .total). Levels and shares (%, KiB, pages, run-queue lengths) are neither.
    """
    # Rows of one group share one params dict (compare's params_of): its id is the group.
    index = {(r.testbox, r.benchmark, id(r.params), r.metric): r for r in rows if r.monitor is not None and not r.in_points}
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


def _describe(g: Group) -> str:
    params = json.loads(g.params)
    shown = ",".join(f"{k}={v}" for k, v in params.items())
    return f"{g.benchmark}{'(' + shown + ')' if shown else ''} {g.metric}" + (f" on {g.testbox}" if g.testbox else "")


def _pair_single_variants(base: dict, head: dict, label: str, notes: list[str]) -> dict:
    """Pair groups whose parameters differ when each side ran one variant only.

    `perflab compare a b` of two different commands (or the same benchmark with
    other parameters) is a comparison of those two variants: where a (testbox,
    benchmark) has exactly one parameter set on each side, the head's groups
    are matched to the base's, and the report says so.
    """
    def variants(groups):
        out = defaultdict(set)
        for (box, bench, params, _metric) in groups:
            out[(box, bench)].add(params)
        return out

    vb, vh = variants(base), variants(head)
    remap = {}
    for key, hp in vh.items():
        bp = vb.get(key)
        if bp and len(bp) == 1 and len(hp) == 1 and bp != hp:
            remap[(key, next(iter(hp)))] = next(iter(bp))
            notes.append(f"{label}: {key[1]} parameters {next(iter(hp))} paired with the base's {next(iter(bp))}")
    if not remap:
        return head
    out = {}
    for (box, bench, params, metric), g in head.items():
        new_params = remap.get(((box, bench), params), params)
        out[(box, bench, new_params, metric)] = g
    return out


def compare(
    store: Store,
    operands: list[str],
    *,
    alpha: float = 0.05,
    threshold: float = 0.01,
    cross_box: bool = False,
    benchmark: str | None = None,
    metrics: list[str] | None = None,
    primary: list[str] | None = None,
    monitors: str = "changed",
    fail_on: list[str] | None = None,
) -> ComparisonResult:
    if len(operands) < 2:
        raise PerflabError("compare needs a base and at least one head operand")
    if monitors not in MONITOR_MODES:
        raise UsageProblem(f"--monitors {monitors!r}: expected one of {', '.join(MONITOR_MODES)}")
    all_runs = store.find_runs(benchmark=benchmark)
    selections = [select(store, op, all_runs) for op in operands]
    boxes = [sel.testboxes for sel in selections]
    every_box = set().union(*boxes)
    env_diff = None
    if len(every_box) > 1:
        if not cross_box:
            detail = "; ".join(f"{sel.operand}: {', '.join(sorted(b))}" for sel, b in zip(selections, boxes))
            raise PerflabError(f"operands come from different testboxes ({detail}); add --cross-box to compare them anyway")
        env_diff = environment.diff(selections[0].runs[-1].environment, selections[1].runs[-1].environment)

    side_groups = [groups_of(store, sel, cross_box=cross_box) for sel in selections]
    if metrics:
        side_groups = [{k: g for k, g in groups.items() if any(m in g.metric for m in metrics)} for groups in side_groups]
    monitors_dropped = 0
    if monitors == "none":
        # Before any statistics: dropped monitor metrics do not even count in an FDR family.
        dropped = {k for groups in side_groups for k, g in groups.items() if monitor_of(g.metric)}
        monitors_dropped = len(dropped)
        side_groups = [{k: g for k, g in groups.items() if k not in dropped} for groups in side_groups]
    base_groups = side_groups[0]
    pairing_notes: list[str] = []
    for i in range(1, len(side_groups)):
        side_groups[i] = _pair_single_variants(base_groups, side_groups[i], selections[i].label, pairing_notes)
    one_sided: list[tuple[str, str]] = []
    one_sided_monitors: list[tuple[str, str, str, str | None]] = []

    def absent(label: str, g: Group, what: str, absent_from: str | None = None) -> None:
        monitor = monitor_of(g.metric)
        if monitor:
            one_sided_monitors.append((label, monitor, what, absent_from))
        else:
            one_sided.append((label, what))

    for sel, groups in zip(selections[1:], side_groups[1:]):
        for key, g in groups.items():
            if key not in base_groups:
                absent(sel.label, g, _describe(g))
    keys = sorted(base_groups)
    for key in keys:
        missing = [sel.label for sel, groups in zip(selections[1:], side_groups[1:]) if key not in groups]
        for label in missing:
            absent(selections[0].label, base_groups[key], _describe(base_groups[key]) + f" (absent from {label})", label)

    names = sorted({g.metric for groups in side_groups for g in groups.values()})
    if primary:
        own = [n for n in names if not monitor_of(n)]
        for glob in primary:
            if not any(fnmatch.fnmatchcase(n, glob) for n in own):
                shown = ", ".join(own[:8]) + (f", ... ({len(own)} in all)" if len(own) > 8 else "")
                raise PerflabError(f"--primary {glob!r} matches no metric of this comparison (monitor metrics are "
                                   f"their own family; metrics: {shown or 'none'})")
    for glob in fail_on or ():
        if not any(fnmatch.fnmatchcase(n, glob) for n in names):
            shown = ", ".join(names[:8]) + (f", ... ({len(names)} in all)" if len(names) > 8 else "")
            hint = " (monitor metrics were dropped: --monitors none)" if monitors_dropped else ""
            raise UsageProblem(f"--fail-on {glob!r} matches no metric of this comparison{hint} (metrics: {shown or 'none'})")

    def family(g: Group) -> str:
        if monitor_of(g.metric):
            return MONITOR
        return PRIMARY if is_primary(g.metric, primary, g.benchmark) else SECONDARY

    family_of = {k: family(base_groups[k]) for k in keys}

    # Per head against the base: the primary metrics form one FDR family, the
    # secondary ones another and the monitors' counters a third, so that
    # neither secondary figures nor hundreds of counters dilute the power of
    # the primary ones.
    per_head: list[dict[tuple, Comparison]] = []
    families: list[list[Family]] = []
    for groups in side_groups[1:]:
        results: dict[tuple, Comparison] = {}
        head_families = []
        for name in (PRIMARY, SECONDARY, MONITOR):
            shared = [k for k in keys if k in groups and family_of[k] == name]
            if not shared:
                continue
            compared = compare_many(
                [(base_groups[k].values, groups[k].values, base_groups[k].direction) for k in shared],
                alpha=alpha, threshold=max(threshold, MONITOR_MIN_EFFECT) if name == MONITOR else threshold,
                family=name,
            )
            results.update(zip(shared, compared))
            tested = [c for k, c in zip(shared, compared) if c.test != "none"]
            informational = sum(base_groups[k].direction == INFORMATIONAL for k, c in zip(shared, compared) if c.test != "none")
            head_families.append(Family(name, len(tested) - informational, informational, len(shared) - len(tested)))
        per_head.append(results)
        families.append(head_families)

    rows = []
    base_summaries = summarize_many([base_groups[k].values for k in keys], [base_groups[k].direction for k in keys])
    params_of = {}
    for key, base_summary in zip(keys, base_summaries):
        g = base_groups[key]
        params = params_of.get(g.params)
        if params is None:
            params = params_of[g.params] = json.loads(g.params)
        rows.append(MetricRow(
            testbox=g.testbox, benchmark=g.benchmark, params=params, metric=g.metric,
            unit=g.unit, direction=g.direction, base=base_summary, base_values=list(g.values),
            heads=[ph.get(key) for ph in per_head],
            head_values=[list(groups[key].values) if key in groups else None for groups in side_groups[1:]],
            family=family_of[key], monitor=monitor_of(g.metric),
        ))
    _pair_counters(rows)  # before any noise(): the floors of a counter look at its pair
    median_geomeans = []
    for i in range(len(per_head)):
        by_unit: dict[str, list[Comparison]] = defaultdict(list)
        for r in rows:
            if r.direction != INFORMATIONAL and r.monitor is None and r.heads[i] is not None:
                by_unit[r.unit].append(r.heads[i])
        median_geomeans.append({unit: geomean_ratio(cs, of="median") for unit, cs in by_unit.items()})
    warnings = list(pairing_notes)
    if not any(h is not None for r in rows for h in r.heads):
        warnings.append("no metric was measured on both sides")
    return ComparisonResult(
        labels=[sel.label for sel in selections], selections=selections, rows=rows, one_sided=one_sided,
        common=common_facts(selections), env_diff=env_diff, alpha=alpha, threshold=threshold, warnings=warnings,
        families=families, median_geomeans=median_geomeans, primary=list(primary) if primary else None,
        monitors=monitors, monitors_dropped=monitors_dropped, one_sided_monitors=one_sided_monitors,
    )

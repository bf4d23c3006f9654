"""Compare runs: operands -> matched groups -> statistics -> one result for the renderers.

Renderers (perflab.report) format a ComparisonResult; they compute nothing.
"""

from __future__ import annotations

import fnmatch
import json
from collections import defaultdict
from dataclasses import dataclass, field

from perflab import environment
from perflab.benchmarks.cmd import EXIT, MAXRSS, SYS, USER
from perflab.errors import PerflabError
from perflab.model import INFORMATIONAL
from perflab.selection import Group, Selection, common_facts, groups_of, select
from perflab.stats.compare import PRIMARY, SECONDARY, Comparison, compare_many, geomean_ratio
from perflab.stats.descriptive import Summary, summarize_many
from perflab.store import Store

# What /usr/bin/time reports about a command beside its elapsed time: figures
# of the process's resources, not of the work the benchmark measures. By
# default they are secondary metrics (their own FDR family), so that they do
# not dilute the power of the benchmark's own metrics. Every other metric of
# every family (cmd's time.elapsed_time and --metric figures, each LMbench
# figure) is primary. docs/statistics.md explains the choice.
RESOURCE_FIGURES = frozenset({USER, SYS, MAXRSS, EXIT})


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

    name: str            # "primary" or "secondary"
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
    family: str = PRIMARY  # the FDR family it is tested in: "primary" or "secondary"

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

    def verdicts(self, head: int = 0, verdict: str = "regression") -> list[MetricRow]:
        return [r for r in self.rows if r.heads[head] is not None and r.heads[head].verdict == verdict]

    @property
    def regressions_found(self) -> bool:
        return any(self.verdicts(i, "regression") for i in range(len(self.labels) - 1))


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
) -> ComparisonResult:
    if len(operands) < 2:
        raise PerflabError("compare needs a base and at least one head operand")
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
    base_groups = side_groups[0]
    pairing_notes: list[str] = []
    for i in range(1, len(side_groups)):
        side_groups[i] = _pair_single_variants(base_groups, side_groups[i], selections[i].label, pairing_notes)
    one_sided: list[tuple[str, str]] = []
    for sel, groups in zip(selections[1:], side_groups[1:]):
        for key, g in groups.items():
            if key not in base_groups:
                one_sided.append((sel.label, _describe(g)))
    keys = sorted(base_groups)
    for key in keys:
        missing = [sel.label for sel, groups in zip(selections[1:], side_groups[1:]) if key not in groups]
        for label in missing:
            one_sided.append((selections[0].label, _describe(base_groups[key]) + f" (absent from {label})"))

    if primary:
        names = sorted({g.metric for groups in side_groups for g in groups.values()})
        for glob in primary:
            if not any(fnmatch.fnmatchcase(n, glob) for n in names):
                shown = ", ".join(names[:8]) + (f", ... ({len(names)} in all)" if len(names) > 8 else "")
                raise PerflabError(f"--primary {glob!r} matches no metric of this comparison (metrics: {shown or 'none'})")
    family_of = {k: PRIMARY if is_primary(base_groups[k].metric, primary, base_groups[k].benchmark) else SECONDARY for k in keys}

    # Per head against the base: the primary metrics form one FDR family, the
    # secondary ones another, so that secondary figures do not dilute the power
    # of the primary ones.
    per_head: list[dict[tuple, Comparison]] = []
    families: list[list[Family]] = []
    for groups in side_groups[1:]:
        results: dict[tuple, Comparison] = {}
        head_families = []
        for name in (PRIMARY, SECONDARY):
            shared = [k for k in keys if k in groups and family_of[k] == name]
            if not shared:
                continue
            compared = compare_many(
                [(base_groups[k].values, groups[k].values, base_groups[k].direction) for k in shared],
                alpha=alpha, threshold=threshold, family=name,
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
            family=family_of[key],
        ))
    median_geomeans = []
    for i in range(len(per_head)):
        by_unit: dict[str, list[Comparison]] = defaultdict(list)
        for r in rows:
            if r.direction != INFORMATIONAL and r.heads[i] is not None:
                by_unit[r.unit].append(r.heads[i])
        median_geomeans.append({unit: geomean_ratio(cs, of="median") for unit, cs in by_unit.items()})
    warnings = list(pairing_notes)
    if not any(h is not None for r in rows for h in r.heads):
        warnings.append("no metric was measured on both sides")
    return ComparisonResult(
        labels=[sel.label for sel in selections], selections=selections, rows=rows, one_sided=one_sided,
        common=common_facts(selections), env_diff=env_diff, alpha=alpha, threshold=threshold, warnings=warnings,
        families=families, median_geomeans=median_geomeans, primary=list(primary) if primary else None,
    )

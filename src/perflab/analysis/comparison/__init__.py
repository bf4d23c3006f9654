"""Compare runs: operands -> matched groups -> statistics -> one result for the renderers.

The steps, in order: select each operand's runs and match their groups to the base's
(matching), test each head against the base in its FDR groups (fdr), make one row per
base group and pair the monitors' counters, then the per-unit geomeans (here). The
result's types and the monitors' display rules are in result.

Renderers (perflab.report) format a ComparisonResult; they compute nothing.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import TYPE_CHECKING

from perflab.core.errors import PerflabError, UsageProblem
from perflab.core.model import INFORMATIONAL
from perflab.monitors import monitor_of
from perflab.analysis.comparison.fdr import RESOURCE_FIGURES, check_globs, compare_head, fdr_group_of, is_primary
from perflab.analysis.comparison.matching import Matched, match_groups, select_operands
from perflab.analysis.comparison.result import (COUNT_FLOOR, MONITOR_MIN_EFFECT, MONITOR_MODES, PERF_PROFILE,
                                                PERF_PROFILE_SHARE, PROFILE_KINDS, RATE, RATE_FLOOR, TOTAL,
                                                ComparisonResult, FdrGroup, MetricRow, pair_counters)
from perflab.analysis.selection import common_facts
from perflab.analysis.variant import sides_differ
from perflab.stats.compare import (CHANGED, IMPROVEMENT, MONITOR, PRIMARY, REGRESSION, SECONDARY, Comparison,
                                   geomean_ratio, minimum_effects)
from perflab.stats.descriptive import summarize_many

if TYPE_CHECKING:
    from perflab.store import Store   # SQLAlchemy: not for reading a store (perflab.store.reader)

__all__ = [
    "compare", "ComparisonResult", "MetricRow", "FdrGroup", "Comparison", "is_primary", "RESOURCE_FIGURES",
    "MONITOR_MODES", "PERF_PROFILE_SHARE", "RATE_FLOOR", "COUNT_FLOOR", "PERF_PROFILE", "MONITOR_MIN_EFFECT",
    "RATE", "TOTAL", "PROFILE_KINDS", "CHANGED", "IMPROVEMENT", "REGRESSION", "PRIMARY", "SECONDARY", "MONITOR",
]


def compare(
    store: Store,
    operands: list[str],
    *,
    alpha: float = 0.05,
    threshold: float | None = None,
    exact_threshold: float | None = None,
    cross_box: bool = False,
    benchmark: str | None = None,
    metrics: list[str] | None = None,
    primary: list[str] | None = None,
    monitors: str = "changed",
    fail_on: list[str] | None = None,
) -> ComparisonResult:
    """The base operand (the first) against each head operand, metric by metric.

    `threshold` is the minimum effect of the statistical test; exact metrics
    (perflab.stats.exact) are called against `exact_threshold` (default: `threshold`). With
    neither, the one rule of perflab.stats.compare.minimum_effects: 1% and the exact 0.1%."""
    if exact_threshold is None:
        threshold, exact_threshold = minimum_effects(threshold)
    elif threshold is None:
        threshold = minimum_effects(None)[0]
    if len(operands) < 2:
        raise PerflabError("compare needs a base and at least one head operand")
    if monitors not in MONITOR_MODES:
        raise UsageProblem(f"--monitors {monitors!r}: expected one of {', '.join(MONITOR_MODES)}")
    selections, env_diff = select_operands(store, operands, benchmark, cross_box)
    matched = match_groups(store, selections, cross_box=cross_box, metrics=metrics, drop_monitors=monitors == "none")
    windows_apart = _drop_windows_apart(matched, selections)
    names = sorted({g.metric for groups in matched.side_groups for g in groups.values()})
    check_globs(names, primary, fail_on, matched.monitors_dropped)

    keys, constant = _drop_constant(matched, sorted(matched.base))
    group_of = {k: fdr_group_of(matched.base[k], primary) for k in keys}
    per_head, fdr_groups = [], []
    for head in matched.heads:
        results, groups = compare_head(matched.base, head, keys, group_of, alpha, threshold, exact_threshold)
        per_head.append(results)
        fdr_groups.append(groups)

    rows = _rows(matched, keys, group_of, per_head)
    pair_counters(rows)  # before any noise(): the floors of a counter look at its pair
    warnings = list(matched.notes) + windows_apart
    if constant:
        warnings.append(f"{len(constant)} metric{'' if len(constant) == 1 else 's'} constant and equal on every side, "
                        "not compared: " + ", ".join(constant))
    if not any(h is not None for r in rows for h in r.heads):
        warnings.append("no metric was measured on both sides")
    return ComparisonResult(
        labels=[sel.label for sel in selections], selections=selections, rows=rows, one_sided=matched.one_sided,
        common=common_facts(selections), env_diff=env_diff, alpha=alpha, threshold=threshold, warnings=warnings,
        exact_threshold=exact_threshold,
        fdr_groups=fdr_groups, median_geomeans=[_median_geomeans(rows, i) for i in range(len(per_head))],
        primary=list(primary) if primary else None, monitors=monitors, monitors_dropped=matched.monitors_dropped,
        one_sided_monitors=matched.one_sided_monitors, measured_differently=sides_differ(selections),
    )


def _drop_windows_apart(matched: Matched, selections) -> list[str]:
    """A monitor whose figures cover different windows on the sides (insn-profile over the measured
    part against the whole process) is not compared: its groups leave before any statistics, and a
    line says why (perflab.monitors.windows)."""
    from perflab.monitors.windows import apart

    # Keyed as the matched groups are (their benchmark and params: with an operand's variants
    # apart, `variant` is among the params), each key with the runs of its groups.
    sides = []
    for sel, groups in zip(selections, matched.side_groups):
        run_of = {r.id: r for r in sel.runs}
        ids: dict[tuple, set[int]] = defaultdict(set)
        for g in groups.values():
            ids[(g.benchmark, g.params)] |= g.run_ids
        sides.append({key: [run_of[i] for i in sorted(found) if i in run_of] for key, found in ids.items()})
    pairs, lines = apart(sides)
    if pairs:
        matched.side_groups = [{k: g for k, g in groups.items() if ((g.benchmark, g.params), monitor_of(g.metric))
                                not in pairs} for groups in matched.side_groups]
    return lines


CONSTANT_LISTED = 8   # names a note lists of the constant metrics left out


def _drop_constant(matched: Matched, keys: list[tuple]) -> tuple[list[tuple], list[str]]:
    """The keys worth a row, and the names of those left out: a metric whose every value on
    every side is one and the same (an exit status of 0 throughout) tells nothing, whatever
    its test; it is named in a note instead of taking a row and a caveat."""
    kept, constant = [], []
    for k in keys:
        g = matched.base[k]
        sides = [g] + [groups.get(k) for groups in matched.heads]
        values = {v for g in sides if g is not None for v in g.values}
        # an exact metric (an instruction count) equal on both sides is a verdict: "no change, exactly"
        if len(values) == 1 and all(g is not None for g in sides) and not g.exact:
            constant.append(f"{matched.base[k].metric}={next(iter(values)):g}")
        else:
            kept.append(k)
    names = sorted(set(constant))
    shown = names[:CONSTANT_LISTED] + ([f"... ({len(names) - CONSTANT_LISTED} more)"] if len(names) > CONSTANT_LISTED else [])
    return kept, shown if constant else []


def _rows(matched: Matched, keys: list[tuple], group_of: dict[tuple, str],
          per_head: list[dict[tuple, Comparison]]) -> list[MetricRow]:
    """One row per base group (in key order), with each head's comparison or None."""
    base = matched.base
    rows = []
    summaries = summarize_many([base[k].values for k in keys], [base[k].direction for k in keys])
    # Rows of one group share one params dict: pair_counters tells the groups apart by its id.
    params_of: dict[str, dict] = {}
    for key, summary in zip(keys, summaries):
        g = base[key]
        params = params_of.get(g.params)
        if params is None:
            params = params_of[g.params] = json.loads(g.params)
        rows.append(MetricRow(
            box=g.box, benchmark=g.benchmark, params=params, metric=g.metric,
            # The comparison's own summary of the base when it has one: an exact row's figure is
            # its least disturbed sample there (stats.descriptive.summarize, exact=True).
            unit=g.unit, direction=g.direction, base=next((ph[key].base for ph in per_head if ph.get(key) is not None),
                                                          summary), base_values=list(g.values),
            heads=[ph.get(key) for ph in per_head],
            head_values=[list(groups[key].values) if key in groups else None for groups in matched.heads],
            fdr_group=group_of[key], monitor=monitor_of(g.metric),
        ))
    return rows


def _median_geomeans(rows: list[MetricRow], head: int) -> dict[str, float]:
    """benchstat's geomean row for one head: per unit, the geometric mean of the median
    ratios of the benchmark's own directional metrics."""
    by_unit: dict[str, list[Comparison]] = defaultdict(list)
    for r in rows:
        if r.direction != INFORMATIONAL and r.monitor is None and r.heads[head] is not None:
            by_unit[r.unit].append(r.heads[head])
    return {unit: geomean_ratio(cs, of="median") for unit, cs in by_unit.items()}

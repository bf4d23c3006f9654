"""The comparison's view: a ComparisonResult and the few figures its layouts print beyond it.

`compare` (perflab.analysis.comparison) computes the result; comparison_view adds what
mmtests' summary lines (each statistic's change against the base, signed so that positive
is better), benchstat's footnote (how many samples a bounded median interval needs) and
kernbench's blocks (which rows form which load's block, via the kernbench view hook) need,
so that every layout in perflab.report only formats.

Each of those figures is an **extra**, a field of ComparisonView named in EXTRAS. A layout
says which extras it reads (its record in perflab.report.registry, `needs`), and the view
computes only those: the lkp layout, the default of every `perflab compare`, then loads
neither mmtests' statistics nor kernbench's family. An extra not computed is None, so a
layout that reads one it did not name fails at once instead of printing nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from perflab.analysis.comparison import ComparisonResult, MetricRow

# The extras a layout may need: the names of ComparisonView's optional fields.
SUMMARY_LINES, KERNBENCH_BLOCKS, MIN_SAMPLES_FOR_CI = "summary_lines", "kernbench_blocks", "min_samples_for_ci"
TESTCASE_KERNELS = "testcase_kernels"
EXTRAS = (SUMMARY_LINES, KERNBENCH_BLOCKS, MIN_SAMPLES_FOR_CI, TESTCASE_KERNELS)
MIXED = "mixed"   # a side whose runs of one testcase measured several kernel releases (host upgrades)


class RowKey(NamedTuple):
    """What a row of a comparison is: the matching key of its groups (selection.Group.key), so
    that a figure about a row stays found by value, whoever holds the row object."""

    box: str | None
    benchmark: str
    params: str      # the parameters as canonical JSON (selection.params_key's form)
    metric: str

    @classmethod
    def of(cls, row: MetricRow) -> RowKey:
        return cls(row.box, row.benchmark, json.dumps(row.params, sort_keys=True, default=str), row.metric)


@dataclass
class SummaryLine:
    """One of mmtests' lines of a metric: a statistic of every column and its change against the base."""

    name: str                        # Min, Amean or Hmean, Stddev, CoeffVar, Max, BAmean-95
    values: list[float | None]       # per column; None: the column did not measure the metric
    changes: list[float | None]      # per column (0.0 for the base): better_change, positive is better
    is_mean: bool                    # the line that carries the significance mark


@dataclass
class ComparisonView:
    result: ComparisonResult
    # The extras (EXTRAS), each None unless the layout asked for it:
    summary_lines: dict[RowKey, list[SummaryLine]] | None = None   # mmtests: the lines of each own directional row
    kernbench_blocks: list | None = None          # kernbench: the view hook's BlockGroups (empty: no kernbench rows)
    min_samples_for_ci: int | None = None         # benchstat: samples a bounded median interval needs (stats.median)
    # mmtests: the kernel release each side measured, per testcase (benchmark, params as RowKey's):
    # a tag of six variants is 6.1.0-56-rt-amd64 in its rt section, never "mixed" over the tag.
    testcase_kernels: dict[tuple[str, str], list[str]] | None = None

    def kernels_of(self, row: MetricRow) -> list[str]:
        """Each side's kernel release of the row's testcase ("" where the side has none of its runs)."""
        if self.testcase_kernels is None:
            raise LookupError(f"this comparison view was built without {TESTCASE_KERNELS!r}: "
                              "the layout that reads it must name it in its needs (perflab.report.registry)")
        key = RowKey.of(row)
        return self.testcase_kernels.get((key.benchmark, key.params), [""] * len(self.result.labels))

    def lines_of(self, row: MetricRow) -> list[SummaryLine]:
        if self.summary_lines is None:
            raise LookupError(f"this comparison view was built without {SUMMARY_LINES!r}: "
                              "the layout that reads it must name it in its needs (perflab.report.registry)")
        return self.summary_lines[RowKey.of(row)]


def summary_lines(row: MetricRow) -> list[SummaryLine]:
    """mmtests' statistics of a row, per column, with their change against the base."""
    from perflab.stats.relative import better_change

    direction = row.direction if row.direction != 0 else -1
    summaries = [row.base] + [c.head if c is not None else None for c in row.heads]
    mean_name = "Exact" if row.base.estimator == "exact" else "Hmean" if direction > 0 else "Amean"   # Summary.estimator
    stats = [
        ("Min", lambda s: s.min, direction),
        (mean_name, lambda s: s.center, direction),
        ("Stddev", lambda s: s.stddev, -1),
        ("CoeffVar", lambda s: s.cov * 100, -1),
        ("Max", lambda s: s.max, direction),
        ("BAmean-95", lambda s: s.bamean, direction),
    ]
    out = []
    for name, get, better in stats:
        base_v = get(row.base)
        values = [None if s is None else get(s) for s in summaries]
        changes = [None if x is None or x != x else (0.0 if i == 0 else better_change(base_v, x, better))
                   for i, x in enumerate(values)]
        out.append(SummaryLine(name, values, changes, name == mean_name))
    return out


def testcase_kernels(result: ComparisonResult) -> dict[tuple[str, str], list[str]]:
    """(benchmark, params) -> each side's kernel release of that testcase's runs, keyed as the
    comparison keyed its groups (selection.variant_keys across the operands); MIXED where a side's
    runs of it measured several (the host's upgrades, pooled as its history). A head paired with
    the base's other parameters (one variant each, comparison.matching) is keyed by the base's."""
    from perflab.analysis.selection import variant_keys

    sides = result.selections
    found: dict[tuple[str, str], list[set]] = {}
    for i, sel in enumerate(sides):
        keys = variant_keys(sel.runs, variants=sel.variants, among=sides)
        for r in sel.runs:
            release = str((r.environment or {}).get("kernel_release") or "")
            found.setdefault(keys[r.id][1:], [set() for _ in sides])[i].add(release)
    out = {key: [next(iter(s)) if len(s) == 1 else MIXED if s else "" for s in per_side]
           for key, per_side in found.items()}
    if len(found) == len(sides) == 2 and all(sum(bool(s) for s in per_side) == 1 for per_side in found.values()):
        # Each side one testcase of other parameters: the head's runs are compared under the base's key,
        # when they are of one benchmark (matching pairs no other: a side of another benchmark has none
        # of the section's runs, and its kernel is not the section's).
        (bkey, b), (hkey, h) = sorted(found.items(), key=lambda kv: not kv[1][0])
        if bkey[0] == hkey[0]:
            out[bkey] = [out[bkey][0], out[hkey][1]]
    return out


def comparison_view(result: ComparisonResult, extras: Iterable[str] | None = None) -> ComparisonView:
    """The view with the extras named (a layout's `needs` in perflab.report.registry; every one when None)."""
    if isinstance(extras, str):   # a layout's name where its needs belong: refuse rather than read letters
        raise TypeError(f"comparison_view takes the names of extras, not the string {extras!r}")
    wanted = set(EXTRAS if extras is None else extras)
    unknown = wanted - set(EXTRAS)
    if unknown:
        raise ValueError(f"unknown comparison extras {sorted(unknown)}: known are {', '.join(EXTRAS)}")
    view = ComparisonView(result)
    if SUMMARY_LINES in wanted:
        own = [row for row in result.rows if row.direction != 0 and row.monitor is None]
        view.summary_lines = {RowKey.of(row): summary_lines(row) for row in own}
        if len(view.summary_lines) != len(own):   # two rows on one key would print one's lines twice
            raise ValueError("comparison rows that share a (box, benchmark, params, metric) key")
    if KERNBENCH_BLOCKS in wanted:
        view.kernbench_blocks = []
        kern = [r for r in result.rows if r.benchmark == "kernbench" and r.monitor is None]
        if kern:   # only then is kernbench's hook imported
            from perflab.analysis.views import family_hook

            hook = family_hook("kernbench")
            view.kernbench_blocks = hook.compared_blocks(kern) if hook is not None else []
    if TESTCASE_KERNELS in wanted:
        view.testcase_kernels = testcase_kernels(result)
    if MIN_SAMPLES_FOR_CI in wanted:
        from perflab.stats.median import CONFIDENCE, min_samples_for_median_ci

        view.min_samples_for_ci = min_samples_for_median_ci(CONFIDENCE)
    return view

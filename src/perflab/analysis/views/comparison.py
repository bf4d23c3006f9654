"""The comparison's view: a ComparisonResult and the few figures its layouts print beyond it.

`compare` (perflab.analysis.comparison) computes the result; comparison_view adds what
mmtests' summary lines (each statistic's change against the base, signed so that positive
is better), benchstat's footnote (how many samples a bounded median interval needs) and
kernbench's blocks (which rows form which load's block, via the kernbench view hook) need,
so that every layout in perflab.report only formats.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from perflab.analysis.comparison import ComparisonResult, MetricRow


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
    min_samples_for_ci: int                                   # stats.median: bounded interval of the median
    summary_lines: dict[int, list[SummaryLine]] = field(default_factory=dict)   # id(row) -> mmtests' lines
    kernbench_blocks: list = field(default_factory=list)      # kernbench view hook's BlockGroups

    def lines_of(self, row: MetricRow) -> list[SummaryLine]:
        return self.summary_lines[id(row)]


def summary_lines(row: MetricRow) -> list[SummaryLine]:
    """mmtests' statistics of a row, per column, with their change against the base."""
    from perflab.stats.relative import better_change

    direction = row.direction if row.direction != 0 else -1
    summaries = [row.base] + [c.head if c is not None else None for c in row.heads]
    mean_name = "Hmean" if direction > 0 else "Amean"
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


def comparison_view(result: ComparisonResult, style: str | None = None) -> ComparisonView:
    """What the comparison layout `style` prints beyond the result (every layout's, when None).

    Only the named layout's figures are computed: the lkp layout, the default of every
    `perflab compare`, then loads neither mmtests' statistics nor kernbench's family.
    """
    def wanted(layout: str) -> bool:
        return style is None or style == layout

    lines = {}
    if wanted("mmtests"):
        lines = {id(row): summary_lines(row) for row in result.rows if row.direction != 0 and row.monitor is None}
    blocks = []
    kern = [r for r in result.rows if r.benchmark == "kernbench" and r.monitor is None]
    if kern and wanted("kernbench"):
        from perflab.analysis.views import family_hook

        hook = family_hook("kernbench")
        blocks = hook.compared_blocks(kern) if hook is not None else []
    need = 0
    if wanted("benchstat"):
        from perflab.stats.median import CONFIDENCE, min_samples_for_median_ci

        need = min_samples_for_median_ci(CONFIDENCE)
    return ComparisonView(result, need, lines, blocks)

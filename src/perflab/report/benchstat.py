"""benchstat's layout: median ± CI, vs base, p and n, and a geomean row.

One table per unit. "± x%" is the half-width of the 95% confidence interval
of the median relative to the median ("∞" when there are too few samples to
bound it); "~" marks a difference that is not significant.
"""

from __future__ import annotations

import math

from perflab.comparison import ComparisonResult, MetricRow
from perflab.report.numbers import with_unit
from perflab.stats.median import median_ci

UNIT_HEADINGS = {"s": "sec/op", "us": "µs", "ns": "ns", "KiB": "KiB", "MB/s": "MB/s", "": "value"}


def _pm(values: list[float]) -> str:
    lo, hi = median_ci(values)
    med = sorted(values)[len(values) // 2] if len(values) % 2 else sum(sorted(values)[len(values) // 2 - 1: len(values) // 2 + 1]) / 2
    if math.isinf(lo) or math.isinf(hi) or med == 0:
        return "± ∞ "
    return f"± {max(med - lo, hi - med) / abs(med) * 100:.0f}%"


def _name(row: MetricRow) -> str:
    return f"{row.testcase}:{row.metric}"


def render(result: ComparisonResult) -> str:
    from perflab.stats.compare import geomean_ratio

    lines = []
    for key in ("kernel_release", "arch", "cpu_model", "testbox"):
        if key in result.common:
            lines.append(f"{key}: {result.common[key]}")
    units: dict[str, list[MetricRow]] = {}
    for row in result.rows:
        if row.direction != 0:
            units.setdefault(row.unit, []).append(row)
    for unit, rows in units.items():
        heading = UNIT_HEADINGS.get(unit, unit)
        name_w = max(len(_name(r)) for r in rows + []) if rows else 10
        name_w = max(name_w, 7)
        col = 22
        lines.append("")
        lines.append(" " * name_w + " │" + "".join(f"{label[:col]:^{col}}│" if i == 0 else f"{label[:col + 24]:^{col + 24}}│"
                                                 for i, label in enumerate(result.labels)))
        lines.append(" " * name_w + " │" + f"{heading:^{col}}│" + "".join(f"{heading:^{col}}{'vs base':<24}│" for _ in result.labels[1:]))
        for row in rows:
            base_cell = f"{with_unit(row.base.median, unit)} {_pm(row.base_values)}"
            cells = [f"{base_cell:>{col}}"]
            for cmp, values in zip(row.heads, row.head_values):
                if cmp is None:
                    cells.append(f"{'-':>{col}}{'(absent)':<24}")
                    continue
                head_cell = f"{with_unit(cmp.head.median, unit)} {_pm(values)}"
                called = cmp.verdict in ("regression", "improvement")
                n = f"n={cmp.base.n}" if cmp.base.n == cmp.head.n else f"n={cmp.base.n}+{cmp.head.n}"
                vs = f"{cmp.pct_change * 100:+.2f}%" if called else "~"
                cells.append(f"{head_cell:>{col}}  {vs:>8} (p={cmp.p_adjusted:.3f} {n})"[:col + 24].ljust(col + 24))
            lines.append(f"{_name(row):<{name_w}}  " + " ".join(cells))
        geo = [geomean_ratio([r.heads[i] for r in rows if r.heads[i] is not None]) for i in range(len(result.labels) - 1)]
        lines.append(f"{'geomean':<{name_w}}  " + f"{'':>{col}} " + " ".join(
            f"{'':>{col}}  {('-' if g is None or g != g else f'{(g - 1) * 100:+.2f}%'):>8}".ljust(col + 24) for g in geo))
    for label, what in result.one_sided:
        lines.append(f"only in {label}: {what}")
    for w in result.warnings:
        lines.append(f"note: {w}")
    return "\n".join(lines) + "\n"

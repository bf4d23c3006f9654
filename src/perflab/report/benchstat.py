"""benchstat's layout: median ± CI, vs base, p and n, a geomean row, footnotes.

One table per unit. "± x%" is the half-width of the 95% confidence interval
of the median relative to the median ("∞" when there are too few samples to
bound it, with a footnote saying so). "vs base" is the change of the medians,
as the columns are medians; "~" marks a difference that is not called (the
test, docs/statistics.md, is perflab's: Welch on logarithms, FDR-adjusted p).
An exact metric (instruction counts, icount instruction-time) shows "± resolution"
and "(exact n=...)" in place of the median interval and p.
Every caveat of a comparison is a numbered footnote, as benchstat prints them.
Column widths follow their contents: nothing is cut.

The monitors' metrics (--monitors changed or all) follow in one table per
monitor, headed by its name, without a geomean row (they have no direction).
"""

from __future__ import annotations

import math

from perflab.analysis.comparison import ComparisonResult, MetricRow
from perflab.analysis.views.comparison import ComparisonView
from perflab.core.text import printable
from perflab.report.notes import Footnotes, estimator_legend, fdr_group_lines, monitor_summary, shown, tail_lines
from perflab.report.numbers import percent, with_unit
from perflab.stats.compare import CHANGED, IMPROVEMENT, INSUFFICIENT, REGRESSION, SECONDARY
from perflab.stats.descriptive import MEDIAN
from perflab.stats.median import CONFIDENCE

UNIT_HEADINGS = {"s": "sec/op", "us": "µs", "ns": "ns", "KiB": "KiB", "MB/s": "MB/s", "": "value"}
LABEL_LIMIT = 40


def _exact_pm(resolution: float) -> str:
    """An exact metric's ± is its resolution (perflab.stats.exact), not an interval of the median."""
    return f"± {resolution * 100:.2g}%"


def _pm(summary, notes: Footnotes, need: int, exact=None) -> str:
    if exact is not None:
        return _exact_pm(exact.resolution)
    pm = summary.median_pm
    if math.isinf(pm):
        return "± ∞" + notes.mark([f"need >= {need} samples for a "
                                   f"{CONFIDENCE * 100:g}% confidence interval of the median"])
    if math.isnan(pm):
        return "± ?"
    return f"± {pm * 100:.0f}%"


def _name(row: MetricRow, one_testcase: bool) -> str:
    # Never cut: the testcase and the metric are what tell the rows apart.
    text = row.metric if one_testcase else f"{row.testcase}: {row.metric}"
    return printable(text, None) + (" [secondary]" if row.fdr_group == SECONDARY else "")


def _table(result: ComparisonResult, unit: str, rows: list[MetricRow], notes: Footnotes, need: int,
           monitor: str | None = None, one_testcase: bool = False) -> list[str]:
    heading = shown(monitor) if monitor else UNIT_HEADINGS.get(unit, shown(unit))
    heads = len(result.labels) - 1
    # Cells first, widths after: (name, base cell, [(value, vs, p/n) per head]).
    table = []
    for row in rows:
        exact = next((c for c in row.heads if c is not None and c.exact), None)
        base_cell = f"{with_unit(row.base.median, unit)} {_pm(row.base, notes, need, exact)}"
        head_cells = []
        for cmp in row.heads:
            if cmp is None:
                head_cells.append(("-", "", "(absent)"))
                continue
            head_cell = f"{with_unit(cmp.head.median, unit)} {_pm(cmp.head, notes, need, cmp if cmp.exact else None)}"
            n = f"n={cmp.base.n}" if cmp.base.n == cmp.head.n else f"n={cmp.base.n}+{cmp.head.n}"
            called = cmp.verdict in (REGRESSION, IMPROVEMENT, CHANGED)
            vs = percent(cmp.median_change, decimals=2) if called else "~"
            if cmp.exact:
                pn = f"(exact {n})"
            else:
                pn = f"({n})" if cmp.verdict == INSUFFICIENT else f"(p={cmp.p_adjusted:.3f} {n})"
            head_cells.append((head_cell, vs, pn + notes.caveats(cmp)))
        table.append((_name(row, one_testcase), base_cell, head_cells))
    if not monitor:
        geo = []
        for i in range(heads):
            g = result.median_geomeans[i].get(unit, math.nan)
            geo.append(("", "-" if g != g else percent(g - 1, decimals=2), ""))
        table.append(("geomean", "", geo))

    name_w = max(len(t[0]) for t in table)
    base_w = max([len(t[1]) for t in table] + [len(heading), len(shown(result.labels[0], LABEL_LIMIT))])
    hv_w = [max([len(t[2][i][0]) for t in table] + [len(heading)]) for i in range(heads)]
    vs_w = [max([len(t[2][i][1]) for t in table] + [len("vs base")]) for i in range(heads)]
    pn_w = [max(len(t[2][i][2]) for t in table) for i in range(heads)]
    head_w = [max(hv_w[i] + 2 + vs_w[i] + 1 + pn_w[i], len(shown(result.labels[i + 1], LABEL_LIMIT)))
              for i in range(heads)]

    lines = ["", " " * name_w + " │" + f"{shown(result.labels[0], LABEL_LIMIT):^{base_w + 2}}│"
             + "".join(f"{shown(label, LABEL_LIMIT):^{head_w[i] + 2}}│" for i, label in enumerate(result.labels[1:])),
             " " * name_w + " │" + f"{heading:^{base_w + 2}}│"
             + "".join(f" {heading:^{hv_w[i]}}  {'vs base':<{head_w[i] - hv_w[i] - 2}} │" for i in range(heads))]
    for name, base_cell, head_cells in table:
        text = f"{name:<{name_w}}  {base_cell:>{base_w}}  "
        for i, (hv, vs, pn) in enumerate(head_cells):
            text += f" {hv:>{hv_w[i]}}  {vs:>{vs_w[i]}} {pn:<{pn_w[i]}}".ljust(head_w[i] + 2) + " "
        lines.append(text.rstrip())
    return lines


def render(view: ComparisonView) -> str:
    result, need = view.result, view.min_samples_for_ci
    lines = []
    for key in ("kernel_release", "arch", "cpu_model", "testbox"):
        if key in result.common:
            lines.append(f"{key}: {shown(result.common[key])}")
    testcases = {r.testcase for r in result.visible_rows()}
    one = len(testcases) == 1
    if one:   # benchstat's header lines ("pkg: ..."): what every row shares, once
        lines.append(f"testcase: {printable(next(iter(testcases)), None)}")
    units: dict[str, list[MetricRow]] = {}
    for row in result.rows:
        if row.direction != 0 and row.monitor is None:
            units.setdefault(row.unit, []).append(row)
    notes = Footnotes()
    for unit, rows in units.items():
        lines += _table(result, unit, rows, notes, need, one_testcase=one)
    if result.monitor_rows:
        lines += ["", monitor_summary(result)]
        for monitor, rows in result.monitor_sections():
            lines += _table(result, "", rows, notes, need, monitor=monitor, one_testcase=one)
    lines += notes.lines()
    lines.append("")
    # benchstat's columns are medians (its format); the other styles print stats.descriptive's figure.
    lines.append(estimator_legend([MEDIAN]) + " (benchstat's; the other styles: harmonic mean of rates, else mean)")
    lines += fdr_group_lines(result)
    lines += tail_lines(result)
    return "\n".join(lines) + "\n"

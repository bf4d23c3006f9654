"""mmtests' compare-kernels layout.

Per operation the rows Min, Amean (lower is better) or Hmean (higher is
better), Stddev, CoeffVar, Max and BAmean-95; each value is followed by its
(x.xx%) change against the first column, signed so that positive means better.
A mean whose difference is statistically significant is marked with '*'.
Columns are as wide as their widest value: a number is never cut.

The monitors' metrics (--monitors changed or all) follow, one small table per
monitor as mmtests prints its monitor summaries: each metric's mean per
column with its (x.xx%) change against the first (informational: not signed
by direction), '*' where the change is significant.

A row's caveats are numbered footnotes (¹ ²) under the tables, marked on the
row's Hmean/Amean line after the operation's name (a monitor's: after its name),
numbered in the order the rows are printed; a caveat of no printed row (an
informational metric's) is not printed.
"""

from __future__ import annotations

import math

from perflab.analysis.comparison import ComparisonResult, MetricRow
from perflab.analysis.views.comparison import ComparisonView
from perflab.core.text import printable
from perflab.report.notes import Footnotes, fdr_group_lines, monitor_summary, secondary_names, shown, tail_lines

MIN_VALUE_WIDTH = 11
LABEL_LIMIT = 30  # what a column heading shows of a kernel release or tag
OP_WIDTH = 17     # the operation column widens to the longest name shown


def _pct(pct: float | None) -> str:
    if pct is None:
        return ""
    x = pct * 100
    return f"({0.0 if round(x, 2) == 0 else x:7.2f}%)"  # never "( -0.00%)"


def _number(x: float) -> str:
    """mmtests' four decimals, with more below 1 so that at least 4 significant digits show
    (scientific notation below 1e-4)."""
    a = abs(x)
    if a == 0 or a >= 1 or math.isinf(a):
        return f"{x:.4f}"
    if a < 1e-4:
        return f"{x:.3e}"
    return f"{x:.{max(4, 3 - math.floor(math.log10(a)))}f}"


def _rows_for(view: ComparisonView, row: MetricRow) -> list[tuple[str, list[tuple[str, str, str] | None]]]:
    """(statistic, per column (value, (pct), mark) or None) for one metric."""
    out = []
    for line in view.lines_of(row):
        cells: list[tuple[str, str, str] | None] = []
        for i, (x, pct) in enumerate(zip(line.values, line.changes)):
            if x is None:
                cells.append(None)
                continue
            if x != x:
                cells.append(("-", "", " "))
                continue
            mark = " "
            if line.is_mean and i > 0 and row.heads[i - 1].verdict in ("regression", "improvement"):
                mark = "*"
            cells.append((_number(x), _pct(pct), mark))
        out.append((line.name, cells))
    return out


def _monitor_tables(result: ComparisonResult, name, tags: list[str], notes: Footnotes) -> list[str]:
    lines = [monitor_summary(result)]
    for monitor, rows in result.monitor_sections():
        table = []
        for row in rows:
            cells = [(_number(row.base.center), _pct(0.0), " ")]
            for cmp in row.heads:
                if cmp is None:
                    cells.append(None)
                    continue
                mark = "*" if cmp.verdict in ("changed", "regression", "improvement") else " "
                pct = cmp.pct_change if cmp.pct_change == cmp.pct_change else None
                cells.append((_number(cmp.head.center), _pct(pct), mark))
            table.append((name(row) + notes.mark_row(result, row, name), cells))
        ncols = len(result.labels)
        value_w = [max([MIN_VALUE_WIDTH] + [len(c[0]) for _, cells in table if (c := cells[j]) is not None])
                   for j in range(ncols)]
        col_w = [max(w + 12, len(tags[j]) + 1) for j, w in enumerate(value_w)]
        name_w = max([OP_WIDTH] + [len(n) for n, _ in table])
        lines.append(f"{shown(monitor):<{name_w + 1}}" + "".join(f"{tags[j]:>{col_w[j]}}" for j in range(ncols)))
        for metric, cells in table:
            text = [f"{'-':>{col_w[j]}}" if c is None else f"{c[0]:>{value_w[j]}} {c[1]:>10}{c[2]}".rjust(col_w[j])
                    for j, c in enumerate(cells)]
            lines.append(f"{metric:<{name_w + 1}}" + "".join(text))
        lines.append("")
    return lines


def render(view: ComparisonView) -> str:
    result = view.result
    tags = [shown(sel.label, LABEL_LIMIT) for sel in result.selections]
    lines = []
    by_benchmark: dict[str, list[MetricRow]] = {}
    for row in result.rows:
        by_benchmark.setdefault(row.testcase, []).append(row)

    def name(row: MetricRow) -> str:
        return printable(row.metric if len(by_benchmark) == 1 else f"{row.testcase}: {row.metric}", None)

    # Footnotes are numbered as the rows that carry them are printed (tables, then monitors),
    # so a mark and its note agree and no note is printed that no row carries.
    notes = Footnotes()
    for testcase, rows in by_benchmark.items():
        table = []
        for row in rows:
            if row.direction == 0 or row.monitor is not None:
                continue
            op = row.metric.split(".", 1)[-1] if row.metric.startswith(row.benchmark + ".") else row.metric
            stats = _rows_for(view, row)
            # The mean line carries the marks (where mmtests readers look; the first line if there is
            # no mean line), after the operation's name so a line still ends with its '*'.
            mean = next((i for i, line in enumerate(view.lines_of(row)) if line.is_mean), 0)
            marks = notes.mark_row(result, row, name)
            for i, (stat, cells) in enumerate(stats):
                table.append((stat, shown(op) + (marks if i == mean else ""), cells))
        ncols = len(result.labels)
        # Each section's kernels are its own runs' (a tag of several variants: rt's in rt's section).
        kernels = [shown(k or "-", LABEL_LIMIT) for k in view.kernels_of(rows[0])]
        value_w = [max([MIN_VALUE_WIDTH] + [len(c[0]) for _, _, cells in table if (c := cells[j]) is not None])
                   for j in range(ncols)]
        col_w = [max(w + 12, len(kernels[j]) + 1, len(tags[j]) + 1) for j, w in enumerate(value_w)]
        op_w = max([OP_WIDTH] + [len(op) for _, op, _ in table])
        lines.append(printable(testcase, None))
        lines.append(" " * (op_w + 11) + "".join(f"{kernels[j]:>{col_w[j]}}" for j in range(ncols)))
        lines.append(" " * (op_w + 11) + "".join(f"{tags[j]:>{col_w[j]}}" for j in range(ncols)))
        for stat, op, cells in table:
            text = []
            for j, c in enumerate(cells):
                if c is None:
                    text.append(f"{'-':>{col_w[j]}}")
                else:
                    v, p, mark = c
                    text.append(f"{v:>{value_w[j]}} {p:>10}{mark}".rjust(col_w[j]))
            lines.append(f"{stat:<10}{op:<{op_w + 1}}" + "".join(text))
        lines.append("")

    if result.monitor_rows:
        lines += _monitor_tables(result, name, tags, notes)

    secondary = secondary_names(result.rows, name)
    if secondary:
        lines.append("secondary metrics (their own FDR family): " + ", ".join(secondary))
    lines += fdr_group_lines(result)
    lines += notes.named_lines()
    lines += tail_lines(result)
    return "\n".join(lines) + "\n"

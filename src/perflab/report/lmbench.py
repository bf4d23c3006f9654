"""The LMbench 2.0 summary: one row per kernel (run or tag), tables by category.

Layout follows LMbench 2.0's `make see` output as people post it (see
../shared/reference/lmbench-gcc-regression-2003.txt): the banner, then per
table a title ending in "smaller is better" or "bigger is better", its
underline, heading lines, a row of dashes per column and one row per kernel.
A figure that was not measured (or whose benchmark failed) is a blank cell,
never a zero. A table none of whose figures was measured is left out.
"""

from __future__ import annotations

import math

from perflab.benchmarks.lmbench.catalog import TABLES, THIRD_HEADING, Table
from perflab.core.text import printable
from perflab.report.notes import estimator_legend
from perflab.stats.descriptive import LMBENCH_SUMMARY

BANNER = "L M B E N C H  2 . 0   S U M M A R Y"
WALL_TIME = "times in microseconds"
# Under QEMU icount a figure is instruction-time, exact to 0.01%: said so, and printed with the
# six significant digits that keep every step of 0.01% visible (0.323028 -> 0.325029).
ICOUNT_TIME = "instruction-time (1 ns = 1 instruction)"
ICOUNT_DIGITS = 6


def format_value(value: float | None, width: int, metric: str = "", unit: str = "", exact: bool = False) -> str:
    """LMbench-like precision: more decimals for small figures, none for large; an exact figure
    (icount) with ICOUNT_DIGITS significant digits, wider than its column rather than cut."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if exact and unit != "MB/s" and metric != "mem.mhz":
        return f"{value:.{ICOUNT_DIGITS}g}" if abs(value) < 10 ** ICOUNT_DIGITS else f"{value:.0f}"
    if metric == "mem.mhz":
        text = f"{value:.0f}"
    elif unit == "MB/s":
        text = f"{value:.1f}" if abs(value) < 1000 else f"{value:.0f}"
    elif abs(value) < 0.1:
        text = f"{value:.4f}"
    elif abs(value) < 100:
        text = f"{value:.2f}"
    elif abs(value) < 1000:
        text = f"{value:.1f}"
    else:
        text = f"{value:.0f}"
    if len(text) > width:
        text = f"{value:.{max(0, width - 2)}g}"
    return text


def _headings(table: Table) -> list[list[str]]:
    """Heading lines of each column, bottom-aligned (2 or 3 lines)."""
    cols = []
    for f in table.figures:
        third = THIRD_HEADING.get(f.metric)
        cols.append([f.heading[0], f.heading[1], third] if third else ["", f.heading[0], f.heading[1]])
    while len(cols[0]) > 1 and all(c[0] == "" for c in cols):
        cols = [c[1:] for c in cols]
    return cols


def render_table(table: Table, rows: list[tuple[str, dict[str, float]]], label_width: int,
                 icount: bool = False) -> list[str]:
    heads = _headings(table)
    depth = len(heads[0])
    title = table.title.replace(WALL_TIME, ICOUNT_TIME) if icount else table.title
    # Each figure as LMbench prints it, whole: a column is as wide as its widest figure (a
    # six-digit figure widens its column, never runs into the next one or turns into 1.2e+05).
    texts = [[format_value(values.get(f.metric), len(str(2 ** 62)), f.metric, f.unit, icount) for f in table.figures]
             for _label, values in rows]
    widths = [max([f.width] + [len(row[i]) for row in texts]) for i, f in enumerate(table.figures)]
    lines = [title, "-" * len(title)]
    for level in range(depth):
        first = "kernel" if level == depth - 1 else ""
        cells = [f"{h[level]:<{w}}" for h, w in zip(heads, widths)]
        lines.append(f"{first:<{label_width}} " + " ".join(cells).rstrip())
    lines.append("-" * label_width + " " + " ".join("-" * w for w in widths))
    for (label, _values), row in zip(rows, texts):
        cells = [f"{text:>{w}}" for text, w in zip(row, widths)]
        lines.append((f"{label:<{label_width}} " + " ".join(cells)).rstrip())
    return lines


def render_summary(rows: list[tuple[str, dict[str, float]]], icount: bool = False,
                   estimators=(LMBENCH_SUMMARY,)) -> str:
    """rows: (label, {metric: the median of its samples}) per kernel, in display order; `icount`:
    the figures are instruction-time of a guest under QEMU icount (runs with vm=icount, or
    samples whose unit says "(icount)"), said in the titles and printed exactly; `estimators`: what
    the figures are (stats.descriptive names), said in the last line."""
    rows = [(printable(label), values) for label, values in rows]  # tags and releases come from users
    label_width = max([29] + [len(label) for label, _ in rows])
    out = [BANNER, "-" * len(BANNER), ""]
    shown = 0
    for table in TABLES:
        if not any(values.get(f.metric) is not None for _, values in rows for f in table.figures):
            continue
        out += render_table(table, rows, max(label_width, table.label_width), icount) + [""]
        shown += 1
    if not shown:
        out.append("(no LMbench figures in the selected runs)")
    else:
        out.append(estimator_legend(estimators, of="every sample of each row's runs"))
    return "\n".join(out).rstrip() + "\n"

"""`perflab report table`: a pivot of one metric's means, rows by one key, columns by others
(the fio seed's I/O type x {bare metal, KVM} x {without, with patch})."""

from __future__ import annotations

from perflab.report.numbers import value as fmt_value
from perflab.core.text import printable


def render_pivot(metric: str, unit: str, row_key: str, col_keys: list[str], row_values: list[str],
                 col_values: list[tuple[str, ...]], cells: dict[tuple[str, tuple[str, ...]], float]) -> str:
    """One table: a heading line per column key (box, then tag ...), a line per value of
    row_key, each cell the mean computed by the caller; '-' where no run holds the metric.
    Row and column values are printed whole, each column as wide as its own (a variant's label,
    `6.1.192 gcc-12 +CC_OPTIMIZE_FOR_PERFORMANCE`, is told apart by its end: docs/views.md)."""
    texts = {k: fmt_value(v) for k, v in cells.items()}
    names = [key for key in col_keys[:-1]] + [f"{row_key} \\ {col_keys[-1]}"]
    heads = [[printable(c, None) for c in col] for col in col_values]
    label_width = max([*(len(n) for n in names), *(len(printable(v, None)) for v in row_values)])
    widths = [max([8, *(len(h) for h in head), *(len(texts.get((row, col), "-")) for row in row_values)])
              for col, head in zip(col_values, heads)]
    lines = [printable(f"{metric} ({unit})" if unit else metric, 80)]
    for level, name in enumerate(names):
        lines.append(name.ljust(label_width) + "  " + "  ".join(head[level].rjust(w) for head, w in zip(heads, widths)))
    lines.append("-" * (label_width + sum(w + 2 for w in widths)))
    for row in row_values:
        lines.append(printable(row, None).ljust(label_width) + "  "
                     + "  ".join(texts.get((row, col), "-").rjust(w) for col, w in zip(col_values, widths)))
    return "\n".join(lines) + "\n"

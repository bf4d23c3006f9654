"""`perflab report table`: a pivot of one metric's means, rows by one key, columns by others
(the fio seed's I/O type x {bare metal, KVM} x {without, with patch})."""

from __future__ import annotations

from perflab.report.numbers import value as fmt_value
from perflab.core.text import printable


def render_pivot(metric: str, unit: str, row_key: str, col_keys: list[str], row_values: list[str],
                 col_values: list[tuple[str, ...]], cells: dict[tuple[str, tuple[str, ...]], float]) -> str:
    """One table: a heading line per column key (box, then tag ...), a line per value of
    row_key, each cell the mean computed by the caller; '-' where no run holds the metric."""
    texts = {k: fmt_value(v) for k, v in cells.items()}
    names = [key for key in col_keys[:-1]] + [f"{row_key} \\ {col_keys[-1]}"]
    label_width = max([*(len(n) for n in names), *(len(printable(v, 64)) for v in row_values)])
    width = max([8, *(len(t) for t in texts.values()), *(len(printable(c, 24)) for col in col_values for c in col)])
    lines = [printable(f"{metric} ({unit})" if unit else metric, 80)]
    for level, name in enumerate(names):
        lines.append(name.ljust(label_width) + "  " + "  ".join(printable(col[level], 24).rjust(width) for col in col_values))
    lines.append("-" * (label_width + len(col_values) * (width + 2)))
    for row in row_values:
        lines.append(printable(row, 64).ljust(label_width) + "  "
                     + "  ".join(texts.get((row, col), "-").rjust(width) for col in col_values))
    return "\n".join(lines) + "\n"

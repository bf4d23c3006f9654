"""mmtests' compare-kernels layout.

Per operation the rows Min, Amean (lower is better) or Hmean (higher is
better), Stddev, CoeffVar, Max and BAmean-95; each value is followed by its
(x.xx%) change against the first column, signed so that positive means better.
A mean whose difference is statistically significant is marked with '*'.
"""

from __future__ import annotations

from perflab.comparison import ComparisonResult, MetricRow
from perflab.stats.descriptive import bamean

WIDTH = 22


def _better_pct(base: float, head: float, direction: int) -> float | None:
    """Change against the base, positive when the head is better."""
    if base == 0 or base != base or head != head:
        return None
    raw = (head - base) / abs(base)
    return raw if direction > 0 else -raw


def _cell(v: float | None, pct: float | None, mark: str = " ") -> str:
    if v is None or v != v:
        return f"{'-':>{WIDTH}}"
    p = "" if pct is None else f"({pct * 100:7.2f}%)"
    return f"{v:>11.4f} {p:>10}{mark}"[-(WIDTH + 1):].rjust(WIDTH + 1)


def _rows_for(row: MetricRow, op: str) -> list[str]:
    direction = row.direction if row.direction != 0 else -1
    summaries = [row.base] + [c.head if c is not None else None for c in row.heads]
    values = [row.base_values] + row.head_values
    mean_name = "Hmean" if direction > 0 else "Amean"
    stats = [
        ("Min", lambda s, v: s.min, direction),
        (mean_name, lambda s, v: s.center, direction),
        ("Stddev", lambda s, v: s.stddev, -1),
        ("CoeffVar", lambda s, v: None if s.cov is None else s.cov * 100, -1),
        ("Max", lambda s, v: s.max, direction),
        ("BAmean-95", lambda s, v: bamean(v, direction, 95), direction),
    ]
    out = []
    for name, get, better in stats:
        base_v = get(row.base, row.base_values)
        cells = []
        for i, (s, v) in enumerate(zip(summaries, values)):
            if s is None:
                cells.append(f"{'-':>{WIDTH + 1}}")
                continue
            x = get(s, v)
            pct = 0.0 if i == 0 else (None if x is None or base_v is None else _better_pct(base_v, x, better))
            mark = " "
            if name == mean_name and i > 0 and row.heads[i - 1] is not None and row.heads[i - 1].verdict in ("regression", "improvement"):
                mark = "*"
            cells.append(_cell(x, pct, mark))
        out.append(f"{name:<10}{op:<18}" + "".join(cells))
    return out


def render(result: ComparisonResult) -> str:
    kernels, tags = [], []
    for sel in result.selections:
        releases = {(r.environment or {}).get("kernel_release", "") for r in sel.runs}
        kernels.append(releases.pop() if len(releases) == 1 else "mixed")
        tags.append(sel.label)
    lines = []
    by_benchmark: dict[str, list[MetricRow]] = {}
    for row in result.rows:
        by_benchmark.setdefault(row.testcase, []).append(row)
    for testcase, rows in by_benchmark.items():
        lines.append(testcase)
        lines.append(" " * 28 + "".join(f"{k[:WIDTH]:>{WIDTH + 1}}" for k in kernels))
        lines.append(" " * 28 + "".join(f"{t[:WIDTH]:>{WIDTH + 1}}" for t in tags))
        for row in rows:
            if row.direction == 0:
                continue
            op = row.metric.split(".", 1)[-1] if row.metric.startswith(row.benchmark + ".") else row.metric
            lines += _rows_for(row, op[:17])
        lines.append("")
    for label, what in result.one_sided:
        lines.append(f"only in {label}: {what}")
    for w in result.warnings:
        lines.append(f"note: {w}")
    return "\n".join(lines) + "\n"

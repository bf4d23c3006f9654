"""kernbench's blocks: the mean and standard deviation of each figure per load, and the change
of each further column against the first (of the means, as kernbench's users compute it)."""

from __future__ import annotations

from dataclasses import dataclass

from perflab.stats.descriptive import Summary, summarize_many
from perflab.stats.relative import better_change


@dataclass
class Block:
    key: tuple                              # what the caller grouped by (a load and its parameters)
    metrics: list[str]
    summaries: list[dict[str, Summary]]     # per column: metric -> its summary (absent: not measured)
    changes: list[dict[str, float | None]]  # per column after the first: metric -> head.mean / base.mean - 1


def blocks(columns: list[dict[tuple, dict[str, list[float]]]], order: list[str]) -> list[Block]:
    """columns[i][key][metric] = the samples -> one Block per key (in first-seen order), metrics in `order` first."""
    keys: list[tuple] = []
    for column in columns:
        keys += [k for k in column if k not in keys]
    out = []
    for key in keys:
        names = sorted({m for column in columns for m in column.get(key, {})},
                       key=lambda m: (order.index(m) if m in order else len(order), m))
        cells = [(i, m, column[key][m]) for i, column in enumerate(columns) for m in names
                 if m in column.get(key, {}) and column[key][m]]
        summaries: list[dict[str, Summary]] = [{} for _ in columns]
        for (i, m, _), s in zip(cells, summarize_many([v for _, _, v in cells], [0] * len(cells))):
            summaries[i][m] = s
        changes = []
        for head in summaries[1:]:
            changes.append({m: (better_change(summaries[0][m].mean, head[m].mean, +1)
                                if m in summaries[0] and m in head else None) for m in names})
        out.append(Block(key, names, summaries, changes))
    return out

"""`perflab compare --style lmbench`: the LMbench summary, one row per operand,
followed by the changes the comparison calls significant."""

from __future__ import annotations

from perflab.benchmarks.lmbench.catalog import FIGURES
from perflab.comparison import ComparisonResult
from perflab.report.lmbench import render_summary


def render(result: ComparisonResult) -> str:
    rows = [(label, {}) for label in result.labels]
    calls = []
    for r in result.rows:
        if r.metric not in FIGURES:
            continue
        rows[0][1][r.metric] = r.base.center
        for i, cmp in enumerate(r.heads, start=1):
            if cmp is not None:
                rows[i][1][r.metric] = cmp.head.center
                if cmp.verdict in ("regression", "improvement"):
                    calls.append(f"  {result.labels[i]}: {r.metric} {cmp.pct_change * 100:+.1f}% "
                                 f"{cmp.verdict} (p={cmp.p_adjusted:.2g})")
    text = render_summary(rows)
    if calls:
        text += "\nSignificant changes against " + result.labels[0] + ":\n" + "\n".join(calls) + "\n"
    else:
        text += f"\nNo significant change against {result.labels[0]} (alpha {result.alpha:g} after FDR, minimum effect {result.threshold * 100:g}%).\n"
    return text

"""`perflab compare --style lmbench`: the LMbench summary, one row per operand,
followed by the changes the comparison calls significant, the monitors'
metrics (--monitors changed or all, a heading per monitor), the FDR families
and every metric's caveats in words."""

from __future__ import annotations

from perflab.benchmarks.lmbench.catalog import FIGURES
from perflab.analysis.views.comparison import ComparisonView
from perflab.report.lmbench import render_summary
from perflab.report.notes import caveat_lines, fdr_group_lines, monitor_summary, shown, tail_lines
from perflab.report.numbers import percent, value
from perflab.stats.compare import CHANGED, IMPROVEMENT, REGRESSION, SECONDARY


def render(view: ComparisonView) -> str:
    result = view.result
    rows = [(label, {}) for label in result.labels]
    calls = []
    for r in result.rows:
        if r.metric not in FIGURES:
            continue
        rows[0][1][r.metric] = r.base.center
        for i, cmp in enumerate(r.heads, start=1):
            if cmp is not None:
                rows[i][1][r.metric] = cmp.head.center
                if cmp.verdict in (REGRESSION, IMPROVEMENT, CHANGED):
                    secondary = " secondary" if r.fdr_group == SECONDARY else ""
                    calls.append(f"  {shown(result.labels[i])}: {shown(r.metric)} {percent(cmp.pct_change)} "
                                 f"{cmp.verdict}{secondary} (p={cmp.p_adjusted:.2g})")
    # Instruction-time when every LMbench figure compared was measured under icount (its unit says so).
    units = [r.unit for r in result.rows if r.metric in FIGURES]
    # compare's figure of each side (Summary.center), named as every compare layout names it.
    named = {r.base.estimator for r in result.rows if r.metric in FIGURES}
    text = render_summary(rows, icount=bool(units) and all("(icount)" in (u or "") for u in units),
                          estimators=named)
    base = shown(result.labels[0])
    if calls:
        text += "\nSignificant changes against " + base + ":\n" + "\n".join(calls) + "\n"
    else:
        text += f"\nNo significant change against {base} (alpha {result.alpha:g} after FDR, minimum effect {result.threshold * 100:g}%).\n"
    if result.monitor_rows:
        text += "\n" + monitor_summary(result) + ":\n"
        for monitor, members in result.monitor_sections():
            text += f"  -- {shown(monitor)} --\n"
            for r in members:
                for label, cmp in zip(result.labels[1:], r.heads):
                    if cmp is not None:
                        text += (f"  {shown(label)}: {shown(r.metric)} {value(r.base.center)} -> {value(cmp.head.center)} "
                                 f"({percent(cmp.pct_change)}, {cmp.verdict}, p={cmp.p_adjusted:.2g})\n")
    notes = fdr_group_lines(result) + caveat_lines(result, lambda row: shown(row.metric)) + tail_lines(result)
    return text + "\n" + "\n".join(notes) + "\n"

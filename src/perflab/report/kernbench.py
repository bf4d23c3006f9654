"""kernbench's "Average ... Run (std deviation)" blocks, one per operand.

Each line is the metric's mean and, in parentheses, its standard deviation;
the heads carry their change against the base and the verdict.
"""

from __future__ import annotations

from perflab.comparison import ComparisonResult
from perflab.report.numbers import value

NAMES = {
    "time.elapsed_time": "Elapsed Time",
    "time.user_time": "User Time",
    "time.system_time": "System Time",
    "time.maximum_resident_set_size": "Max RSS (KiB)",
}


def render(result: ComparisonResult) -> str:
    lines = []
    rows = [r for r in result.rows if r.direction != 0]
    width = max([len(NAMES.get(r.metric, r.metric)) for r in rows] + [12])
    for i, label in enumerate(result.labels):
        testcases = sorted({r.testcase for r in rows})
        lines.append(f"Average {label} Run (std deviation):" + (f"  [{', '.join(testcases)}]" if len(testcases) == 1 else ""))
        for r in rows:
            name = NAMES.get(r.metric, r.metric)
            if len(testcases) > 1:
                name = f"{r.testcase}:{name}"
            if i == 0:
                lines.append(f"{name:<{width}} {value(r.base.mean)} ({value(r.base.stddev)})")
                continue
            cmp = r.heads[i - 1]
            if cmp is None:
                lines.append(f"{name:<{width}} -   [not measured]")
                continue
            lines.append(f"{name:<{width}} {value(cmp.head.mean)} ({value(cmp.head.stddev)})   "
                         f"[{cmp.pct_change * 100:+.2f}% {cmp.verdict}, p={cmp.p_adjusted:.3g}]")
        lines.append("")
    for label, what in result.one_sided:
        lines.append(f"only in {label}: {what}")
    for w in result.warnings:
        lines.append(f"note: {w}")
    return "\n".join(lines) + "\n"

"""kernbench's "Average ... Run (std deviation)" blocks, one per operand.

Each line is the metric's mean and, in parentheses, its standard deviation;
the heads carry, in brackets, their change against the base, the verdict, the
adjusted p-value and the interval of the change at the level the FDR family
was tested at (so an interval that excludes zero goes with a call), or the
reason no test was possible; then the metric's caveats.
"""

from __future__ import annotations

from perflab.comparison import ComparisonResult
from perflab.report.notes import caveats, family_lines, shown, tail_lines
from perflab.report.numbers import ci_percent, percent, value
from perflab.stats.compare import INSUFFICIENT, SECONDARY

NAMES = {
    "time.elapsed_time": "Elapsed Time",
    "time.user_time": "User Time",
    "time.system_time": "System Time",
    "time.maximum_resident_set_size": "Max RSS (KiB)",
}


def _verdict(cmp, family: str) -> str:
    if cmp.verdict == INSUFFICIENT:
        return caveats(cmp)
    words = [f"{percent(cmp.pct_change, decimals=2)} {cmp.verdict}"]
    if family == SECONDARY:
        words.append("secondary")
    words.append(f"p={cmp.p_adjusted:.3g}")
    if cmp.ci_adjusted is not None:
        words.append(f"FDR-adjusted {cmp.ci_level * 100:.4g}% CI {ci_percent(cmp.ci_adjusted, 2)}")
    text = ", ".join(words)
    return f"{text}; {caveats(cmp)}" if cmp.warnings else text


def render(result: ComparisonResult) -> str:
    lines = []
    rows = [r for r in result.rows if r.direction != 0]
    width = max([len(shown(NAMES.get(r.metric, r.metric))) for r in rows] + [12])
    testcases = sorted({r.testcase for r in rows})
    if len(testcases) > 1:
        width = max([width] + [len(shown(f"{r.testcase}:{NAMES.get(r.metric, r.metric)}")) for r in rows])
    for i, label in enumerate(result.labels):
        lines.append(f"Average {shown(label)} Run (std deviation):"
                     + (f"  [{shown(testcases[0])}]" if len(testcases) == 1 else ""))
        for r in rows:
            name = NAMES.get(r.metric, r.metric)
            if len(testcases) > 1:
                name = f"{r.testcase}:{name}"
            name = shown(name)
            if i == 0:
                lines.append(f"{name:<{width}} {value(r.base.mean)} ({value(r.base.stddev)})")
                continue
            cmp = r.heads[i - 1]
            if cmp is None:
                lines.append(f"{name:<{width}} -   [not measured]")
                continue
            lines.append(f"{name:<{width}} {value(cmp.head.mean)} ({value(cmp.head.stddev)})   "
                         f"[{_verdict(cmp, r.family)}]")
        lines.append("")
    lines += family_lines(result)
    lines += tail_lines(result)
    return "\n".join(lines) + "\n"

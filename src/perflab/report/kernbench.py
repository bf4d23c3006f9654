"""kernbench's "Average ... Run (std deviation)" blocks.

kernbench runs (benchmark `kernbench`) print as the seed report does: one
block per load ("Average Half load -j 8 Run (std deviation):"), a column per
operand (BASE, HEAD ...) with each figure (compare's: a time's mean, a rate's harmonic
mean, an exact metric's least disturbed sample; the last line names it) and, in parentheses, its
standard deviation, then the head's %change against the base. In `compare`,
each head's line carries, in brackets, the verdict, the adjusted p-value and
the interval of the change at the level the FDR family was tested at (so an
interval that excludes zero goes with a call), or the reason no test was
possible; then the metric's caveats.

Other benchmarks' rows print one block per operand, "Average LABEL Run (std
deviation):", each line the metric's mean (stddev) with the same brackets.
The monitors' metrics (--monitors changed or all) follow in one block per
monitor, as the kernbench blocks. The FDR family sizes and the comparison's
notes close the output.

Formatting only: every number comes from perflab.stats, through the comparison's view
(perflab.analysis.views.comparison) or kernbench's view hook (benchmarks/kernbench/view.py)
for `perflab report kernbench`, which also groups the rows into blocks.
"""

from __future__ import annotations

import json

from perflab.analysis.comparison import ComparisonResult
from perflab.analysis.views.comparison import ComparisonView
from perflab.benchmarks.kernbench.view import KERNBENCH, KERNBENCH_NAMES, KernbenchView
from perflab.core.text import printable
from perflab.report.notes import caveats, estimator_legend, fdr_group_lines, monitor_summary, shown, tail_lines
from perflab.report.numbers import ci_percent, percent, value
from perflab.stats.compare import INSUFFICIENT, SECONDARY

NAMES = {
    "time.elapsed_time": "Elapsed Time",
    "time.user_time": "User Time",
    "time.system_time": "System Time",
    "time.maximum_resident_set_size": "Max RSS (KiB)",
    **KERNBENCH_NAMES,
}


def _differing(rests: list[dict]) -> set[str]:
    keys = {k for r in rests for k in r}
    return {k for k in keys if len({json.dumps(r.get(k), sort_keys=True, default=str) for r in rests}) > 1}


def _suffix(rest: dict, differing: set[str]) -> str:
    shown_params = [f"{k}={rest[k]}" for k in sorted(differing) if k in rest]
    return f"  [{shown(', '.join(shown_params))}]" if shown_params else ""


def _cell(mean: float, stddev: float) -> str:
    return f"{value(mean)} ({value(stddev)})"


def _table(header: list[str], rows: list[list[str]], notes: list[str]) -> list[str]:
    """Columns padded to their widest cell; a note (verdicts) after each row."""
    widths = [max(len(r[c]) for r in [header, *rows]) for c in range(len(header))]
    out = []
    for row, note in zip([header, *rows], ["", *notes]):
        # The %change columns (every other one after the base) are right-aligned.
        text = "  ".join(cell.rjust(w) if c >= 3 and c % 2 == 1 else cell.ljust(w)
                         for c, (cell, w) in enumerate(zip(row, widths))).rstrip()
        out.append(f"{text}   {note}" if note else text)
    return out


def _verdict(cmp, fdr_group: str, change: bool = True) -> str:
    if cmp.verdict == INSUFFICIENT:
        return caveats(cmp)
    words = [f"{percent(cmp.pct_change, decimals=2)} {cmp.verdict}" if change else cmp.verdict]
    if fdr_group == SECONDARY:
        words.append("secondary")
    if cmp.exact:
        words.append(f"exact ±{cmp.resolution * 100:.2g}%")
        return f"{', '.join(words)}; {caveats(cmp)}"
    words.append(f"p={cmp.p_adjusted:.3g}")
    if cmp.ci_adjusted is not None:
        words.append(f"FDR-adjusted {cmp.ci_level * 100:.4g}% CI {ci_percent(cmp.ci_adjusted, 2)}")
    text = ", ".join(words)
    return f"{text}; {caveats(cmp)}" if cmp.warnings else text


def _kernbench_blocks(result: ComparisonResult, groups: list) -> list[str]:
    differing = _differing([g.rest for g in groups])
    lines = []
    for group in groups:
        lines.append(f"Average {group.title} Run (std deviation):{_suffix(group.rest, differing)}")
        lines += _compared_table(result, group.rows, lambda r: NAMES.get(r.metric, r.metric))
        lines.append("")
    return lines


def _compared_table(result: ComparisonResult, rows: list, name_of) -> list[str]:
    """A block's table: a row per metric, the base's mean (stddev), each head's with its %change,
    and in brackets after the row each head's verdict."""
    several = len(result.labels) > 2
    header = ["", shown(result.labels[0])] + [x for label in result.labels[1:] for x in (shown(label), "")]
    body, notes = [], []
    for r in rows:
        cells = [printable(name_of(r), None), _cell(r.base.center, r.base.stddev)]
        words = []
        for label, cmp in zip(result.labels[1:], r.heads):
            if cmp is None:
                cells += ["-", ""]
                words.append((f"{shown(label)}: " if several else "") + "not measured")
                continue
            cells += [_cell(cmp.head.center, cmp.head.stddev), percent(cmp.pct_change, decimals=2)]
            words.append((f"{shown(label)}: " if several else "") + _verdict(cmp, r.fdr_group, change=False))
        body.append(cells)
        notes.append("[" + "] [".join(words) + "]" if words else "")
    return _table(header, body, notes)


def _generic_blocks(result: ComparisonResult, rows: list) -> list[str]:
    lines = []
    width = max([len(shown(NAMES.get(r.metric, r.metric))) for r in rows] + [12])
    testcases = sorted({r.testcase for r in rows})
    if len(testcases) > 1:
        width = max([width] + [len(printable(f"{r.testcase}: {NAMES.get(r.metric, r.metric)}", None)) for r in rows])
    for i, label in enumerate(result.labels):
        lines.append(f"Average {shown(label)} Run (std deviation):"
                     + (f"  [{printable(testcases[0], None)}]" if len(testcases) == 1 else ""))
        for r in rows:
            name = NAMES.get(r.metric, r.metric)
            if len(testcases) > 1:
                name = f"{r.testcase}: {name}"
            name = printable(name, None)
            if i == 0:
                lines.append(f"{name:<{width}} {value(r.base.center)} ({value(r.base.stddev)})")
                continue
            cmp = r.heads[i - 1]
            if cmp is None:
                lines.append(f"{name:<{width}} -   [not measured]")
                continue
            lines.append(f"{name:<{width}} {value(cmp.head.center)} ({value(cmp.head.stddev)})   "
                         f"[{_verdict(cmp, r.fdr_group)}]")
        lines.append("")
    return lines


def _monitor_blocks(result: ComparisonResult) -> list[str]:
    lines = [monitor_summary(result), ""]
    testcases = {r.testcase for r in result.monitor_rows}
    for monitor, rows in result.monitor_sections():
        lines.append(f"Monitor {shown(monitor)}, average (std deviation):")
        lines += _compared_table(result, rows, lambda r: r.metric if len(testcases) == 1 else f"{r.testcase}: {r.metric}")
        lines.append("")
    return lines


def render(view: ComparisonView) -> str:
    result = view.result
    kern = [r for r in result.rows if r.benchmark == KERNBENCH and r.monitor is None]
    others = [r for r in result.rows if r.benchmark != KERNBENCH and r.direction != 0 and r.monitor is None]
    lines = _kernbench_blocks(result, view.kernbench_blocks) if kern else []
    if others or not kern:
        lines += _generic_blocks(result, others)
    if result.monitor_rows:
        lines += _monitor_blocks(result)
    # "Average" is kernbench's word; the figure is compare's (a time's mean, a rate's harmonic mean).
    lines.append(estimator_legend(r.base.estimator for r in [*result.rows, *result.monitor_rows])
                 + " (std deviation)")
    lines += fdr_group_lines(result)
    lines += tail_lines(result)
    return "\n".join(lines) + "\n"


def render_report(view: KernbenchView) -> str:
    """`perflab report kernbench`: the view hook's stats.kernbench Blocks -> kernbench's blocks,
    one column per operand, the %change of each against the first."""
    labels, rests = view.labels, view.rests
    differing = _differing(list(rests.values()))
    lines = []
    header = [""] + [shown(labels[0])] + [x for label in labels[1:] for x in (shown(label), "")]
    for block in view.blocks:
        lines.append(f"Average {block.key[0][2]} Run (std deviation):{_suffix(rests[block.key], differing)}")
        body = []
        for m in block.metrics:
            base = block.summaries[0].get(m)
            cells = [shown(NAMES.get(m, m)), _cell(base.mean, base.stddev) if base else "-"]
            for column, change in zip(block.summaries[1:], block.changes):
                s = column.get(m)
                cells += [_cell(s.mean, s.stddev) if s else "-", percent(change.get(m), decimals=2)
                          if change.get(m) is not None else ""]
            body.append(cells)
        lines += _table(header, body, [""] * len(body))
        lines.append("")
    return "\n".join(lines)

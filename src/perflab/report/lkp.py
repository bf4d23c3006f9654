"""The 0-day robot's comparison layout (LKP `ncompare`).

    =====================================================================
    benchmark/param/...:
      value/value/...

    commit:
      base
      head

    base             head
    ---------------- --------------------------
             %stddev     %change         %stddev
                 \\          |                \\
         10092           -17.5%       8323        will-it-scale.per_thread_ops

±%stddev is shown only where it exceeds 2%, as LKP does. Regressions come
first, then improvements, each sorted by the size of the change; the rest of
the metrics follow under their own heading so that nothing is hidden.

Then the monitors' metrics (the robot's "Details are as below"), a heading per
monitor, largest change first: by default only those that changed
significantly and are not noise by LKP's display rules (perflab.analysis.comparison:
perf-profile shares from 5%, counters above a floor); `--monitors all` shows
every one. A perf-profile share's change is in percentage points ("+25.0"), as
LKP prints it.
"""

from __future__ import annotations

import json

from perflab.analysis.comparison import ComparisonResult, MetricRow
from perflab.analysis.selection import VARIANT_KEY
from perflab.analysis.views.comparison import ComparisonView
from perflab.core.text import printable
from perflab.report.notes import Footnotes, estimator_legend, fdr_group_lines, monitor_summary, shown, tail_lines
from perflab.report.numbers import percent, value
from perflab.stats.compare import CHANGED, IMPROVEMENT, PRIMARY, REGRESSION, SECONDARY

STDDEV_SHOWN_ABOVE = 0.02
HEADER_KEYS = ("cc_version", "kernel_release", "cpufreq_governor", "thp_enabled", "testbox")


def _stddev(summary) -> str:
    cov = summary.cov
    if cov is None or cov != cov or abs(cov) <= STDDEV_SHOWN_ABOVE:
        return "      "
    return f" ±{min(abs(cov) * 100, 999):3.0f}%"


def _points(x: float) -> str:
    """A perf-profile share's change in percentage points, LKP's way: "+25.0", "-2.3"."""
    if x != x:
        return "~"
    return "0.0" if round(x, 1) == 0 else f"{x:+.1f}"


def _note(row: MetricRow, labels: list[str], notes: Footnotes, implied: str | None = None) -> str:
    """The row's verdicts that its section heading does not say (`implied`) in brackets, and
    its caveats as numbered footnotes shared by the rows (listed below the table)."""
    parts = []
    marks = ""
    several = len(row.heads) > 1
    for label, cmp in zip(labels, row.heads):
        if cmp is None:
            continue
        if cmp.verdict != implied and (cmp.verdict == CHANGED or (
                row.fdr_group != PRIMARY and cmp.verdict in (REGRESSION, IMPROVEMENT))):
            parts.append((f"{shown(label)}: " if several else "") + cmp.verdict)
        marks += notes.caveats(cmp)
    text = " | ".join(parts)
    noise = row.noise() if row.significant() else None
    if noise:  # shown by --monitors all only
        text += ("; " if text else "") + f"noise: {noise}"
    shown_marks = " ".join(dict.fromkeys(marks.split()))
    return (f"   [{text}]" if text else "") + (f" {shown_marks}" if shown_marks else "")


def _line(row: MetricRow, name: str, labels: list[str], notes: Footnotes, implied: str | None = None,
          pads: list[int] | None = None) -> str:
    """A metric's line; `pads`: the spaces before each column's cells, where an operand's whole
    name heads a column wider than LKP's (_widths)."""
    pads = pads or [0] * (len(row.heads) + 1)
    cells = f"{'':{pads[0]}}{value(row.base.center):>10}{_stddev(row.base)}"
    for i, cmp in enumerate(row.heads):
        cells += f"{'':{pads[i + 1]}}"
        if cmp is None:
            cells += f" {'':>10} {'-':>10}      "
            continue
        if row.in_points:
            change = _points(row.point_change(i))
        else:
            change = percent(cmp.pct_change) if cmp.pct_change == cmp.pct_change else "~"
        cells += f" {change:>10} {value(cmp.head.center):>10}{_stddev(cmp.head)}"
    return f"{cells}  {name}{_note(row, labels, notes, implied)}"


def _header(result: ComparisonResult) -> list[str]:
    common = result.common
    keys = [k for k in common if k.startswith("param.")] + [k for k in HEADER_KEYS if k in common]
    keys = ["benchmark"] + [k for k in keys if k != "benchmark"] if "benchmark" in common else keys
    names = "/".join(shown(k.removeprefix("param.")) for k in keys)
    values = "/".join(shown(common[k]) for k in keys)
    lines = ["=" * 89, f"{names}:", f"  {values}", ""]
    kinds = {"commit" if any(r.commit and r.commit.startswith(sel.operand.lower()) for r in sel.runs) else "tag"
             for sel in result.selections}
    lines.append(("commit" if kinds == {"commit"} else "variant") + ":")
    for label, sel in zip(result.labels, result.selections):
        # A column named for its side (the series mail's base / head) says what it selected.
        lines.append(f"  {shown(label)}: {shown(sel.label)}" if label != sel.label else f"  {shown(sel.label)}")
    lines.append("")
    if result.env_diff:
        lines.append("environment differences (--cross-box):")
        for key, a, b in result.env_diff:
            lines.append(f"  {shown(key)}: {shown(a)} -> {shown(b)}")
        lines.append("")
    return lines


BASE_WIDTH, HEAD_WIDTH = 16, 26   # LKP's columns: the base's figure and %stddev, a head's %change, figure, %stddev


def _widths(labels: list[str]) -> list[int]:
    """The spaces each column gains so that its operand's whole name heads it: LKP cuts a commit
    to its column (the `commit:` block above lists them whole), but a variant's or a kernel's
    name is told apart anywhere, often at its end (`tag=e1,cmdline=mitigations=off`)."""
    return [max(0, len(shown(label, None)) - (BASE_WIDTH if i == 0 else HEAD_WIDTH)) for i, label in enumerate(labels)]


def _testcase_labels(rows: list[MetricRow]) -> dict[int, str]:
    """The first column: each row's name (analysis.naming: the parameters that tell rows apart),
    without the family when every row has the same one; what every row shares is in the header."""
    one_family = len({r.benchmark for r in rows}) == 1
    return {id(r): printable(r.testcase.removeprefix(r.benchmark + " ") if one_family else r.testcase, None) for r in rows}


def render(result: ComparisonResult) -> str:
    lines = _header(result)
    heads = len(result.labels) - 1
    labels = [shown(label, None) for label in result.labels]
    pads = _widths(result.labels)
    lines.append(f"{labels[0]:>{BASE_WIDTH + pads[0]}} "
                 + " ".join(f"{l:>{HEAD_WIDTH + p}} " for l, p in zip(labels[1:], pads[1:])))
    lines.append("-" * (BASE_WIDTH + pads[0]) + " " + " ".join("-" * (HEAD_WIDTH + p) + " " for p in pads[1:]))
    lines.append(" " * pads[0] + "         %stddev" + "".join(" " * p + "     %change         %stddev" for p in pads[1:]))
    lines.append(" " * pads[0] + "             \\  " + "".join(" " * p + "        |                \\  " for p in pads[1:]))
    # A row per testcase names it; so does a lone row of one variant among several (`variant=amd64`
    # of a tag matched with the other side's one kernel): the header names no variant.
    several = len({(r.benchmark, json.dumps(r.params, sort_keys=True, default=str)) for r in result.rows}) > 1 \
        or any(VARIANT_KEY in r.params for r in result.rows)
    head_labels = result.labels[1:]
    testcases = _testcase_labels(result.rows) if several else {}
    width = max((len(t) for t in testcases.values()), default=0)
    if several:
        # The seed's table: testcase (key=value of what differs), base, %change, head, metric.
        lines[-4:] = [f"{'':{width}}  {l}" for l in lines[-4:]]

    def size(row: MetricRow) -> float:
        return max((c.magnitude for c in row.heads if c is not None), default=0.0)

    def has(row: MetricRow, verdict: str) -> bool:
        return any(c is not None and c.verdict == verdict for c in row.heads)

    notes = Footnotes()

    def line(row: MetricRow, implied: str | None = None) -> str:
        text = _line(row, shown(row.metric), head_labels, notes, implied, pads)
        return f"{testcases[id(row)]:{width}}  {text}" if several else text

    primary = [r for r in result.rows if r.fdr_group == PRIMARY]
    secondary = [r for r in result.rows if r.fdr_group == SECONDARY]
    regressions = sorted((r for r in primary if has(r, REGRESSION)), key=size, reverse=True)
    improvements = sorted((r for r in primary if has(r, IMPROVEMENT) and not has(r, REGRESSION)), key=size, reverse=True)
    called = {id(r) for r in regressions + improvements}
    rest = [r for r in primary if id(r) not in called]

    for title, rows in (("regressions", regressions), ("improvements", improvements)):
        if rows:
            lines.append(f"  -- {title} --")
            lines += [line(r) for r in rows]
    if not regressions and not improvements:
        lines.append("  -- no significant change --")
    if rest:
        lines.append(f"  -- not significant (alpha {result.alpha:g} after FDR, minimum effect {result.threshold * 100:g}%) --")
        lines += [line(r) for r in rest]
    if secondary:
        lines.append("  -- secondary metrics (their own FDR family; calls said in brackets) --")
        first = [r for r in secondary if has(r, REGRESSION) or has(r, IMPROVEMENT) or has(r, CHANGED)]
        lines += [line(r) for r in first + [r for r in secondary if r not in first]]
    if result.monitor_rows:
        # The changed view's heading says "changed": its rows need not repeat it.
        implied = CHANGED if result.monitors == "changed" else None
        lines.append(f"  -- {monitor_summary(result)} --")
        for monitor, rows in result.monitor_sections():
            lines.append(f"  -- {shown(monitor)} --")
            lines += [line(r, implied) for r in rows]
    lines += notes.lines("  ")
    # What the figures are (stats.descriptive.estimator): one line, as the mail and the HTML say it.
    lines.append("  " + estimator_legend(r.base.estimator for r in [*result.rows, *result.monitor_rows]) + "; %stddev of the samples")
    lines += ["  " + l for l in fdr_group_lines(result)]
    lines += tail_lines(result, "  ")
    return "\n".join(lines) + "\n"


def render_view(view: ComparisonView) -> str:
    """The layout's entry in perflab.report.registry; the robot's mail (report.regression) has a
    bare result, and calls render."""
    return render(view.result)

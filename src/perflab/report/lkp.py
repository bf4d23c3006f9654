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
"""

from __future__ import annotations

import json

from perflab.comparison import ComparisonResult, MetricRow
from perflab.report.numbers import value

STDDEV_SHOWN_ABOVE = 0.02
HEADER_KEYS = ("cc_version", "kernel_release", "cpufreq_governor", "thp_enabled", "testbox")


def _stddev(summary) -> str:
    cov = summary.cov
    if cov is None or cov != cov or abs(cov) <= STDDEV_SHOWN_ABOVE:
        return "      "
    return f" ±{min(abs(cov) * 100, 999):3.0f}%"


def _line(row: MetricRow, name: str) -> str:
    cells = f"{value(row.base.center):>10}{_stddev(row.base)}"
    for cmp in row.heads:
        if cmp is None:
            cells += f" {'':>10} {'-':>10}      "
            continue
        change = f"{cmp.pct_change * 100:+.1f}%" if cmp.pct_change == cmp.pct_change else "~"
        cells += f" {change:>10} {value(cmp.head.center):>10}{_stddev(cmp.head)}"
    return f"{cells}  {name}"


def _header(result: ComparisonResult) -> list[str]:
    common = result.common
    keys = [k for k in common if k.startswith("param.")] + [k for k in HEADER_KEYS if k in common]
    keys = ["benchmark"] + [k for k in keys if k != "benchmark"] if "benchmark" in common else keys
    names = "/".join(k.removeprefix("param.") for k in keys)
    values = "/".join(str(common[k]) for k in keys)
    lines = ["=" * 89, f"{names}:", f"  {values}", ""]
    kinds = {"commit" if any(r.commit and r.commit.startswith(sel.operand.lower()) for r in sel.runs) else "tag"
             for sel in result.selections}
    lines.append(("commit" if kinds == {"commit"} else "variant") + ":")
    for sel in result.selections:
        lines.append(f"  {sel.label}")
    lines.append("")
    if result.env_diff:
        lines.append("environment differences (--cross-box):")
        for key, a, b in result.env_diff:
            lines.append(f"  {key}: {a} -> {b}")
        lines.append("")
    return lines


def _metric_name(row: MetricRow, several_testcases: bool) -> str:
    return f"{row.testcase}:{row.metric}" if several_testcases else row.metric


def render(result: ComparisonResult) -> str:
    lines = _header(result)
    heads = len(result.labels) - 1
    labels = [label[:16] for label in result.labels]
    lines.append(f"{labels[0]:>16} " + " ".join(f"{l:>26} " for l in labels[1:]))
    lines.append("-" * 16 + " " + " ".join("-" * 26 + " " for _ in labels[1:]))
    lines.append("         %stddev" + "     %change         %stddev" * heads)
    lines.append("             \\  " + "        |                \\  " * heads)
    several = len({(r.benchmark, json.dumps(r.params, sort_keys=True, default=str)) for r in result.rows}) > 1

    def size(row: MetricRow) -> float:
        return max(abs(c.pct_change) for c in row.heads if c is not None)

    def has(row: MetricRow, verdict: str) -> bool:
        return any(c is not None and c.verdict == verdict for c in row.heads)

    regressions = sorted((r for r in result.rows if has(r, "regression")), key=size, reverse=True)
    improvements = sorted((r for r in result.rows if has(r, "improvement") and not has(r, "regression")), key=size, reverse=True)
    called = {id(r) for r in regressions + improvements}
    rest = [r for r in result.rows if id(r) not in called and r.direction != 0]

    for title, rows in (("regressions", regressions), ("improvements", improvements)):
        if rows:
            lines.append(f"  -- {title} --")
            lines += [_line(r, _metric_name(r, several)) for r in rows]
    if not regressions and not improvements:
        lines.append("  -- no significant change --")
    if rest:
        lines.append(f"  -- not significant (alpha {result.alpha:g} after FDR, minimum effect {result.threshold * 100:g}%) --")
        for r in rest:
            note = ""
            for c in r.heads:
                if c is not None and c.verdict == "insufficient samples":
                    note = "   [too few samples to tell]"
            lines.append(_line(r, _metric_name(r, several)) + note)
    for label, what in result.one_sided:
        lines.append(f"  only in {label}: {what}")
    for w in result.warnings:
        lines.append(f"  note: {w}")
    return "\n".join(lines) + "\n"

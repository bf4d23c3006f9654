"""The 0-day robot's email, in plain text: subject, culprit, testcase, machine, details, reproduce.

Formatting only: perflab.analysis.regression gathered the facts and perflab.analysis.comparison
and perflab.stats computed every number.
"""

from __future__ import annotations

import math
import shlex

from perflab.jobs import to_yaml
from perflab.analysis.regression import CommitInfo, RegressionReport
from perflab.report import lkp
from perflab.report.notes import shown
from perflab.report.numbers import percent

RULE = "-" * 98 + ">"


def _commit_line(c: CommitInfo | None, label: str) -> str:
    if c is None:
        return f"{label} (no commit recorded)"
    return f"{c.sha}" + (f' ("{shown(c.subject, 120)}")' if c.subject else "")


def _significance(report: RegressionReport) -> str:
    cmp = report.headline.heads[0]
    parts = [f"change {percent(cmp.pct_change)}"]
    if cmp.ci_adjusted:
        lo, hi = cmp.ci_adjusted
        parts[0] += f" [{percent(lo)}, {percent(hi)}] ({cmp.ci_level * 100:.1f}% interval)"
    parts.append(f"p = {cmp.p_adjusted:.2g} after FDR over {cmp.fdr_group_size} metrics")
    parts.append(f"n = {cmp.base.n} vs {cmp.head.n}")
    if math.isfinite(report.detectable):
        parts.append(f"these samples detect a change of {report.detectable * 100:.1f}% with 90% power")
    return "; ".join(parts)


def render(report: RegressionReport) -> str:
    row = report.headline
    lines = [
        f"Subject: {shown(report.subject, 400)}",
        "",
        "Greeting,",
        "",
        f"FYI, we noticed a {report.change * 100:+.1f}% regression of {shown(row.metric)} due to commit:",
        "",
        f"commit: {_commit_line(report.head, shown(report.comparison.labels[1]))}",
    ]
    if report.head and report.head.author:
        lines.append(f"author: {shown(report.head.author, 120)}")
    if report.repo or report.remote:
        remote = f" ({shown(report.remote, 200)})" if report.repo and report.remote else ""
        lines.append(f"in repository: {shown(report.repo or report.remote, 200)}{remote}")
    lines += [
        "",
        f"in testcase: {shown(row.benchmark)}",
        f"on test machine: {shown(report.machine, 200)}",
        "with following parameters:",
        "",
    ]
    lines += [f"\t{shown(k)}: {shown(v, 120)}" for k, v in row.params.items() if v not in (None, "", [], {})]
    lines += ["", f"significance: {_significance(report)}"]
    others = [r for r in report.regressions if r is not row]
    if others:
        lines.append(f"also regressed: " + ", ".join(
            f"{shown(r.metric)} {percent(r.heads[0].pct_change)}" for r in others[:8])
            + (f" and {len(others) - 8} more" if len(others) > 8 else ""))
    lines += ["", "Details are as below:", RULE, ""]
    lines += _reproduce(report)
    lines += ["", lkp.render(report.comparison).rstrip("\n"), "", "", "Thanks,", "perflab", ""]
    return "\n".join(lines)


def _reproduce(report: RegressionReport) -> list[str]:
    out = ["To reproduce:", ""]
    sha = report.head.sha if report.head else None
    repo = shlex.quote(report.repo) if report.repo else "SUT"
    if not report.repo and report.remote:
        out.append(f"        git clone {shlex.quote(report.remote)} SUT")
    if sha:
        out.append(f"        git -C {repo} checkout {sha}")
    if report.build:
        out.append(f"        (cd {repo} && {report.build})")
    if report.job:
        out.append("        cat > job.yaml <<'EOF'")
        out += ["        " + line for line in to_yaml(report.job).rstrip("\n").splitlines()]
        out.append("        EOF")
        tag = (report.head.short if report.head else "head")
        out.append(f"        perflab run job.yaml --repo {repo} --tag {tag}")
    else:
        out.append("        (the head runs were imported: no atomic job is stored to rerun)")
    base = report.base.short if report.base else shlex.quote(report.comparison.labels[0])
    head = report.head.short if report.head else shlex.quote(report.comparison.labels[1])
    out.append(f"        perflab compare {base} {head}")
    return out

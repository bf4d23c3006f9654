"""The 0-day robot's email, in plain text: subject, culprit, testcase, machine, tags, reproduce, details.

A regression mail, or an improvement mail when the head improved and nothing regressed
(docs/robot.md). Formatting only: perflab.analysis.regression gathered the facts (the
job already reduced to its non-default keys) and perflab.analysis.comparison and
perflab.stats computed every number.
"""

from __future__ import annotations

import math
import shlex

from perflab.core.text import printable
from perflab.jobs.minimal import differing_params, to_yaml
from perflab.analysis.regression import CommitInfo, RegressionReport
from perflab.report import lkp
from perflab.report.notes import shown
from perflab.report.numbers import percent
from perflab.stats.compare import REGRESSION

RULE = "-" * 98 + ">"
STEP = " " * 8   # the indentation of the reproduce steps, as the robot's mail has them
ALSO_SHOWN = 8   # other metrics of the headline's kind named by name


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _commit_line(c: CommitInfo | None, label: str) -> str:
    if c is None:
        return f"{label} (no commit recorded)"
    return f"{c.sha}" + (f' ("{shown(c.subject, 120)}")' if c.subject else "")


def _significance(report: RegressionReport) -> str:
    cmp = report.headline.heads[0]
    # An exact figure is printed exactly: two decimals show a 0.01% resolution's interval.
    decimals = 2 if cmp.exact else 1
    parts = [f"change {percent(cmp.pct_change, decimals=decimals)}"]
    if cmp.exact:
        # An exact metric's call is a ratio against its resolution: no p-value, no FDR to report.
        if cmp.ci_adjusted:
            lo, hi = cmp.ci_adjusted
            parts[0] += f" [{percent(lo, decimals=2)}, {percent(hi, decimals=2)}] (± the resolution)"
        parts.append(f"exact: resolution {cmp.resolution * 100:.2g}%, called beyond "
                     f"{cmp.detectable * 100:.2g}%; no p-value (compared as a ratio, outside the FDR adjustment)")
    else:
        if cmp.ci_adjusted and all(map(math.isfinite, cmp.ci_adjusted)) and math.isfinite(cmp.ci_level):
            lo, hi = cmp.ci_adjusted
            parts[0] += f" [{percent(lo)}, {percent(hi)}] ({cmp.ci_level * 100:.1f}% interval)"
        else:
            parts[0] += " (no interval: too few samples for a variance)"
        if math.isfinite(cmp.p_adjusted) and cmp.fdr_group_size:
            parts.append(f"p = {cmp.p_adjusted:.2g} after FDR over {_plural(cmp.fdr_group_size, 'metric')}")
        else:
            parts.append("no p-value: not tested (too few samples per side)")
    parts.append(f"n = {cmp.base.n} vs {cmp.head.n}")
    if cmp.exact:
        pass   # its resolution, said above, is what it detects
    elif math.isfinite(report.detectable) and report.detectable > 0:
        parts.append(f"these samples detect a change of {report.detectable * 100:.1f}% with 90% power")
    else:
        parts.append("the smallest change these samples detect could not be computed (no spread to estimate)")
    return "; ".join(parts)


def _parameters(row) -> list[str]:
    """The testcase's parameters: a switch or an empty value only when it is not the family's default."""
    differ = differing_params(row.benchmark, row.params)
    return [f"\t{shown(k)}: {shown(v, 120)}" for k, v in row.params.items()
            if v not in (None, "", [], {}) and (k in differ or not isinstance(v, bool))]


def _trailer(report: RegressionReport) -> list[str]:
    """The tags a separate fix should carry, in the block maintainers copy from the robot's mail."""
    t = report.trailer
    if t is None:
        return []
    lines = ["", "If a separate patch fixes this (not a new version of the commit above), please",
             "credit the report by adding these tags to it:",
             f"| Reported-by: {shown(t.reported_by, 200)}"]
    if t.closes:
        lines.append(f"| Closes: {shown(t.closes, 300)}")
    return lines


def _where(report: RegressionReport) -> list[str]:
    """Where the instructions moved (perflab.analysis.regression.where_view), as report profile prints it."""
    if report.where is None:
        return []
    from perflab.report.profile import render_instructions

    return ["", "where (instructions counted per function, base and head; one section per testcase, "
                "the headline's first):", "",
            *(("    " + line).rstrip() for line in render_instructions(report.where, moved_only=True).rstrip("\n").splitlines())]


def _others(report: RegressionReport) -> list[str]:
    others = [r for r in report.regressions if r is not report.headline]
    if not others:
        return []
    verb = "regressed" if report.kind == REGRESSION else "improved"
    named = ", ".join(f"{shown(r.metric)} {percent(r.heads[0].pct_change)}" for r in others[:ALSO_SHOWN])
    more = f" and {len(others) - ALSO_SHOWN} more" if len(others) > ALSO_SHOWN else ""
    return [f"also {verb}: {named}{more}"]


def _commit_head(report: RegressionReport) -> list[str]:
    """The commit the change is due to, its author and repository, as the robot's mail opens."""
    lines = [f"FYI, we noticed a {report.change * 100:+.1f}% {report.kind} of {shown(report.headline.metric)} "
             "due to commit:", "", f"commit: {_commit_line(report.head, shown(report.comparison.labels[1]))}"]
    if report.head and report.head.author:
        lines.append(f"author: {shown(report.head.author, 120)}")
    if report.repo or report.remote:
        remote = f" ({shown(report.remote, 200)})" if report.repo and report.remote else ""
        lines.append(f"in repository: {shown(report.repo or report.remote, 200)}{remote}")
    return lines


def _series_head(report: RegressionReport) -> list[str]:
    """The patch and the series it is in, base and head, as the robot's series reports open."""
    s = report.series
    lines = [f"FYI, we noticed a {report.change * 100:+.1f}% {report.kind} of {shown(report.headline.metric)} "
             "due to the patch:", "", f"patch: {shown(s.patch, 300)} ({s.index} of {s.total})"]
    if s.culprit is not None:
        lines.append(f"commit: {s.culprit.sha} (applied by git am in perflab's clone)")
        if s.culprit.author:
            lines.append(f"author: {shown(s.culprit.author, 120)}")
    lines += ["", f"series: {shown(s.cover, 300) + ', ' if s.cover else ''}{s.total} patch{'' if s.total == 1 else 'es'}"
              + (f" ({shown(s.mbox, 200)})" if s.mbox else ""),
              f"base commit: {_commit_line(report.base, 'base')}",
              f"head commit: {report.head.sha if report.head else shown(report.comparison.labels[1])} "
              f"(the series applied)"]
    if s.user_repo:
        lines.append(f"in repository: {shown(s.user_repo, 200)}")
    return lines


def _checks(report: RegressionReport) -> list[str]:
    """The kind of the change and the revert check, each a line, when they were made."""
    out = []
    if report.change_kind:
        out.append(f"kind of change: {shown(report.change_kind, 400)}")
    if report.revert_check:
        out.append(f"revert check: {shown(report.revert_check, 400)}")
    return out


def _series_reproduce(report: RegressionReport) -> list[str]:
    """The series applied by hand on its base, both ends built and measured, then compared; and the
    one command that does all of it with the bisection and the checks. Pasted into an empty
    directory it runs as it stands (tests/test_series_reproduce.py)."""
    s = report.series
    repo = shlex.quote(s.user_repo) if s.user_repo else "SUT"
    # `git am` on the mailbox file (or the directory's patch files): on a directory it applies nothing.
    am = shlex.join(s.am) if s.am else (shlex.quote(s.mbox) if s.mbox else "series.mbox")
    job = {k: v for k, v in (report.job or {}).items() if k != "kernel"}
    kernel = report.kernels[0] if report.kernels else None
    if kernel and kernel.boot_options:
        # --kernel below replaces the image and keeps the options the series' kernel was booted with.
        job["kernel"] = {"image": kernel.image, "cmdline": kernel.boot_options}
    steps = ["cat > job.yaml <<'EOF'", *to_yaml(job).rstrip("\n").splitlines(), "EOF",
             f"git clone -q {repo} series-test && cd series-test",
             f"git checkout -q {report.base.sha if report.base else 'BASE'}"]
    run = "perflab run ../job.yaml --repo ."     # the job file stays out of the checkout git am patches
    if kernel or report.kernel_image:
        steps.append(_kbuild_output("$PWD/../kbuild"))
        run += f" --kernel {_tree_kernel(report.kernel_image)}" + (f" --vm {kernel.mode}" if kernel and kernel.mode
                                                                   else "")
    for name, step in (("base", None), ("head", f"git am {am}")):
        if step:
            steps.append(step)
        if report.build:
            steps.append(report.build)      # whole: a reader runs it (printable below, not shortened)
        steps.append(f"{run} --tag {name}")
    steps.append("perflab compare base head")
    out = ["To reproduce:", "", *(STEP + printable(x, None) for x in steps)]
    if s.command:
        out += ["", "or all of it, the bisection inside the series and the checks included:", "",
                STEP + printable(s.command, None)]
    return out


def _kbuild_output(where: str) -> str:
    """The step that names kbuild's output directory, where the build steps below write the kernel."""
    return f"export KBUILD_OUTPUT={where}   # kbuild's output directory, for the builds below"


def _tree_kernel(image: str) -> str:
    """The --kernel of a side whose kernel the build below made in $KBUILD_OUTPUT."""
    return f'"$KBUILD_OUTPUT/{image or "arch/x86/boot/bzImage"}"'


def render(report: RegressionReport) -> str:
    row = report.headline
    lines = [f"Subject: {shown(report.subject, 400)}", "", "Greeting,", ""]
    lines += _series_head(report) if report.series is not None else _commit_head(report)
    lines += ["", f"in testcase: {shown(row.benchmark)}", f"on test machine: {shown(report.machine, 200)}"]
    params = _parameters(row)
    if params:
        lines += ["with following parameters:", "", *params]
    # The sides measured different things (a file system, host against guest): said before the figures.
    lines += [f"measured differently: {shown(d, 300)}" for d in report.comparison.measured_differently]
    lines += ["", f"significance: {_significance(report)}", *_others(report), *_checks(report),
              *_where(report), *_trailer(report)]
    lines += ["", "Details are as below:", RULE, ""]
    lines += _series_reproduce(report) if report.series is not None else _reproduce(report)
    lines += ["", lkp.render(report.comparison).rstrip("\n")]
    if report.secondary_left_out:
        n = len(report.secondary_left_out)
        names = ", ".join(map(shown, report.secondary_left_out[:ALSO_SHOWN])) + (", ..." if n > ALSO_SHOWN else "")
        lines.append(f"  {_plural(n, 'secondary metric')} left out of this mail: {names}")
    lines += ["", "", "Thanks,", "perflab", ""]
    return "\n".join(lines)


def _side(report: RegressionReport, which: int) -> tuple[CommitInfo | None, str]:
    """A side's commit and the tag its reproduced runs get (the short sha, else base/head)."""
    commit = report.base if which == 0 else report.head
    if commit:
        return commit, commit.short
    kernels = report.kernels
    if kernels and kernels[0].release and kernels[1].release and kernels[0].release != kernels[1].release:
        return None, shlex.quote(kernels[which].release)   # kernel images from no repository: named by release
    return None, ("base", "head")[which]


def _kernel_comment(k) -> str:
    figures = ", ".join(x for x in (f"{k.cpus} vCPU{'' if k.cpus == 1 else 's'}" if k.cpus else "",
                                   f"{k.memory_mib} MiB" if k.memory_mib else "") if x)
    return (f"# kernel {k.image}" + (f" ({k.release})" if k.release else "")
            + f", QEMU {k.mode or 'tcg'}" + (f", {figures}" if figures else ""))


def _job_files(report: RegressionReport) -> tuple[list[str], list[str]]:
    """The job files' steps and each side's file. Each side names its own kernel (--kernel), so a
    job file holds the guest's vm block, and the boot options its side's kernel was booted with
    (`kernel: {image, cmdline}`: --kernel replaces the image and keeps them); sides booted with
    other options each get a file of their own."""
    job = report.job
    if not report.kernels:
        if report.kernel_image:
            # The kernel is each side's build's (--kernel below), not the file the job booted here.
            job = {k: v for k, v in job.items() if k != "kernel"}
        return ["cat > job.yaml <<'EOF'", *to_yaml(job).rstrip("\n").splitlines(), "EOF"], ["job.yaml"] * 2
    bare = {k: v for k, v in job.items() if k != "kernel"}

    def with_options(kernel) -> dict:
        if not kernel.boot_options:
            return bare
        return {**bare, "kernel": {"image": kernel.image, "cmdline": kernel.boot_options}}

    options = [k.boot_options for k in report.kernels]
    sides = [("job.yaml", report.kernels[1])] if len(set(options)) == 1 else \
        [("job-base.yaml", report.kernels[0]), ("job-head.yaml", report.kernels[1])]
    steps = []
    for name, kernel in sides:
        steps += [f"cat > {name} <<'EOF'", *to_yaml(with_options(kernel)).rstrip("\n").splitlines(), "EOF"]
    return steps, [name for name, _ in sides] * (3 - len(sides))


def _run_side(report: RegressionReport, which: int, repo: str, job_file: str = "job.yaml") -> list[str]:
    commit, tag = _side(report, which)
    name = ("base", "head")[which]
    kernel = report.kernels[which] if report.kernels else None
    if commit:
        out = [f"# the {name}, " + (f'{commit.short} ("{shown(commit.subject, 80)}")' if commit.subject
                                     else commit.short)]
    else:
        out = [f"# the {name}" + ("" if kernel else ": no commit recorded")]
    if kernel:
        out.append(_kernel_comment(kernel))
        if kernel.cmdline:
            out.append(f"# guest command line: {kernel.cmdline}")
        if kernel.build:
            out.append("# the kernel was built by perflab from the job's recipe; by hand:")
            out += [f"#   {shown(line, 300)}" for line in kernel.build.splitlines()]
    if commit:
        out.append(f"git -C {repo} checkout {commit.sha}")
    if report.build and commit:
        out.append(f"(cd {repo} && {shown(report.build, 300)})")
    run = f"perflab run {job_file}"
    if report.kernel_image and commit:
        run += f" --kernel {_tree_kernel(report.kernel_image)}"     # built above into $KBUILD_OUTPUT
    elif kernel:
        run += f" --kernel {shlex.quote(kernel.image)}"
    if commit:
        # In the checkout, as the robot ran it: a job's relative paths (./prog) are the commit's files.
        run = f'(cd {repo} && perflab run "$OLDPWD/{job_file}"' + run.removeprefix(f"perflab run {job_file}") + " --repo ."
        out.append(f"{run} --tag {tag})")
    else:
        out.append(f"{run} --tag {tag}")
    return out


def _reproduce(report: RegressionReport) -> list[str]:
    """Steps that measure both sides on the reader's machine, then compare them; with the base runs
    exported beside the mail, the steps that use those instead of rebuilding the base."""
    if not report.job:
        return ["To reproduce:", "", STEP + "(the head runs were imported: no atomic job is stored to rerun)"]
    repo = shlex.quote(report.repo) if report.repo else "SUT"
    steps, files = _job_files(report)
    if not report.repo and report.remote:
        steps.insert(0, f"git clone {shlex.quote(report.remote)} SUT")
    kbuild = [_kbuild_output("$PWD/kbuild")] if report.kernel_image and report.base else []
    steps += kbuild
    steps += _run_side(report, 0, repo, files[0]) + _run_side(report, 1, repo, files[1])
    base_tag, head_tag = _side(report, 0)[1], _side(report, 1)[1]
    steps.append(f"perflab compare {base_tag} {head_tag}")
    out = ["To reproduce:", "", *(STEP + printable(s, None) for s in steps)]   # tags and paths come from the store
    if report.base_export:
        base = report.base
        operand = f"box={report.base_box},commit={base.short}" if base and report.base_box else shlex.quote(
            report.comparison.labels[0])
        out += ["", f"The base runs measured here are in {shown(report.base_export)} beside this mail; to compare",
                "your head with them rather than run the base yourself (two machines' figures differ,",
                "so only a comparison on one machine is reliable):", "",
                STEP + f"perflab import {shlex.quote(report.base_export)}", *(STEP + s for s in kbuild),
                *(STEP + s for s in _run_side(report, 1, repo, files[1])[1:]),
                STEP + f"perflab compare --cross-box {operand} {head_tag}"]
    return out

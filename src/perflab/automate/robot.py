"""The regression robot's loop: test new commits, notice a level change, bisect it, report the culprit once.

One pass (`perflab robot --once`):

1. the branch's first-parent history is read from the repository; the commits
   the robot already tested are those of its runs (tag `robot-NAME`) in the
   store — its state lives there, so it survives restarts;
2. untested work is measured: the first pass tests `--start` (default: the
   tip's parent) and the tip; later passes test each new tip. Every commit is
   built and measured through a Measurer (perflab.automate.measurer): here, in
   a detached `git worktree` (the user's checkout is never touched), through
   the one runner, its runs stored with the commit;
3. regressions are looked for twice over the series of tested commits: the
   change points of `perflab detect` (perflab.analysis.series / stats.changepoints) and,
   for the newest commit, a comparison of its samples with the previous tested
   commit's (perflab.analysis.comparison: Welch with FDR) — a level change at the end of
   a series is one point long, which a change-point method rightly refuses to
   call on its own;
4. each regression is bisected (perflab.automate.bisect) between the last good and the
   first bad tested commits — unless they are adjacent, when the bad one is the
   culprit — and one report (perflab.analysis.regression) is written per culprit and
   metric; the store's robot_report table remembers it, so no culprit is ever
   reported twice.

With `--kernel IMAGE` the repository is a kernel tree: each commit's kernel is built here
(measurer.KernelBuilds) and the jobs run in a guest booted from it, or, for jobs on a
kexec-capable SSH machine (`--on BOX`), on that machine kexec'ed into it and back — the
Measurer bisect uses for `--kernel --on` (docs/bisect.md, "A kernel on a test box").

With `--box NAME` the commits are measured on that lab box instead of here: the
jobs are queued with their source (repository URL, commit, build command), the
box's worker builds and runs them, and the runs are read back from the shared
store (measurer.BoxMeasurer); the bisections run their steps there too.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from perflab.automate import bisect
from perflab.automate.measurer import (
    Here,
    KernelDirs,
    KernelSpec,
    Measurer,
    MeasurerSpec,
    OnBox,
    ScratchTree,
    kernel_spec,
    measurer_for,
)
from perflab.analysis import series
from perflab.core import output
from perflab.core.errors import PerflabError
from perflab.core.text import printable
from perflab.core.git import BuildFailed, GitError, repo_root, resolve
from perflab.jobs.job import AtomicJob
from perflab.stats.compare import PRIMARY, REGRESSION


@dataclass
class Finding:
    benchmark: str
    metric: str
    good: str
    bad: str
    change: float
    how: str                       # "change point" or "newest commit"


@dataclass
class Pass:
    tested: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    reports: list[tuple[str, str]] = field(default_factory=list)     # (culprit, path or "sent ...")
    skipped: list[str] = field(default_factory=list)                  # said, not reported
    untested: list[str] = field(default_factory=list)                 # due, but the build failed


# `robot --once` exits with this when commits were due but none could be built (docs/robot.md).
EXIT_UNTESTED = 3


def _tested(store, tag: str) -> set[str]:
    return {r.commit for r in store.find_runs(tag=tag) if r.commit and r.status in ("finished", "partial")}


def _measure(measurer: Measurer, sha: str, jobs: list[AtomicJob], tag: str, say) -> bool:
    """Build and run the jobs at `sha` (in a worktree here, or on the lab box); False when the build failed."""
    atomic = [j.with_(tag=tag, comment=f"perflab robot: {sha[:12]}") for j in jobs]
    where = measurer.place
    try:
        measured = measurer.measure(sha, atomic)
    except BuildFailed as e:
        say(f"{sha[:12]}: build failed{where}, not measured: {e.why}")
        return False
    failed = [m for m in measured if m.status != "done"]
    if failed:
        say(f"{sha[:12]}: {len(failed)} job(s) failed{where}: {failed[0].error}")
    say(f"{sha[:12]}: measured{where} ({measurer.summary(measured)})")
    return True


KERNEL_PREFIX = "perflab-robot-kernel-"


def make_measurer(store, root: Path, build_cmd: str, box: str | None, lab: dict | None, say,
                  kernel: KernelSpec | None = None, build_timeout: float | None = None) -> Measurer:
    """The robot's Measurer: a fresh worktree per commit here, or the lab box's queue.

    With `kernel` (a kernel tree): the commits' kernels are built out of tree in one build
    directory kept for the pass, and the jobs run in a guest booted from them."""
    if lab:
        where = OnBox(lab["broker"], box, lab["source_url"])
    else:
        where = Here(lambda build, timeout: ScratchTree(root, build, timeout), box=box,
                     kernel_dirs=_kernel_dirs(root) if kernel else None)
    return measurer_for(store, MeasurerSpec(where, build_cmd, build_timeout, kernel), say)


def _kernel_dirs(root: Path) -> KernelDirs:
    """A directory for the pass's kernel builds, with an owner file (a killed pass's is removed first)."""
    from perflab.automate.bisect.trees import OWNER_FILE, _alive
    from perflab.core.git import Worktrees, prune_stale
    from perflab.store.db import process_start_time

    for path in prune_stale(root, KERNEL_PREFIX, OWNER_FILE, _alive):     # a killed pass's
        shutil.rmtree(Path(path).parent, ignore_errors=True)
    base = Worktrees(root, KERNEL_PREFIX, OWNER_FILE, {"pid": os.getpid(), "start": process_start_time(os.getpid()),
                                                       "repo": str(root)}).base
    return KernelDirs(root, base / "src", base / "build", base / "images", base=base)


def _wanted(metric: str, metrics: tuple[str, ...]) -> bool:
    import fnmatch

    from perflab.monitors import monitor_of

    if metrics:
        return any(fnmatch.fnmatchcase(metric, m) for m in metrics)
    return monitor_of(metric) is None


def check_metrics(jobs: list[AtomicJob], metrics: tuple[str, ...]) -> None:
    """Refuse a --metric glob that matches none of the jobs' metrics (before any work, as bisect does).

    A glob that names one of the jobs' monitors (`vmstat.*`) is kept: those metrics exist only once measured."""
    import fnmatch

    from perflab import jobs as jobfiles

    names: set[str] = set()
    monitors: set[str] = set()
    for job in jobs:
        job = jobfiles.resolve(job)
        names |= set(job.family.metrics(job.parsed))
        monitors |= set(job.monitors or {})
    for glob in metrics:
        if any(fnmatch.fnmatchcase(n, glob) for n in names) or any(glob.startswith(m) for m in monitors):
            continue
        shown = ", ".join(sorted(names)[:12]) + (" ..." if len(names) > 12 else "")
        raise PerflabError(f"--metric {printable(glob, 80)}: matches none of the jobs' metrics; they produce: {shown}")


def find_regressions(store, *, repo: str, branch: str | None, tag: str, metrics: tuple[str, ...],
                     order: list[str]) -> list[Finding]:
    """Regressions among the tested commits: change points of the series, and the newest commit's comparison."""
    from perflab.analysis.comparison import compare

    findings: list[Finding] = []
    history = series.build(store, tag=tag, repo=repo, branch=branch, metrics=metrics)
    for result in series.analyse(history):
        s = result.series
        if not _wanted(s.metric, metrics):
            continue
        for cp, kind in zip(result.detection.change_points, result.kinds):
            if kind != series.REGRESSION:
                continue
            before, after = s.points[cp.index - 1].commit, s.points[cp.index].commit
            if before and after:
                findings.append(Finding(s.benchmark, s.metric, before, after, cp.change, "change point"))
    tested = [c for c in order if c in _tested(store, tag)]
    if len(tested) >= 2:
        good, bad = tested[-2], tested[-1]
        result = compare(store, [f"tag={tag},commit={good}", f"tag={tag},commit={bad}"], monitors="none")
        for row in result.verdicts(0, REGRESSION):
            if row.fdr_group == PRIMARY and _wanted(row.metric, metrics) and not any(
                    f.metric == row.metric and f.bad == bad for f in findings):
                findings.append(Finding(row.benchmark, row.metric, good, bad, row.heads[0].pct_change,
                                        "newest commit"))
    return findings


def run_once(store, *, repo: str, branch: str | None, jobs: list[AtomicJob], build_cmd: str = "", name: str = "default",
             start: str | None = None, metrics: tuple[str, ...] = (), box: str | None = None,
             out_dir: str | None = None, to: tuple[str, ...] = (), subject_tag: str = "perflab",
             broker: str | None = None, source_url: str | None = None,
             say: Callable[[str], None] = lambda m: None, measurer: Measurer | None = None,
             kernel: str | None = None, vm_mode: str | None = None, build_timeout: float | None = None,
             revert: bool = True) -> Pass:
    """One pass. `measurer`: how commits are measured (default: here, or on the lab box with --box/--broker).

    `kernel`: the repository is a kernel tree whose build makes this image (relative to the build
    output directory); the jobs run in a guest booted from each commit's kernel, in mode `vm_mode`."""
    from perflab.automate import far_tree

    spec = _kernel(kernel, vm_mode, jobs)
    given = measurer
    # Made here, to be closed here: a kernel pass's builds; the copies of the commits' trees on the
    # SSH machine the jobs run on (--on).
    if measurer is None and (spec is not None or any(far_tree.machine_of_job(j) for j in jobs)):
        root = repo_root(repo)
        broker_lab = {"broker": broker, "source_url": source_url or str(root)} if broker else None
        measurer = make_measurer(store, root, build_cmd, box, broker_lab, say, spec, build_timeout)
    try:
        return _pass(store, repo=repo, branch=branch, jobs=jobs, build_cmd=build_cmd, name=name, start=start,
                     metrics=metrics, box=box, out_dir=out_dir, to=to, subject_tag=subject_tag, broker=broker,
                     source_url=source_url, say=say, measurer=measurer, given=given, spec=spec,
                     build_timeout=build_timeout, revert=revert)
    finally:
        if given is None and hasattr(measurer, "close"):
            measurer.close()


def _kernel(kernel: str | None, vm_mode: str | None, jobs: list[AtomicJob]) -> KernelSpec | None:
    """--kernel/--vm checked against every job before anything is built: the jobs booted in a guest
    (the keys laid over each job's vm), or all on one kexec-capable SSH machine (`--on`, a job file's
    `on:`), each commit's kernel kexec'ed there as bisect does (docs/bisect.md, "A kernel on a test box")."""
    if kernel is None:
        if vm_mode:
            raise PerflabError(f"--vm {vm_mode}: give the kernel the build makes with --kernel IMAGE "
                               "(e.g. arch/x86/boot/bzImage)")
        return None
    specs = [kernel_spec(kernel, vm_mode, job, f"--kernel (job {job.benchmark})") for job in jobs]
    machines = {s.on for s in specs}
    if len(machines) > 1:
        # One pass boots each commit's kernel in one place: its runs compare commit with commit.
        shown = ", ".join(sorted(m or "a guest" for m in machines))
        raise PerflabError(f"--kernel {kernel}: the jobs run in different places ({shown}); each commit's kernel "
                           "is booted in one: give the jobs one `on:` (or --on) or none")
    if specs[0].on:
        return specs[0]
    return KernelSpec(kernel, {"mode": vm_mode} if vm_mode else {})


def _pass(store, *, repo, branch, jobs, build_cmd, name, start, metrics, box, out_dir, to, subject_tag, broker,
          source_url, say, measurer, given, spec, build_timeout=None, revert=True) -> Pass:
    from perflab.analysis import regression
    from perflab.report.regression import render

    if not re.fullmatch(r"[\w.-]{1,60}", name):
        raise PerflabError(f"--name {name!r}: letters, digits, '.', '_' and '-' only (at most 60)")
    check_metrics(jobs, metrics)
    root = repo_root(repo)
    rev, commits = series.first_parent(str(root), branch)
    if not commits:
        raise PerflabError(f"--repo {repo}: the branch has no commits")
    order = [c.sha for c in commits]
    lab = None
    if broker:
        bisect.check_lab(broker, box, root, source_url, (order[-1],))
        lab = {"broker": broker, "source_url": source_url or str(root)}
    tag = f"robot-{name}"
    measurer = measurer or make_measurer(store, root, build_cmd, box, lab, say, build_timeout=build_timeout)
    done = Pass()
    tested = _tested(store, tag)
    todo = []
    if not tested:
        first = resolve(root, start, "--start") if start else (order[-2] if len(order) > 1 else None)
        if first and first not in order:
            raise PerflabError(f"--start {start}: not on the first-parent history of {rev}")
        if first:
            todo.append(first)
    if order[-1] not in tested:
        todo.append(order[-1])
    for sha in todo:
        if _measure(measurer, sha, jobs, tag, say):
            done.tested.append(sha)
        else:
            done.untested.append(sha)
    done.findings = find_regressions(store, repo=str(root), branch=branch, tag=tag, metrics=metrics, order=order)
    reported = {(r.culprit, r.metric) for r in store.robot_reports(name)}
    ranges = [(r.good, r.bad, r.metric) for r in store.robot_reports(name)]
    for f in done.findings:
        if any(m == f.metric and order.index(g) <= order.index(f.good) and order.index(f.bad) <= order.index(b)
               for g, b, m in ranges if g in order and b in order):
            continue   # a regression already bisected and reported
        culprit, base_op, head_op, also, kind, exact = _culprit(store, root, f, order, jobs, build_cmd, tag, box, say,
                                                                lab, measurer, given, spec, build_timeout)
        if culprit is None:
            done.skipped.append(f"{f.metric} {f.good[:12]}..{f.bad[:12]}")
            continue
        if (culprit, f.metric) in reported:
            continue
        report = regression.build(store, base_op, head_op, tag=subject_tag, metrics=[f.metric], repo=str(root),
                                  build_command=build_cmd or None)
        report.change_kind = kind
        if spec is not None:
            report.kernel_image = spec.image    # each side's kernel is its build's: the reproducer builds it
        if revert and culprit != order[-1]:
            report.revert_check = _revert_on_tip(store, root, f, culprit, order[-1], jobs, measurer, exact,
                                                 head_op.split(",", 1)[0].removeprefix("tag="), say)
        text = render(report)
        if also:
            # One line, at the end: the bisection named the first commit it could measure.
            text = text.rstrip("\n") + "\n\n" + also + "\n"
        where = None
        if out_dir:
            Path(out_dir).mkdir(parents=True, exist_ok=True)
            safe = re.sub(r"[^\w.-]+", "_", f.metric)
            path = Path(out_dir) / f"{culprit[:12]}-{safe}.txt"
            output.write(str(path), text, "--out")
            where = str(path)
        sent = None
        if to:
            from perflab.core import config

            mail = config.load().get("mail", {})
            msg = regression.message(report, text.split("\n", 2)[2], list(to), mail.get("from", "perflab <perflab@localhost>"))
            sent = regression.send(msg, mail)
        store.add_robot_report(robot=name, culprit=culprit, metric=f.metric, good=f.good, bad=f.bad,
                               subject=report.subject, text=text, sent_to=", ".join(to) or None)
        reported.add((culprit, f.metric))
        done.reports.append((culprit, sent or where or report.subject))
        say(f"reported {culprit[:12]}: {report.subject}" + (f" ({sent or where})" if sent or where else ""))
    return done


def _culprit(store, root: Path, f: Finding, order: list[str], jobs, build_cmd, tag, box, say, lab, measurer,
             given: Measurer | None = None, spec: KernelSpec | None = None, build_timeout: float | None = None):
    """(culprit sha, base operand, head operand, a line on untested commits that could also be the culprit,
    the kind of its change, whether the metric was exact) of a finding: bisected unless good and bad are adjacent; a timed change's
    kind labelled by counting the culprit and its parent (bisect's Settings.kind)."""
    gi, bi = order.index(f.good), order.index(f.bad)
    if bi == gi + 1:
        return f.bad, f"tag={tag},commit={f.good}", f"tag={tag},commit={f.bad}", "", "", f.metric.startswith("valgrind.")
    job = next((j for j in jobs if j.benchmark == f.benchmark), None)
    if job is None:
        say(f"{f.metric}: no job of {f.benchmark} to bisect with")
        return None, None, None, "", "", False
    say(f"bisecting {f.metric} {f.how}: {f.good[:12]}..{f.bad[:12]} ({f.change * 100:+.1f}%)")
    try:
        result = bisect.start(store, repo=str(root), good=f.good, bad=f.bad, build_cmd=build_cmd,
                              build_timeout=build_timeout,
                              job=job.with_(runs=1), metric=f.metric, tag=None, box=box, say=say,
                              settings=bisect.Settings(kind=True),
                              broker=lab["broker"] if lab else None, source_url=lab["source_url"] if lab else None,
                              measurer=given, kernel=spec.image if spec else None,
                              vm_mode=spec.vm.get("mode") if spec else None)
    except (bisect.BisectError, GitError, bisect.EndsDoNotDiffer) as e:
        say(f"not bisected: {e}")
        return None, None, None, "", "", False
    if result.culprit is None:
        if result.unconfirmed is not None:
            c = result.confirmation
            say(f"bisection {result.record.id} ended without a culprit: git bisect named "
                f"{result.unconfirmed.sha[:12]}, which its confirmation did not hold up "
                f"({c.verdict if c else 'not confirmed'})")
        else:
            say(f"bisection {result.record.id} ended without a single culprit "
                f"({len(result.candidates)} candidates left by skipped commits)")
        return None, None, None, "", "", False
    sha = result.culprit.sha
    btag = result.record.tag
    # The sequential test may call the culprit after 2 runs, against many of the good end; the
    # report's comparison (Welch, FDR over the metrics) is judged on as many runs of each.
    evidence = result.evidence
    more = evidence.n_good - len(evidence.culprit_values) if evidence is not None else 0
    if more > 0:
        say(f"{sha[:12]}: {more} more run(s) of the culprit for the report, as many as of the good end")
        _measure(measurer, sha, [job.with_(runs=more)], btag, say)
    also = ""
    if result.ambiguous_with:
        also = (f"The bisection could not test {', '.join(c.sha[:12] for c in result.ambiguous_with)} "
                f"(it did not build or run): the first bad commit could also be "
                f"{'that one' if len(result.ambiguous_with) == 1 else 'one of those'}.")
        say(f"{sha[:12]}: {also}")
    return (sha, f"tag={btag},commit={result.record.good}", f"tag={btag},commit={sha}", also, result.change_kind,
            result.exact is not None)


def _revert_on_tip(store, root: Path, f: Finding, culprit: str, tip: str, jobs, measurer: Measurer, exact: bool,
                   tag: str, say) -> str:
    """The culprit reverted on the branch's tip and measured beside the last good commit and the tip
    (automate.revert.revert_check: a commit made without a checkout); one line."""
    from perflab.automate.bisect.record import check_metric
    from perflab.automate.revert import revert_check
    from perflab.core.git import commit_info

    job = next((j for j in jobs if j.benchmark == f.benchmark), None)
    if job is None:
        return ""
    subject = commit_info(root, culprit)["subject"]
    direction, _unit = check_metric(job, f.metric)
    return revert_check(root, tip, f.good, culprit, subject, f"{culprit[:12]} (\"{subject}\")", measurer, job,
                        f.metric, direction, exact_metric=exact, tag=tag, seed=culprit, say=say,
                        words=dict(on="tip", base_name="last good", later="later commits")).sentence

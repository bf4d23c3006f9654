"""The regression robot's commands: `report regression`, `check`, `robot`."""

from __future__ import annotations

import math

import click

from perflab.cli.common import (FiniteFloat, db_option, lab_box_options, get_store, placed_for_commits, refuse_targets,
                                target_options)
from perflab.cli.report import report_group
from perflab.core.text import printable
from perflab.report.registry import layout_names


@report_group.command("regression")
@click.option("--base", required=True, help="The good side: commit prefix, tag, run id or key=value (as compare).")
@click.option("--head", required=True, help="The bad side.")
@click.option("--benchmark", "-b", help="Only this benchmark family or run name.")
@click.option("--metric", "metrics", multiple=True, help="Only metrics whose name contains this (repeatable).")
@click.option("--repo", type=click.Path(), help="Repository of the commits (default: the one recorded with the runs).")
@click.option("--build", "build_command", metavar="CMD", help="Build command, shown in the reproduce steps.")
@click.option("--subject-tag", default="perflab", show_default=True, help="The bracketed tag of the subject.")
@click.option("--secondary", is_flag=True,
              help="Keep the secondary metrics (time.user_time, ...) in the mail's table; default: left out.")
@click.option("--export-base", "export_base", type=click.Path(dir_okay=False), metavar="FILE",
              help="Export the base runs to FILE (perflab export's JSON) and tell the reader how to compare with "
                   "them; with --to the file is attached.")
@click.option("--to", "to", multiple=True, metavar="ADDR",
              help="Mail it (repeatable): through the SMTP server of the configuration, else the local sendmail.")
@db_option
def report_regression(base, head, benchmark, metrics, repo, build_command, subject_tag, secondary, export_base, to,
                      db) -> None:
    """The 0-day robot's mail for HEAD against BASE, in plain text: a regression, else an improvement.

    Subject `[TAG] SHORTSHA: metric -x.x% regression` (or `+x.x% improvement`
    when nothing regressed), the commit with its author and subject, the
    testcase, test machine and parameters, the Reported-by:/Closes: tags a fix
    should carry (config.toml's [mail] reported_by and closes), steps that
    measure both sides, and the lkp comparison table with the monitors that
    changed. No significant change either way is an error.

    \b
    Examples:
      perflab report regression --base f0c6bcba74 --head 68a9f5e700
      perflab report regression --base v6.7 --head v6.8 --export-base v6.7.json --to author@example.org
    """
    from perflab.core import config
    from perflab.analysis import regression
    from perflab.report.regression import render

    if to:
        regression.check_recipients(to)     # before the report is built (and an --export-base written)
    store = get_store(db, reading=True)
    mail = config.load().get("mail", {})
    report = regression.build(store, base, head, tag=subject_tag, benchmark=benchmark,
                              metrics=list(metrics) or None, repo=repo, build_command=build_command,
                              secondary=secondary, mail=mail)
    attachments = []
    if export_base:
        attachments.append(_export_base(store, report, export_base))
    text = render(report)
    if not to:
        click.echo(text, nl=False)
        return
    sender = mail.get("from", regression.DEFAULT_SENDER)
    msg = regression.message(report, text.split("\n", 2)[2], list(to), sender, attachments)
    click.echo(regression.send(msg, mail))


def _export_base(store, report, path: str) -> tuple[str, bytes]:
    """Write the base runs to `path` (whole or not at all) and name it in the report: (file name, bytes)."""
    import os
    import tempfile

    from perflab.core.errors import PerflabError
    from perflab.exchange import transfer

    data = transfer.to_json(transfer.collect(store, report.comparison.selections[0].runs)).encode()
    directory = os.path.dirname(os.path.abspath(path))
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".perflab-export-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as e:
        if tmp and os.path.exists(tmp):
            os.unlink(tmp)
        raise PerflabError(f"--export-base {path}: cannot write: {e.strerror or e}") from None
    report.base_export = os.path.basename(path)
    return report.base_export, data


@click.command("check")
@click.option("--baseline", required=True, metavar="REF",
              help="Stored runs to compare with: commit prefix, tag, run id or key=value (as compare).")
@click.option("--job", "job", type=click.Path(), help="Run this job file now as the head.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a key of the job file.")
@click.option("--run", "run", metavar="REF", help="Use stored runs as the head instead of running a job.")
@click.option("--repo", type=click.Path(), help="Git checkout of the system under test: its commit is recorded.")
@click.option("--box", help="Testbox name (default: hostname).")
@click.option("--metric", "metrics", multiple=True, help="Only metrics whose name contains this (repeatable).")
@click.option("--threshold", type=FiniteFloat(minimum=0), default=None, metavar="PCT",
              help="Minimum effect in percent (default 1; 0.1 for exact metrics, as compare).")
@click.option("--alpha", type=FiniteFloat(minimum=0, open_min=True), default=0.05, show_default=True,
              help="False-discovery rate over the metrics.")
@click.option("--runs", "runs", type=click.IntRange(1, 10_000), metavar="N",
              help="Runs of the head job (default: chosen from the job's stored noise, `perflab noise`, else the job's).")
@click.option("--style", "-s", type=click.Choice(layout_names(gate=True)), default="lkp", show_default=True)
@db_option
def check_cmd(baseline, job, overrides, run, repo, box, metrics, threshold, alpha, runs, style, db) -> None:
    """A CI gate: run (or load) the head, compare it with the baseline, exit 1 on a significant regression.

    Monitors never fail the gate. Beside the verdict it says the smallest change
    the samples at hand could detect with 90% power, and says so when they could
    not have seen a 5% change.

    \b
    Examples:
      perflab check --baseline v6.8 --job will-it-scale-seed.yaml --repo ~/linux
      perflab check --baseline main-nightly --run 1234
    """
    import uuid

    from perflab.analysis.comparison import compare
    from perflab.analysis.gate import POWER_WORRY, gate
    from perflab.cli.compare import show

    if bool(job) == bool(run):
        raise click.UsageError("give the head as either --job JOB.yaml (run it now) or --run REF (stored runs)")
    from perflab.cli.compare import EXACT_MIN_EFFECT_PCT, THRESHOLD_PCT

    store = get_store(db, recording=True)   # reads, and with --job records as `perflab run` does
    if job:
        from perflab.analysis.selection import select
        from perflab.cli.run import job_line
        from perflab.runner import service

        head = f"check-{uuid.uuid4().hex[:8]}"
        request = service.RunRequest(job, job_file=job, overrides=tuple(overrides), box=box, repo=repo,
                                     options=service.JobOptions(tag=head))
        atomic = service.build_jobs(request)
        service.refuse_what_cannot_run(atomic, request)
        # The baseline must exist before anything is measured.
        select(store, baseline)
        atomic = _planned(store, atomic, job, overrides, runs, metrics, threshold, box)
        outcomes = service.run_built(store, atomic, request)
        for o in outcomes:
            if o.recorder is not None:
                click.echo(job_line(o))
        service.raise_first_failure(outcomes)
    else:
        head = run
    result = compare(store, [baseline, head], alpha=alpha,
                     threshold=(THRESHOLD_PCT if threshold is None else threshold) / 100,
                     exact_threshold=(EXACT_MIN_EFFECT_PCT if threshold is None else threshold) / 100,
                     metrics=list(metrics) or None, monitors="changed")
    click.echo(show(result, style), nl=False)
    verdict = gate(result, alpha)
    if verdict.regressions:
        worst = verdict.worst
        click.echo(f"check: REGRESSION in {len(verdict.regressions)} metric(s); worst {printable(worst.metric)} "
                   f"{worst.heads[0].pct_change * 100:+.1f}% against {printable(baseline)}")
    else:
        click.echo(f"check: no significant regression in {verdict.checked} metric(s) against {printable(baseline)}")
    if verdict.blind:
        shown = ", ".join(f"{printable(b.metric)} ("
                          f"{'n too small' if not math.isfinite(b.detectable) else f'{b.detectable * 100:.1f}%'})"
                          for b in verdict.blind[:6])
        click.echo(f"check: these samples could not have seen a {POWER_WORRY * 100:g}% change (smallest detectable "
                   f"with 90% power): {shown}{' ...' if len(verdict.blind) > 6 else ''}")
    if verdict.regressions:
        raise click.exceptions.Exit(1)


def _planned(store, atomic, path, overrides, runs, metrics, threshold, box):
    """The head jobs with the runs the stored noise asks for (analysis.noise.plan_runs), said first;
    `--runs` or `--set runs=N` wins."""
    from perflab.cli.compare import THRESHOLD_PCT

    given = runs or next((int(o.split("=", 1)[1]) for o in overrides if o.split("=", 1)[0].strip() == "runs"
                          and o.split("=", 1)[1].strip().isdigit()), None)
    chosen = (lambda name: any(m in name for m in metrics)) if metrics else None
    change = (THRESHOLD_PCT if threshold is None else threshold) / 100
    return _with_planned_runs(store, [(path, j) for j in atomic], change, chosen, given, box, "check")


def _with_planned_runs(store, jobs, change, chosen, runs, box, who):
    """Each (path, job)'s job with the runs plan_runs gives for `change` (or `runs`), its lines said first."""
    from perflab.analysis.noise import plan_runs

    out = []
    for path, j in jobs:
        plan = plan_runs(store, j, change, metrics=chosen, runs=runs, box=box, who=who,
                         how=f"perflab noise {path}")
        for line in plan.lines:
            click.echo(f"{who}: {printable(line, 2000)}")
        out.append(j.with_(runs=runs or plan.runs) if runs or plan.runs else j)
    return out


@click.command("robot")
@click.option("--repo", required=True, type=click.Path(), help="The git repository to watch (never touched: worktrees).")
@click.option("--branch", help="The branch to follow (default: the checkout's HEAD).")
@click.option("--job", "job_files", multiple=True, required=True, type=click.Path(), metavar="JOB.yaml",
              help="Job file(s) run at every tested commit (repeatable).")
@click.option("--build", "build_cmd", default="", metavar="CMD", help="Build command run in each commit's worktree.")
@click.option("--build-timeout", type=FiniteFloat(0, open_min=True), metavar="S",
              help="Kill a build after S seconds (the commit is then untested, as a failed build).")
@click.option("--name", default="default", show_default=True,
              help="The robot's name: its runs are tagged robot-NAME, its reports kept under it.")
@click.option("--start", metavar="REV", help="First pass: test this commit as well as the tip (default: the tip's parent).")
@click.option("--metric", "metrics", multiple=True, metavar="GLOB",
              help="Metrics to watch (default: every metric of the jobs but the monitors').")
@lab_box_options("Measure and bisect")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), help="Write each report to DIR/SHA-METRIC.txt.")
@click.option("--to", "to", multiple=True, metavar="ADDR", help="Mail each report (see `report regression --to`).")
@click.option("--subject-tag", default="perflab", show_default=True)
@click.option("--no-revert", is_flag=True, help="Do not check a bisected culprit by reverting it on the branch tip.")
@click.option("--once", is_flag=True, help="One pass, then exit (for cron); default: poll every --interval.")
@click.option("--interval", type=FiniteFloat(1), default=300.0, show_default=True, metavar="S",
              help="Seconds between passes.")
@click.option("--runs", "runs", type=click.IntRange(1, 10_000), metavar="N",
              help="Runs per tested commit (default: chosen from the jobs' stored noise, `perflab noise`, else the jobs').")
@db_option
def robot_cmd(repo, branch, job_files, build_cmd, build_timeout, name, start, metrics, box, broker, source_url,
              out_dir, to, subject_tag, no_revert, once, interval, runs, db, kernel=None, vm_mode=None,
              **targets) -> None:
    """The regression robot: test new commits, find level changes, bisect them, report each culprit once.

    Its state (commits tested, culprits reported) lives in the store, so it
    survives restarts. See docs/robot.md. With --kernel the repository is a kernel tree:
    --build makes that image (KBUILD_OUTPUT, kept for the pass), and the jobs run in a
    guest booted from it (with --on BOX: on that test box, kexec'ed into it and back).

    \b
    Examples:
      perflab robot --repo ~/linux --branch master --job will-it-scale-seed.yaml --build 'make -j8' --once
      perflab robot --repo . --job bench.yaml --out reports/ --to dev@example.org
      perflab robot --repo ~/src/prog --job bench.yaml --build 'make -j8' --box skl-2s \\
          --source-url https://git.lab/prog.git --db postgresql://perflab@lab/perflab
      perflab robot --repo ~/linux --job getppid.yaml --build 'make -j2 bzImage' \\
          --kernel arch/x86/boot/bzImage --vm icount --once
      perflab robot --repo ~/linux --job getppid.yaml --build 'make -j8 bzImage' \\
          --kernel arch/x86/boot/bzImage --on testbox --once
    """
    import time

    from perflab import jobs as jobfiles
    from perflab.automate import robot

    refuse_targets(targets, "robot", supported=("on", "keep_kernel"))   # --on: each commit measured on an SSH machine
    if targets.get("on") and box:
        from perflab.core.errors import UsageProblem

        raise UsageProblem("--on with --box: a lab box's worker drives its own machine (perflab worker --machine); "
                           "give one of them")
    if source_url and not box:
        raise click.UsageError("--source-url is where a lab box fetches the commits: use it with --box")
    if out_dir:
        from perflab.core import output

        output.check_directory(out_dir, "--out")    # before any work: a report is never lost at the end
    if to:
        from perflab.analysis.regression import check_recipients

        check_recipients(to)       # before any work too: not after a pass has measured and bisected
    from perflab.core import steps

    store = get_store(db)
    # With --on each commit is built here and its tree copied to the machine, where the job runs (docs/lab.md);
    # with --kernel too, each commit's kernel is kexec'ed there and no tree is copied (docs/robot.md).
    jobs = [(path, placed_for_commits(j, dict(targets), "robot", programs=not kernel)) for path in job_files
            for j in jobfiles.load_atomic(path)]
    if box:
        from perflab.automate.lab.app import broker_url

        broker = broker_url(broker)
    jobs = _robot_runs(store, jobs, metrics, runs, box)
    while True:
        done = robot.run_once(store, repo=repo, branch=branch, jobs=jobs, build_cmd=build_cmd, name=name,
                              start=start, metrics=tuple(metrics), box=box, out_dir=out_dir, to=tuple(to),
                              subject_tag=subject_tag, broker=broker if box else None, source_url=source_url,
                              say=lambda m: steps.say(f"robot: {printable(m, 300)}", stdout=True), kernel=kernel,
                              vm_mode=vm_mode, build_timeout=build_timeout, revert=not no_revert)
        click.echo(f"robot: pass done: {len(done.tested)} commit(s) tested, {len(done.findings)} regression(s) "
                   f"seen, {len(done.reports)} new report(s)")
        if done.untested and not done.tested:
            # Nothing could be tested (every build failed): not a pass that found nothing (docs/robot.md).
            click.echo(f"robot: no commit could be tested ({len(done.untested)} due, every build failed)", err=True)
            if once:
                raise SystemExit(robot.EXIT_UNTESTED)
        if once:
            return
        time.sleep(interval)


def _robot_runs(store, jobs, metrics, runs, box):
    """Each job with the runs per commit its stored noise asks for to see the smallest level change the
    robot calls (1%, analysis.gate.ROBOT_CHANGE), said first; `--runs` wins."""
    import fnmatch

    from perflab.analysis.gate import ROBOT_CHANGE

    chosen = (lambda name: any(fnmatch.fnmatchcase(name, g) for g in metrics)) if metrics else None
    return _with_planned_runs(store, jobs, ROBOT_CHANGE, chosen, runs, box, "robot")


COMMANDS = [check_cmd, target_options(robot_cmd)]

"""`perflab bisect`: find the commit that changed a metric, with the real git bisect and a sequential test."""

from __future__ import annotations

import shlex

import click

from perflab.cli.common import FiniteFloat, db_option, get_store, lab_box_options, placed_for_commits, refuse_targets, target_options


def _say(message: str) -> None:
    """A line of the bisection's progress on stderr (text from git and job files made printable)."""
    from perflab.core import steps
    from perflab.core.text import printable

    steps.say(printable(message, None))     # on stderr, above a long step's ticking line


@click.command("bisect", context_settings={"ignore_unknown_options": False})
@click.option("--repo", metavar="PATH", help="The git repository to bisect (left untouched: work is done in worktrees).")
@click.option("--good", metavar="REV", help="A revision with the old level of the metric.")
@click.option("--bad", metavar="REV", help="A later revision with the new level (good must be its ancestor).")
@click.option("--build", "build_cmd", metavar="CMD", default="",
              help="Shell command that builds a commit, run in its worktree; a failure skips the commit.")
@click.option("--job", "job_file", type=click.Path(dir_okay=False), metavar="JOB.yaml",
              help="A job file of one atomic job to measure (else the command after --).")
@click.option("--metric", metavar="NAME", help="The metric to bisect, e.g. time.elapsed_time.")
@click.option("--tag", "-t", help="Tag of the bisection's runs (default bisect-ID).")
@lab_box_options("Measure")
@click.option("--build-timeout", type=FiniteFloat(0, open_min=True), metavar="S", help="Kill a build after S seconds.")
@click.option("--alpha", type=FiniteFloat(0, open_min=True), default=0.005, show_default=True,
              help="Per-step error rate of the sequential test (calling a good commit bad, or a bad one good).")
@click.option("--threshold", type=FiniteFloat(0), default=None,
              help="Smallest relative change between the ends worth bisecting (0.01 = 1%; default 1%, and for an "
                   "exact metric the exact rule's 0.1%, as compare's).")
@click.option("--pairing", type=click.Choice(("auto", "on", "off")), default="auto", show_default=True,
              help="Measure in pairs of runs taken one after the other (ends: good, bad; steps: commit, good) and "
                   "test their ratios, which cancels a machine whose speed moves for seconds at a time; auto: when "
                   "the ends' pairs show such moves.")
@click.option("--runs", "runs", type=click.IntRange(2, 1000), metavar="N",
              help="Look at the ends first after N runs each, then 2N ... up to 20 (default: the fewest of 5/10/20 at "
                   "which the job's stored noise, `perflab noise`, sees --threshold; else 5).")
@click.option("--kind", "kind", is_flag=True,
              help="Label a timed culprit's change by counting it and its parent (valgrind instructions on the host, "
                   "icount for a kernel): code path, timing only, or not reproduced.")
@click.option("--revert", "revert", is_flag=True,
              help="Check a culprit by reverting it on the bad end (no checkout: a commit object only) and measuring "
                   "it beside both ends: restores, undoes x% only, does not, or cannot be reverted.")
@click.option("--resume", is_flag=True, help="Go on with an interrupted bisection from its stored runs.")
@click.option("--id", "bisect_id", metavar="ID", help="With --resume: which bisection (default: the latest unfinished).")
@db_option
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def bisect_cmd(repo, good, bad, build_cmd, job_file, metric, tag, box, broker, source_url,
               build_timeout, alpha,
               threshold,
               pairing, runs, kind, revert, resume,
               bisect_id, db, command, kernel=None, vm_mode=None, **targets) -> None:
    """Find the first commit at which a metric changed, with git bisect and a sequential test.

    Measures the good and bad ends and refuses unless they really differ;
    then drives `git bisect` in a worktree of its own, builds each commit
    (--build; a commit that does not build is skipped) and measures it
    through the runner, adding runs only while it cannot yet tell whether the
    commit is like good or like bad. With --kernel the repository is a kernel
    tree: --build makes that image (KBUILD_OUTPUT set to a directory kept
    between steps), the job runs in a guest booted from it (with --on BOX: on
    that test box, kexec'ed into it and back), and a kernel that does not
    build or boot is skipped. Every run is stored with its commit and
    the bisection's tag (`perflab compare tag=bisect-ID,commit=SHA ...`).

    \b
    Examples:
      perflab bisect --repo ~/src/prog --good v1.0 --bad main --build make \\
          --metric time.elapsed_time -- ./prog --input big
      perflab bisect --repo . --good HEAD~40 --bad HEAD --build 'make -j2' \\
          --job bench.yaml --metric will-it-scale.per_process_ops
      perflab bisect --repo ~/src/prog --good v1.0 --bad main --build 'make -j8' \\
          --job bench.yaml --metric time.elapsed_time --box skl-2s \\
          --source-url https://git.lab/prog.git --db postgresql://perflab@lab/perflab
      perflab bisect --repo ~/src/prog --good v1.0 --bad main --build make \\
          --metric time.elapsed_time --on box1 -- ./prog --input big
      perflab bisect --repo ~/linux --good v6.1 --bad HEAD --build 'make -j2 bzImage' \\
          --kernel arch/x86/boot/bzImage --vm icount --job getppid.yaml \\
          --metric will-it-scale.per_process_ops
      perflab bisect --repo ~/linux --good v6.1 --bad HEAD --build 'make -j8 bzImage' \\
          --kernel arch/x86/boot/bzImage --on testbox --job getppid.yaml \\
          --metric will-it-scale.per_process_ops
      perflab bisect --resume
    """
    from perflab.automate import bisect
    from perflab.core.errors import UsageProblem

    refuse_targets(targets, "bisect", supported=("on", "keep_kernel"))   # --on: the steps on an SSH machine
    on = targets.get("on")

    if resume:
        if command or job_file or good or bad or build_cmd or metric or box or source_url or kernel or vm_mode \
                or runs or kind or revert or on or targets.get("keep_kernel"):
            raise UsageProblem("--resume takes the bisection's parameters from its record: give only "
                               "--resume [--id ID] [--repo PATH] [--db URL]")
        store = get_store(db)
        result = bisect.resume(store, bisect_id=bisect_id, repo=repo, say=_say)
    else:
        missing = [name for name, value in (("--repo", repo), ("--good", good), ("--bad", bad), ("--metric", metric))
                   if not value]
        if missing:
            raise click.UsageError(f"missing {', '.join(missing)}")
        if bisect_id:
            raise click.UsageError("--id names a bisection to resume: use it with --resume")
        if source_url and not box:
            raise click.UsageError("--source-url is where a lab box fetches the commits: use it with --box")
        if bool(job_file) == bool(command):
            raise click.UsageError("give the benchmark as --job JOB.yaml or as a command after --, one of them")
        job = bisect.file_job(job_file) if job_file else bisect.command_job(list(command))
        # Steps measured on an SSH machine: built here, the built tree copied there (docs/lab.md); with
        # --kernel, each commit's kernel kexec'ed there (docs/bisect.md, "A kernel on a test box").
        job = placed_for_commits(job, targets, "bisect", programs=not kernel)
        _refuse_on_machine(job, box, kind)
        if box and (kind or vm_mode):
            _refuse_on_a_machines_box(_broker(broker), box, kind, vm_mode)
        store = get_store(db)
        settings = bisect.Settings(alpha=alpha, threshold=threshold, pairing=pairing, kind=kind, revert=revert)
        result = bisect.start(store, repo=repo, good=good, bad=bad, build_cmd=build_cmd, job=job, metric=metric,
                              tag=tag, box=box, build_timeout=build_timeout, settings=settings,
                              broker=_broker(broker) if box else None, source_url=source_url, say=_say,
                              kernel=kernel, vm_mode=vm_mode, runs=runs,
                              noise_how=f"perflab noise {job_file}" if job_file else
                              "perflab noise -- " + shlex.join(command))
    _print(result)
    _where(store, result)


def _refuse_on_machine(job, box, kind) -> None:
    """What a bisection whose steps run on an SSH machine (`--on`, a job file's `on:`) cannot do: one line."""
    from perflab.automate import far_tree
    from perflab.core.errors import UsageProblem

    if far_tree.machine_of_job(job) is None:
        return
    if box:
        raise UsageProblem("--on with --box: a lab box's worker drives its own machine (perflab worker --machine); "
                           "give one of them")
    if kind:
        raise UsageProblem("--on with --kind: the kind of a change is counted on this machine (valgrind) or in a "
                           "guest (icount), not on an SSH machine; label it afterwards with `perflab bisect --kind` "
                           "here")


def _refuse_on_a_machines_box(broker: str, box: str, kind: bool, vm_mode: str | None) -> None:
    """--kind or --vm with --box: refused as with --on when a live worker of the box drives an SSH
    machine (`perflab worker --machine`, which says so in its heartbeat). With no worker alive now, the
    one that will serve the box is unknown: the bisection starts; its end says "not labelled" (--kind)
    or is the worker's refusal of a guest on its machine (--vm), before anything is fetched or built."""
    from perflab.automate.lab import app as lab
    from perflab.automate.lab.client import machine_of_box
    from perflab.core.errors import UsageProblem

    machine = machine_of_box(lab.redis_client(broker), lab.check_box(box))
    if not machine:
        return
    if kind:
        raise UsageProblem(f"--kind with --box {box}: its worker drives the SSH machine {machine}; the kind of a change "
                           "is counted by valgrind or in a guest (icount), not on an SSH machine: bisect without --kind")
    raise UsageProblem(f"--vm with --box {box}: its worker drives the SSH machine {machine}, where each commit's kernel "
                       "is kexec'ed; a guest on it is not built: bisect without --vm")


def _broker(broker: str | None) -> str:
    from perflab.automate.lab.app import broker_url

    return broker_url(broker)


def _print(result) -> None:
    from perflab.report.bisect import render

    click.echo(render(result), nl=False)


def _where(store, result) -> None:
    """Where the culprit's instructions changed against what it was judged against, when the runs
    counted them (`monitors: [insn-profile]` under icount; `measure: instructions`)."""
    if result.culprit is None or result.evidence is None:
        return
    from perflab.analysis.regression import where_view
    from perflab.report.profile import render_instructions

    parent = result.evidence.parent or result.good
    view = None
    # The bisection's own runs, else those that counted the culprit's change for its kind (--kind).
    for tag in (result.tag, f"{result.tag}-kind"):
        view = view or where_view(store, f"tag={tag},commit={parent[:12]}",
                                  f"tag={tag},commit={result.culprit.sha[:12]}", None)
    if view is not None:
        click.echo("where the first bad commit's instructions changed (against its parent):")
        click.echo(render_instructions(view, moved_only=True), nl=False)


COMMANDS = [target_options(bisect_cmd)]

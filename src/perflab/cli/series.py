"""`perflab series`: a posted patch series against its base; the patch that changed the metric named."""

from __future__ import annotations

import shlex
from pathlib import Path

import click

from perflab.cli.common import FiniteFloat, db_option, get_store, placed_for_commits, refuse_targets, target_options
from perflab.core.text import printable


@click.command("series")
@click.option("--repo", required=True, metavar="PATH", help="The git repository the series applies to (left untouched).")
@click.option("--mbox", required=True, metavar="FILE|DIR",
              help="The series: a mailbox of git format-patch mails (b4's output), or a directory of *.patch.")
@click.option("--base", metavar="REV", help="The base to apply on (default: the series' base-commit: trailer).")
@click.option("--job", "job_file", type=click.Path(dir_okay=False), metavar="JOB.yaml",
              help="The benchmark (else a command after --).")
@click.option("--metric", metavar="NAME", help="The metric to judge the series by (default: the job's one headline "
                                                "metric: its counted one with measure:, else its one primary metric).")
@click.option("--build", "build_cmd", metavar="CMD", default="", help="Builds a commit (run in its checkout).")
@click.option("--recipe", "recipe_file", type=click.Path(dir_okay=False), metavar="RECIPE.yaml",
              help="The repository is a kernel tree built with this recipe's config, fragments, cc, kcflags and "
                   "name (docs/vm.md), each commit in turn: instead of --build (the image: arch/x86/boot/bzImage).")
@click.option("--tag", "-t", help="Tag of the series' runs (default bisect-ID).")
@click.option("--build-timeout", type=FiniteFloat(0, open_min=True), metavar="S", help="Kill a build after S seconds.")
@click.option("--no-revert", is_flag=True, help="Do not check the culprit by reverting it on the head.")
@click.option("--no-kind", is_flag=True, help="Do not label a timed change by counting base and head "
                                              "(valgrind instructions; icount for a kernel).")
@click.option("--out", "out_file", type=click.Path(dir_okay=False), metavar="FILE",
              help="Write the series' report mail here (git send-email reads it).")
@click.option("--to", "to", multiple=True, metavar="ADDR", help="Mail the report to ADDR (repeatable; config.toml [mail]).")
@click.option("--subject-tag", default="perflab", show_default=True, help="The mail subject's [TAG].")
@db_option
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def series_cmd(repo, mbox, base, job_file, metric, build_cmd, recipe_file, tag, build_timeout, no_revert,
               no_kind, out_file, to, subject_tag, db, command, kernel=None, vm_mode=None, **targets) -> None:
    """Apply a patch series on its base in perflab's own clone, measure base and head, and on a
    change name the patch that made it, bisecting inside the series (one patch a step); then
    revert that patch on the head and measure it (restores, or interacts with later patches),
    and label a timed change by counting base and head (valgrind instructions; icount for a
    kernel): code path, timing only, or not reproduced. --out/--to: the robot's mail for it.
    With --kernel the repository is a kernel tree and --kernel the image the build makes.

    A kernel tree's images boot in a guest (--vm), or with --on BOX are kexec'ed on that test
    box, one commit at a time (docs/bisect.md, "A kernel on a test box").

    The base is the series' `base-commit:` trailer (`git format-patch --base`, b4) or --base. A
    patch that does not apply is one line naming it. The measuring, the stopping rules and the
    culprit's confirmation are perflab bisect's (docs/bisect.md, "A patch series").

    \b
    Example:
      git format-patch --base=auto --cover-letter -o series/ origin/main..topic
      perflab series --repo ~/src/proj --mbox series/ --build 'make' --metric time.elapsed_time \\
          --job bench.yaml --out report.txt
      perflab series --repo ~/linux --mbox v3.mbox --build 'make -j8 bzImage' \\
          --kernel arch/x86/boot/bzImage --vm kvm --job getppid.yaml --metric will-it-scale.per_process_ops
    """
    from perflab.automate import bisect, change_kind, series
    from perflab.core.errors import PerflabError

    refuse_targets(targets, "series", supported=("on", "keep_kernel"))   # --on: the steps on an SSH machine
    if bool(job_file) == bool(command):
        raise click.UsageError("give the benchmark as --job JOB.yaml or as a command after --, one of them")
    job = bisect.file_job(job_file) if job_file else bisect.command_job(list(command))
    # Each commit built here, its tree copied to the SSH machine and measured there (docs/lab.md); a
    # kernel tree's commits (--kernel/--recipe): each one's kernel kexec'ed there (docs/bisect.md).
    a_kernel = bool(kernel or recipe_file)
    job = placed_for_commits(job, targets, "series", programs=not a_kernel)
    from perflab.automate import far_tree

    if far_tree.machine_of_job(job) is not None and not no_kind:
        # valgrind and icount count here, not there: said, not refused (the default is on).
        no_kind = True
        far_note = ("kind of change: not labelled (the steps ran on an SSH machine; "
                    + ("icount counts in a guest only)" if a_kernel else "valgrind counts only here)"))
    else:
        far_note = ""
    typed_build = build_cmd
    if recipe_file:
        from perflab.execution.vm import recipe

        if build_cmd:
            raise click.UsageError("--recipe builds each commit: give it or --build, not both")
        series_recipe = recipe.series_recipe(recipe_file, repo)
        build_cmd = recipe.build_command(series_recipe)
        typed_build = recipe.build_command(series_recipe, typed=True)     # the mail's, as a reader types it
        kernel = kernel or "arch/x86/boot/bzImage"
    if out_file:
        from perflab.core import output

        output.check(out_file, "--out")     # before any work: the mail is never lost at the end
    if to:
        from perflab.analysis.regression import check_recipients
        from perflab.core import config

        check_recipients(to)                 # before any work, too: not after hours of measuring
        config.load()                        # and the [mail] section the sending reads
    from perflab.core import steps

    say = lambda line: steps.say(printable(line, None))     # noqa: E731 (progress on stderr, above a step's line)
    if far_note:
        say(far_note)
    if not metric:
        metric = series.headline_metric(job)
        say(f"metric: {metric} (the job's headline metric)")
    store = get_store(db)
    result = series.run(store, repo=repo, mbox=mbox, job=job, metric=metric, build=build_cmd, base=base,
                        tag=tag, kernel=kernel, vm_mode=vm_mode, revert=not no_revert, kind=not no_kind,
                        build_timeout=build_timeout, say=say)
    s = result.series
    click.echo(f"series: {len(s.patches)} patches" + (f" ({printable(s.cover, 200)})" if s.cover else "")
               + f", base {result.base[:12]}, head {result.head[:12]}")
    if result.bisection is None:
        click.echo(f"base and head do not differ in {metric}: {result.unchanged}")
        return
    from perflab.cli.bisect import _print, _where

    _print(result.bisection)
    _where(store, result.bisection)
    culprit = result.culprit
    if culprit is not None:
        click.echo(f"the patch: {printable(culprit.name, 300)} ({culprit.index} of {culprit.total})")
    if result.revert is not None:
        click.echo(f"revert check: {printable(result.revert.sentence, None)}")
    if result.kind is not None:
        click.echo(f"kind of change: {printable(change_kind.sentence_of(result.kind), None)}")
    if not (out_file or to):
        return
    if culprit is None:
        click.echo("no report: the series has no single culprit to name", err=True)
        raise SystemExit(1)
    words = ["perflab", "series", "--repo", str(Path(repo).resolve()), "--mbox", str(Path(mbox).resolve()),
             "--metric", metric]
    for flag, value in (("--base", base), ("--job", job_file and str(Path(job_file).resolve())),
                        ("--recipe", recipe_file and str(Path(recipe_file).resolve())),
                        ("--build", None if recipe_file else build_cmd), ("--kernel", kernel), ("--vm", vm_mode)):
        if value:
            words += [flag, str(value)]
    line = shlex.join(words) + (" -- " + shlex.join(command) if command else "")
    try:
        rep = series.report(store, result, subject_tag=subject_tag, user_repo=str(Path(repo).resolve()),
                            build=typed_build, command=line)
    except PerflabError as e:
        click.echo(f"no report: {e}", err=True)
        raise SystemExit(1)
    from perflab.analysis import regression
    from perflab.core import config, output
    from perflab.report.regression import render

    text = render(rep)
    if out_file:
        output.write(out_file, text, "--out")
        click.echo(f"report: {out_file} ({printable(rep.subject, 300)})")
    if to:
        mail = config.load().get("mail", {})
        msg = regression.message(rep, text.split("\n", 2)[2], list(to), mail.get("from", regression.DEFAULT_SENDER))
        click.echo(regression.send(msg, mail))


COMMANDS = [target_options(series_cmd)]

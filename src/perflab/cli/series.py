"""`perflab series`: a posted patch series against its base; the patch that changed the metric named."""

from __future__ import annotations

import click

from perflab.cli.common import db_option, get_store


@click.command("series")
@click.option("--repo", required=True, metavar="PATH", help="The git repository the series applies to (left untouched).")
@click.option("--mbox", required=True, metavar="FILE|DIR",
              help="The series: a mailbox of git format-patch mails (b4's output), or a directory of *.patch.")
@click.option("--base", metavar="REV", help="The base to apply on (default: the series' base-commit: trailer).")
@click.option("--job", "job_file", type=click.Path(dir_okay=False), metavar="JOB.yaml",
              help="The benchmark (else a command after --).")
@click.option("--metric", required=True, metavar="NAME", help="The metric to judge the series by.")
@click.option("--build", "build_cmd", metavar="CMD", default="", help="Builds a commit (run in its checkout).")
@click.option("--kernel", metavar="IMAGE", help="The repository is a kernel tree: the image the build makes "
                                                "(a path in the build output, e.g. arch/x86/boot/bzImage).")
@click.option("--vm", "vm_mode", type=click.Choice(("tcg", "icount", "kvm")), help="With --kernel: the guest's mode.")
@click.option("--tag", "-t", help="Tag of the series' runs (default bisect-ID).")
@db_option
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def series_cmd(repo, mbox, base, job_file, metric, build_cmd, kernel, vm_mode, tag, db, command) -> None:
    """Apply a patch series on its base in perflab's own clone, measure base and head, and on a
    change name the patch that made it, bisecting inside the series (one patch a step).

    The base is the series' `base-commit:` trailer (`git format-patch --base`, b4) or --base. A
    patch that does not apply is one line naming it. The measuring, the stopping rules and the
    culprit's confirmation are perflab bisect's (docs/bisect.md).

    \b
    Example:
      git format-patch --base=auto -o series/ origin/main..topic
      perflab series --repo ~/src/proj --mbox series/ --build 'make' --metric valgrind.instructions --job bench.yaml
    """
    from perflab.automate import bisect, series

    if bool(job_file) == bool(command):
        raise click.UsageError("give the benchmark as --job JOB.yaml or as a command after --, one of them")
    job = bisect.file_job(job_file) if job_file else bisect.command_job(list(command))
    say = lambda line: click.echo(line, err=True)     # noqa: E731 (progress on stderr)
    result = series.run(get_store(db), repo=repo, mbox=mbox, job=job, metric=metric, build=build_cmd, base=base,
                        tag=tag, kernel=kernel, vm_mode=vm_mode, say=say)
    s = result.series
    click.echo(f"series: {len(s.patches)} patches" + (f" ({s.cover})" if s.cover else "")
               + f", base {result.base[:12]}, head {result.head[:12]}")
    if result.bisection is None:
        click.echo(f"base and head do not differ in {metric}: {result.unchanged}")
        return
    from perflab.cli.bisect import _print, _where

    _print(result.bisection)
    _where(get_store(db), result.bisection)
    culprit = result.culprit
    if culprit is not None:
        click.echo(f"the patch: {culprit.name} ({culprit.index} of {culprit.total})")


COMMANDS = [series_cmd]

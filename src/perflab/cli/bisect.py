"""`perflab bisect`: find the commit that changed a metric, with the real git bisect and a sequential test."""

from __future__ import annotations

import math
import shlex

import click

from perflab.cli.common import FiniteFloat, db_option, lab_box_options, fmt_num, get_store


def _pct_size(x: float) -> str:
    from perflab.automate.bisect import _pct_size as size

    return size(x)


def _pct(x: float | None) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x * 100:+.2f}%"


def _say(message: str) -> None:
    click.echo(_text(message), err=True)


@click.command("bisect", context_settings={"ignore_unknown_options": False})
@click.option("--repo", metavar="PATH", help="The git repository to bisect (left untouched: work is done in worktrees).")
@click.option("--good", metavar="REV", help="A revision with the old level of the metric.")
@click.option("--bad", metavar="REV", help="A later revision with the new level (good must be its ancestor).")
@click.option("--build", "build_cmd", metavar="CMD", default="",
              help="Shell command that builds a commit, run in its worktree; a failure skips the commit.")
@click.option("--job", "job_file", type=click.Path(dir_okay=False), metavar="JOB.yaml",
              help="A job file of one atomic job to measure (else the command after --).")
@click.option("--metric", metavar="NAME", help="The metric to bisect, e.g. time.elapsed_time.")
@click.option("--kernel", "kernel", metavar="IMAGE",
              help="The repository is a kernel tree: --build makes this image, a path relative to the build's "
                   "output directory (e.g. arch/x86/boot/bzImage; the build runs with KBUILD_OUTPUT set to it, "
                   "kept between steps), and the job runs in a guest booted from it; a kernel that does not "
                   "build or boot is skipped.")
@click.option("--vm", "vm_mode", type=click.Choice(("tcg", "icount", "kvm")),
              help="With --kernel: the guest's mode (default: the job's vm.mode, else tcg).")
@click.option("--tag", "-t", help="Tag of the bisection's runs (default bisect-ID).")
@lab_box_options("Measure")
@click.option("--build-timeout", type=FiniteFloat(0, open_min=True), metavar="S", help="Kill a build after S seconds.")
@click.option("--alpha", type=FiniteFloat(0, open_min=True), default=0.005, show_default=True,
              help="Per-step error rate of the sequential test (calling a good commit bad, or a bad one good).")
@click.option("--threshold", type=FiniteFloat(0), default=0.01, show_default=True,
              help="Smallest relative change between the ends worth bisecting (0.01 = 1%).")
@click.option("--pairing", type=click.Choice(("auto", "on", "off")), default="auto", show_default=True,
              help="Measure in pairs of runs taken one after the other (ends: good, bad; steps: commit, good) and "
                   "test their ratios, which cancels a machine whose speed moves for seconds at a time; auto: when "
                   "the ends' pairs show such moves.")
@click.option("--runs", "runs", type=click.IntRange(2, 1000), metavar="N",
              help="Look at the ends first after N runs each, then 2N ... up to 20 (default: the fewest of 5/10/20 at "
                   "which the job's stored noise, `perflab noise`, sees --threshold; else 5).")
@click.option("--resume", is_flag=True, help="Go on with an interrupted bisection from its stored runs.")
@click.option("--id", "bisect_id", metavar="ID", help="With --resume: which bisection (default: the latest unfinished).")
@db_option
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def bisect_cmd(repo, good, bad, build_cmd, job_file, metric, kernel, vm_mode, tag, box, broker, source_url,
               build_timeout, alpha,
               threshold,
               pairing, runs, resume,
               bisect_id, db, command) -> None:
    """Find the first commit at which a metric changed, with git bisect and a sequential test.

    Measures the good and bad ends and refuses unless they really differ;
    then drives `git bisect` in a worktree of its own, builds each commit
    (--build; a commit that does not build is skipped) and measures it
    through the runner, adding runs only while it cannot yet tell whether the
    commit is like good or like bad. Every run is stored with its commit and
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
      perflab bisect --repo ~/linux --good v6.1 --bad HEAD --build 'make -j2 bzImage' \\
          --kernel arch/x86/boot/bzImage --vm icount --job getppid.yaml \\
          --metric will-it-scale.per_process_ops
      perflab bisect --resume
    """
    from perflab.automate import bisect
    from perflab.core.errors import UsageProblem

    if resume:
        if command or job_file or good or bad or build_cmd or metric or box or source_url or kernel or vm_mode \
                or runs:
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
        store = get_store(db)
        settings = bisect.Settings(alpha=alpha, threshold=threshold, pairing=pairing)
        result = bisect.start(store, repo=repo, good=good, bad=bad, build_cmd=build_cmd, job=job, metric=metric,
                              tag=tag, box=box, build_timeout=build_timeout, settings=settings,
                              broker=_broker(broker) if box else None, source_url=source_url, say=_say,
                              kernel=kernel, vm_mode=vm_mode, runs=runs,
                              noise_how=f"perflab noise {job_file}" if job_file else
                              "perflab noise -- " + shlex.join(command))
    _print(result)


def _broker(broker: str | None) -> str:
    from perflab.automate.lab.app import broker_url

    return broker_url(broker)


def _text(value, limit: int | None = None) -> str:
    """Text from git, a job file or the store, as the terminal must show it (control characters made visible)."""
    from perflab.core.text import printable

    return printable(value, limit)


def _print(result) -> None:
    rec = result.record
    ends = result.ends
    click.echo(f"bisection {rec.id} of {_text(rec.metric)} in {_text(rec.repo)} (runs tagged {_text(rec.tag)})")
    if result.exact:
        click.echo(f"ends: good {rec.good[:12]} -> bad {rec.bad[:12]}: {_pct(ends.change)} (exact: resolution "
                   f"{result.exact['resolution'] * 100:.2g}%, a change is called beyond {ends.detectable * 100:.2g}%; "
                   f"n={ends.n_good}+{ends.n_bad})")
    else:
        click.echo(f"ends: good {rec.good[:12]} -> bad {rec.bad[:12]}: {_pct(ends.change)} "
                   f"[{_pct(ends.ci[0])}, {_pct(ends.ci[1])}] (p={ends.p_value:.2g}, n={ends.n_good}+{ends.n_bad}; "
                   f"could detect {_pct_size(ends.detectable)} with 90% power)")
    if result.exact_note:
        click.echo(f"exact: {_text(result.exact_note)}")
    for finding in result.noise:
        click.echo(f"noise: {_text(finding)}")
    if result.culprit:
        c = result.culprit
        click.echo(f"first bad commit: {c['sha']}" + (" (the first measured bad one)" if result.ambiguous_with else ""))
        _commit_lines(c)
        _also(result)
        _evidence(result)
        _confirmation(result)
        click.echo(f"  compare: perflab compare tag={_text(rec.tag)},commit={rec.good[:12]} "
                   f"tag={_text(rec.tag)},commit={c['sha'][:12]}")
    elif result.unconfirmed:
        c = result.unconfirmed
        named = "the first measured bad commit is" if result.ambiguous_with else "git bisect named"
        click.echo(f"could not confirm a first bad commit: {named} {c['sha']}")
        _commit_lines(c)
        _also(result)
        _evidence(result)
        _confirmation(result)
    else:
        click.echo("no single first bad commit: only skipped commits are left; the first bad commit is one of:")
        for c in result.candidates:
            click.echo(f"  {c['sha'][:12]} {_text(c['subject'])} ({_text(c['author'])})")
    fixed = 10 * result.commits_measured
    click.echo(f"runs: {result.runs_used} over {result.commits_measured} commits measured "
               f"(a fixed 10 runs per commit would take {fixed}); "
               f"{len(rec.skips)} commit{'' if len(rec.skips) == 1 else 's'} skipped")
    click.echo("git bisect log:")
    for line in result.log.splitlines():
        click.echo(f"  {_text(line)}")


def _also(result) -> None:
    """The untested commits before the named one that could also be the first bad commit."""
    for c in result.ambiguous_with:
        why = (c.get("why") or "").splitlines()[0] if c.get("why") else ""
        what = ("does not build" if why.startswith("--build") else "does not boot" if "did not boot" in why
                else "could not be measured")
        why = why.removeprefix("--build failed: ")
        click.echo(f"  could also be: {c['sha'][:12]} {_text(c['subject'], 60)} ({what}: {_text(why, 100)})")


def _parent_word(result) -> str:
    """What the culprit was judged against: its parent, or its nearest measured good ancestor when the
    commits between could not be measured."""
    return "its nearest measured good ancestor" if result.ambiguous_with else "its parent"


def _commit_lines(c: dict) -> None:
    click.echo(f"  subject: {_text(c['subject'])}")
    click.echo(f"  author:  {_text(c['author'])}   date: {_text(c['date'])}")


def _evidence(result) -> None:
    rec, ev = result.record, result.evidence
    if not ev:
        return
    if ev.get("exact"):
        click.echo(f"  {_text(rec.metric)}: good {fmt_num(ev['good_mean'])} (n={ev['n_good']}) -> "
                   f"{fmt_num(ev['culprit_mean'])} (n={ev['n_culprit']}): {_pct(ev['change'])} "
                   f"± {ev['resolution'] * 100:.2g}% ({ev['verdict']}, exact)")
        click.echo(f"  {_parent_word(result)} is the good end" if ev["parent_is_good_end"]
                   else f"  {_parent_word(result)} {ev['parent'][:12]} judged good")
        return
    click.echo(f"  {_text(rec.metric)}: good {fmt_num(ev['good_mean'])} (n={ev['n_good']}) -> "
               f"{fmt_num(ev['culprit_mean'])} (n={ev['n_culprit']}): {_pct(ev['change'])} "
               f"[{_pct(ev['ci'][0]) if ev['ci'] else 'n/a'}, {_pct(ev['ci'][1]) if ev['ci'] else 'n/a'}] "
               f"({ev['verdict']}, p={ev['p_value']:.2g}"
               + (f"; {ev['dropped']} disturbed samples left out" if ev.get("dropped") else "") + ")")
    click.echo(f"  these samples could detect a change of {_pct_size(ev['detectable'])} with 90% power")
    if ev["p_bad"] is not None:
        # The per-step rate is Wald's, for the noise the test assumes: said so when the samples broke it.
        void = "; it holds only for steady noise, which these samples are not (see noise:)" if result.noise else ""
        click.echo(f"  judged bad by the sequential test: P(bad)={ev['p_bad']:.6f} "
                   f"(error rate per step <= {result_alpha(rec) * 100:g}%{void})")
    if ev["parent_is_good_end"]:
        click.echo(f"  {_parent_word(result)} is the good end")
    elif ev["parent_p_bad"] is not None:
        click.echo(f"  {_parent_word(result)} {ev['parent'][:12]} judged good: P(bad)={ev['parent_p_bad']:.6f}")
    click.echo("  samples: " + " ".join(fmt_num(v) for v in ev["culprit_values"]))


def _confirmation(result) -> None:
    ch = result.confirmation
    if not ch:
        return
    parent = ch["parent"][:12]
    if ch.get("exact"):
        said = "confirmed" if ch["verdict"] == "confirmed" else "not beyond the resolution in the ends' direction"
        click.echo(f"  against {_parent_word(result)} {parent}: {_pct(ch['change'])} (exact: a change is called beyond "
                   f"{ch['bar'] * 100:.2g}%; the ends differ by {_pct(ch['ends_change'])}): {said}")
        return
    if ch["verdict"] == "failed":
        click.echo(f"  confirmation against {_parent_word(result)} {parent} failed: {_text(ch['why'], 200)}")
        return
    said = {"confirmed": "confirmed", "refuted": "refuted: it is at its parent's level",
            "undecided": "undecided: neither at its parent's level nor a full change from it"}[ch["verdict"]]
    left = f", {ch['dropped']} disturbed left out" if ch.get("dropped") else ""
    click.echo(f"  against {_parent_word(result)} {parent} in {ch['pairs']} pairs (order random within each pair{left}): "
               f"{_pct(ch['change'])} [{_pct(ch['ci'][0])}, {_pct(ch['ci'][1])}] where the ends differ by "
               f"{_pct(ch['ends_change'])}: {said}")


def result_alpha(rec) -> float:
    return float(rec.settings.get("alpha", 0.005))


COMMANDS = [bisect_cmd]

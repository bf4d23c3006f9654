"""`perflab run ...`: execute benchmarks and record every sample."""

from __future__ import annotations

import statistics

import click

from perflab.cli.common import db_option, get_store


@click.group("run")
def run_group() -> None:
    """Run a benchmark and record every sample with its environment.

    \b
    Example:
      perflab run cmd --runs 20 --tag v6.8 -- make -s -C /src/tool
    """


def _key_values(values: tuple[str, ...], option: str) -> dict[str, str]:
    out = {}
    for v in values:
        key, sep, val = v.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{v!r}: expected NAME=VALUE", param_hint=option)
        out[key] = val
    return out


def _split_commands(words: tuple[str, ...]) -> list[list[str]]:
    groups, current = [], []
    for w in words:
        if w == "--":
            if current:
                groups.append(current)
            current = []
        else:
            current.append(w)
    if current:
        groups.append(current)
    return groups


def _fmt_time(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} µs"


@run_group.command("cmd", context_settings={"ignore_unknown_options": False})
@click.option("--runs", "-r", type=click.IntRange(min=1), default=10, show_default=True, help="Timed runs per command.")
@click.option("--warmup", "-w", type=click.IntRange(min=0), default=0, show_default=True, help="Untimed runs first.")
@click.option("--prepare", "-p", metavar="CMD", help="Shell command run before every run (untimed).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), metavar="S", help="Kill a run after S seconds.")
@click.option("--cmd", "cmds", multiple=True, metavar="CMD", help="A command to time (repeat to compare; run interleaved).")
@click.option("--shell", is_flag=True, help="Run the command through /bin/sh -c (default: no shell).")
@click.option("--metric", "metrics", multiple=True, metavar="NAME=REGEX",
              help="Extract a metric from the output: a regex (first group or whole match) or json:PATH.")
@click.option("--unit", "units", multiple=True, metavar="NAME=UNIT", help="Unit of an extracted metric.")
@click.option("--higher-is-better", "higher", multiple=True, metavar="NAME", help="An extracted metric where bigger is better.")
@click.option("--ignore-failure", "-i", is_flag=True, help="Keep going when the command exits non-zero.")
@click.option("--tag", "-t", help="Label of this variant (kernel, patch, compiler ...).")
@click.option("--name", help="Name the run in the log (default: the command line).")
@click.option("--box", help="Testbox name (default: hostname).")
@click.option("--repo", type=click.Path(), help="Git checkout of the system under test: its commit is recorded.")
@click.option("--comment", "-m", help="A note kept with the run (see `perflab annotate`).")
@db_option
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def run_cmd(runs, warmup, prepare, timeout, cmds, shell, metrics, units, higher, ignore_failure,
            tag, name, box, repo, comment, db, command) -> None:
    """Time any command, as hyperfine does, and record every run.

    Records wall time, user and system CPU time (from wait4), maximum RSS and exit
    status of every run. Several commands run interleaved (A B A B ...).

    \b
    Examples:
      perflab run cmd --runs 20 --warmup 2 -- sleep 0.02
      perflab run cmd --cmd 'gzip -1 -c big' --cmd 'gzip -9 -c big' --tag zlib-1.3
      perflab run cmd --metric 'ops=(\\d+) ops/s' --unit ops=ops/s --higher-is-better ops -- ./bench
    """
    from perflab.benchmarks.cmd import Command, MetricRule
    from perflab.runner.commands import run_commands

    unit_map = _key_values(units, "--unit")
    rules = [MetricRule.parse(m, unit_map, set(higher)) for m in metrics]
    for key in list(unit_map) + list(higher):
        if key not in {r.name for r in rules}:
            raise click.BadParameter(f"{key!r} names no --metric", param_hint="--unit/--higher-is-better")
    groups = [[c] for c in cmds] + _split_commands(command)
    if not groups:
        raise click.UsageError("no command given: put it after -- or use --cmd")
    commands = [Command.build(g, shell, rules) for g in groups]
    if name and len(commands) > 1:
        raise click.BadParameter("--name applies to a single command", param_hint="--name")
    store = get_store(db)
    results = run_commands(store, commands, runs=runs, warmup=warmup, prepare=prepare, timeout=timeout,
                           ignore_failure=ignore_failure, tag=tag, box=box, repo=repo, comment=comment, name=name)
    for r in results:
        walls = r.walls
        mean = statistics.fmean(walls)
        sd = statistics.stdev(walls) if len(walls) > 1 else 0.0
        click.echo(f"run #{r.recorder.run_id}: {r.command.display}")
        click.echo(f"  Time (mean ± σ):   {_fmt_time(mean):>10} ± {_fmt_time(sd):>10}")
        click.echo(f"  Range (min … max): {_fmt_time(min(walls)):>10} … {_fmt_time(max(walls)):>10}    {len(walls)} runs")
    if len(results) > 1:
        means = [(statistics.fmean(r.walls), r) for r in results]
        fastest_mean, fastest = min(means, key=lambda x: x[0])
        click.echo(f"Fastest: {fastest.command.display}")
        for mean, r in means:
            if r is not fastest:
                click.echo(f"  {mean / fastest_mean:.2f} times faster than {r.command.display}")


@run_group.command("lmbench")
@click.option("--quick", is_flag=True,
              help="Fewer, shorter samples (4 processes x 3 samples of 10 ms per figure, file "
                   "create/delete 2 x 3; under a minute) instead of 5 x 5 of 50 ms (about 4 minutes).")
@click.option("--only", "only", multiple=True, metavar="CATEGORY",
              help="Run only these categories (repeatable or comma-separated): "
                   "processes, select, ctx, filevm, latency, bandwidth, memory.")
@click.option("--tag", "-t", help="Label of this variant (kernel, patch, compiler ...).")
@click.option("--box", help="Testbox name (default: hostname).")
@click.option("--repo", type=click.Path(), help="Git checkout of the system under test: its commit is recorded.")
@click.option("--comment", "-m", help="A note kept with the run (see `perflab annotate`).")
@db_option
def run_lmbench(quick, only, tag, box, repo, comment, db) -> None:
    """Run the LMbench-class OS microbenchmarks and record every sample.

    Compiles the suite's C programs with $CC (default cc) -O2, runs each in
    separate processes and stores every figure of the LMbench summary; then
    `perflab report lmbench` prints the summary. A program that fails is
    recorded as failed and the rest of the suite goes on.

    \b
    Examples:
      perflab run lmbench --quick && perflab report lmbench
      perflab run lmbench --tag 6.8-rc1 --only processes,ctx
      CC=clang perflab run lmbench --tag clang-17
    """
    from perflab.benchmarks.lmbench.driver import parse_only, run_suite

    categories = parse_only(only)
    store = get_store(db)
    result = run_suite(store, quick=quick, categories=categories or None, tag=tag, box=box, repo=repo,
                       comment=comment)
    figures = len({m for p in result.programs for m in _figures_of(p)})
    line = (f"run #{result.run_id}: lmbench ({result.mode.name}), {result.samples} samples of {figures} figures "
            f"in {result.seconds:.0f} s")
    if result.failures:
        line += f"; {len(result.failures)} failed: {', '.join(result.failures)} (see `perflab show {result.run_id}`)"
    click.echo(line)


def _figures_of(program: str) -> list[str]:
    from perflab.benchmarks.lmbench.catalog import metrics_of_program

    return metrics_of_program(program)


COMMANDS = [run_group]

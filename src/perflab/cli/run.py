"""`perflab run FAMILY ...` and `perflab run JOB.yaml`: execute benchmarks and record every sample.

The subcommands are built from the family registry (perflab.benchmarks.FAMILIES):
`cmd` and `lmbench` keep their own options; any other family gets options
made from its parameter model. A job file given instead of a family runs its
whole matrix.

Each command only turns its options into a request for the run service
(perflab.runner.service), which builds, checks and runs the atomic jobs and
sums up their outcomes, and prints what the service computed.
"""

from __future__ import annotations

import os

import click

from perflab.cli.common import FiniteFloat, db_option, get_store, placed_on, target_options
from perflab.core.errors import PerflabError
from perflab.core.text import printable


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


MONITOR_HELP = ("Gather a monitor's evidence during the timed part (repeatable): NAME[:option=value,...], "
                "e.g. vmstat, perf-stat:events=[context-switches,pagefault:*], 'default' for the default set; "
                "`perflab monitors` lists them.")


MEASURE_HELP = ("Count each measured process's instructions under valgrind (cachegrind): instructions, or "
                "cache to add cache misses and estimated cycles (docs/instructions.md).")


def _measure_option():
    return click.option("--measure", type=click.Choice(["instructions", "cache"]), help=MEASURE_HELP)


def _variant_options(f):
    for option in reversed([
        click.option("--monitor", "monitor_specs", multiple=True, metavar="NAME[:OPT=VAL,...]", help=MONITOR_HELP),
        click.option("--tag", "-t", help="Label of this variant (kernel, patch, compiler ...)."),
        click.option("--box", help="Testbox name (default: hostname)."),
        click.option("--repo", type=click.Path(), help="Git checkout of the system under test: its commit is recorded."),
        click.option("--comment", "-m", help="A note kept with the run (see `perflab annotate`)."),
    ]):
        f = option(f)
    return db_option(f)


def _start_ahead(keys: dict, family: str) -> None:
    """The place a lone job of `family` runs in (a guest of `--kernel`), begun before the run
    service is imported and its job checked: the guest boots meanwhile on the other core
    (docs/vm.md). Undone at the command's end, whatever happened, if the run did not take it."""
    from perflab import benchmarks
    from perflab.execution import targets as places

    undo = places.start_ahead(keys, benchmarks.needs(family), family)
    if undo is not None:
        click.get_current_context().call_on_close(undo)


# -- cmd --------------------------------------------------------------------------

@click.command("cmd", context_settings={"ignore_unknown_options": False})
@click.option("--runs", "-r", type=click.IntRange(min=1), default=10, show_default=True, help="Timed runs per command.")
@click.option("--warmup", "-w", type=click.IntRange(min=0), default=0, show_default=True, help="Untimed runs first.")
@click.option("--prepare", "-p", metavar="CMD", help="Shell command run before every run (untimed).")
@click.option("--timeout", type=FiniteFloat(0, open_min=True), metavar="S", help="Kill a run after S seconds.")
@click.option("--cmd", "cmds", multiple=True, metavar="CMD", help="A command to time (repeat to compare; run interleaved, in random order per round).")
@click.option("--shell", is_flag=True, help="Run the command through /bin/sh -c (default: no shell).")
@click.option("--metric", "metrics", multiple=True, metavar="NAME=REGEX",
              help="Extract a metric from the output: a regex (first group or whole match) or json:PATH.")
@click.option("--unit", "units", multiple=True, metavar="NAME=UNIT", help="Unit of an extracted metric.")
@click.option("--higher-is-better", "higher", multiple=True, metavar="NAME", help="An extracted metric where bigger is better.")
@click.option("--ignore-failure", "-i", is_flag=True, help="Keep going when the command exits non-zero.")
@click.option("--name", help="Name the run in the log (default: the command line).")
@click.option("--cpus", metavar="LIST", help="Bind the command to these CPUs (e.g. 1 or 0,2-3).")
@_measure_option()
@_variant_options
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def run_cmd(runs, warmup, prepare, timeout, cmds, shell, metrics, units, higher, ignore_failure, cpus, measure,
            monitor_specs, tag, name, box, repo, comment, db, command, **targets) -> None:
    """Time any command, as hyperfine does, and record every run.

    Records wall time, user and system CPU time, maximum RSS and exit status
    of every run, measured for the command alone (perflab starts it through
    a small launcher that forks, execs and wait4s). Several commands run
    interleaved, round by round, in a random order within each round (RMIT).

    \b
    Examples:
      perflab run cmd --runs 20 --warmup 2 -- sleep 0.02
      perflab run cmd --cmd 'gzip -1 -c big' --cmd 'gzip -9 -c big' --tag zlib-1.3
      perflab run cmd --metric 'ops=(\\d+) ops/s' --unit ops=ops/s --higher-is-better ops -- ./bench
      perflab run cmd --monitor vmstat --monitor perf-stat -- ./bench
      perflab run cmd --measure instructions --runs 3 -- ./bench
    """
    unit_map = _key_values(units, "--unit")
    groups = [[c] for c in cmds] + _split_commands(command)
    if not groups:
        raise click.UsageError("no command given: put it after -- or use --cmd")
    if name and len(groups) > 1:
        raise click.BadParameter("--name applies to a single command", param_hint="--name")
    if not (monitor_specs or measure):
        _start_ahead(placed_on(dict(targets)), "cmd")     # before the family's import (pydantic)
    from perflab.benchmarks.cmd import MetricRule, check_unique

    rules = [MetricRule.parse(m, unit_map, set(higher)) for m in metrics]
    check_unique(rules)
    for key in list(unit_map) + list(higher):
        if key not in {r.name for r in rules}:
            raise click.BadParameter(f"{key!r} names no --metric", param_hint="--unit/--higher-is-better")
    from perflab.runner import service

    points = []
    for words in groups:
        params = {"argv": words, "shell": shell, "prepare": prepare, "ignore_failure": ignore_failure,
                  "metrics": [{"name": r.name, "pattern": r.pattern, "unit": r.unit, "direction": r.direction}
                              for r in rules]}
        if name:
            params["name"] = name
        if cpus:
            params["cpus"] = cpus
        points.append(params)
    # Each command is a point of its own: given together, they run interleaved (RMIT).
    options = service.JobOptions(runs=runs, warmup=warmup, timeout=timeout, tag=tag, comment=comment,
                                 monitor_specs=monitor_specs, measure=measure, target_keys=placed_on(targets))
    request = service.RunRequest("perflab run cmd", "cmd", tuple(points), options=options, box=box, repo=repo)
    outcomes = service.perform(request, lambda: get_store(db, recording=True))
    timed = service.command_timings(outcomes)
    for t in timed.timings:
        s = t.spread
        click.echo(f"run #{t.run_id}: {printable(t.title, None)}")
        click.echo(f"  Time (mean ± σ):   {_fmt_time(s.mean):>10} ± {_fmt_time(s.stddev):>10}")
        click.echo(f"  Range (min … max): {_fmt_time(s.min):>10} … {_fmt_time(s.max):>10}    {s.n} runs")
    if timed.fastest is not None:
        click.echo(f"Fastest: {printable(timed.timings[timed.fastest].title, None)}")
        for i, t in enumerate(timed.timings):
            if i != timed.fastest:
                click.echo(f"  {timed.ratios[i]:.2f} times faster than {printable(t.title, None)}")
    service.raise_first_failure(outcomes)


# -- lmbench ----------------------------------------------------------------------

@click.command("lmbench")
@click.option("--quick", is_flag=True,
              help="Fewer, shorter samples (3 processes x 3 samples of 5 ms per figure; context "
                   "switches 2 x 3, file create/delete 2 x 2; 15-20 s) instead of 9 x 5 of 10 ms "
                   "(about a minute).")
@click.option("--only", "only", multiple=True, metavar="CATEGORY",
              help="Run only these categories (repeatable or comma-separated): "
                   "processes, select, ctx, filevm, latency, bandwidth, memory.")
@_variant_options
def run_lmbench(quick, only, monitor_specs, tag, box, repo, comment, db, **targets) -> None:
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
      perflab run lmbench --only processes --kernel vmlinuz-6.1.0-47-amd64 --vm icount
    """
    from perflab.runner import service

    # --quick and --only are the family's parameters (a job file's `quick:` and `only:`).
    point = {"quick": bool(quick), **({"only": list(only)} if only else {})}
    options = service.JobOptions(tag=tag, comment=comment, monitor_specs=monitor_specs,
                                 target_keys=placed_on(targets))
    request = service.RunRequest("perflab run lmbench", "lmbench", (point,), options=options, box=box, repo=repo)
    outcomes = service.perform(request, lambda: get_store(db, recording=True))
    service.raise_first_failure(outcomes)
    result = service.suite_summary(outcomes[0])
    line = (f"run #{result.run_id}: lmbench ({result.mode}), {result.samples} samples of {result.figures} figures "
            f"in {result.seconds:.0f} s")
    if result.failures:
        line += f"; {len(result.failures)} failed: {', '.join(result.failures)} (see `perflab show {result.run_id}`)"
    click.echo(line)


HANDWRITTEN = {"cmd": run_cmd, "lmbench": run_lmbench}


# -- any other family, and job files ---------------------------------------------

def job_line(outcome) -> str:
    """One atomic job's result line: its headline metric (mean ± CoV), samples, time and status."""
    from perflab.cli.common import fmt_num
    from perflab.runner.service import job_summary

    job = job_summary(outcome)
    headline = ""
    if job.headline is not None:
        h = job.headline
        headline = f"{h.metric} {fmt_num(h.mean)} {h.unit}".rstrip() + (
            f" ± {h.cov * 100:.1f}%" if h.cov is not None else "") + ", "
    # What differs from the other jobs of the invocation first, whole (a matrix over cc, mode ...).
    title = f"{printable(job.varying, None)} {printable(job.name, 80)}".lstrip()
    workdir = f", workdir {printable(job.workdir, 120)}" if job.workdir else ""
    return (f"run #{job.run_id}: {title}: {headline}{job.samples} samples "
            f"in {job.seconds:.1f} s{workdir} ({printable(job.status, 200)})")


# At most this many allowed values are spelled in an option's metavar (`--mode process|thread`);
# a longer list (will-it-scale's 37 testcases) is in its help text.
CHOICES_IN_METAVAR = 8


def _param_options(fam, *, over: str = "") -> list[click.Option]:
    """An option per parameter of the family, its allowed values and its default in the help."""
    from pydantic_core import PydanticUndefined

    from perflab.jobs import _choices

    options = []
    for key, field in fam.Params.model_fields.items():
        choices = _choices(field.annotation)
        metavar = "|".join(map(str, choices)) if choices and len(choices) <= CHOICES_IN_METAVAR else "VALUE"
        default = field.default
        shown = "" if default is PydanticUndefined or default in (None, [], "") else f" [default: {default}]"
        options.append(click.Option([f"--{key.replace('_', '-')}", key], multiple=True, metavar=metavar,
                                    help=(field.description or key) + f" (repeat for a matrix axis{over}).{shown}"))
    return options


def _job_key_options(runs_default: str) -> list[click.Option]:
    """The job keys every job has (runs, warmup, timeout) as options."""
    return [
        click.Option(["--runs", "-r"], type=click.IntRange(min=1), default=None,
                     help=f"Repetitions of each atomic job [default: {runs_default}]."),
        click.Option(["--warmup", "-w"], type=click.IntRange(min=0), default=None,
                     help="Untimed repetitions first [default: 0]."),
        click.Option(["--timeout"], type=FiniteFloat(0, open_min=True), metavar="S",
                     help="Kill a process after S seconds [default: the family's, from the job's duration]."),
        click.Option(["--cc"], multiple=True, metavar="COMPILER",
                     help="Build the C programs with this compiler (repeat for a matrix axis: --cc gcc --cc clang) "
                          "[default: $CC, else cc]."),
        click.Option(["--cflags"], multiple=True, metavar="FLAGS",
                     help="Flags added after the programs' own (-O1 wins over -O2; repeat for a matrix axis)."),
    ]


def _given_values(values: dict) -> dict:
    """Repeatable parameter options as given: one value, or a list (a matrix axis)."""
    from perflab import jobs as jobfiles

    out = {}
    for key, given in values.items():
        if given:
            # A compiler or its flags are words, never numbers or YAML.
            parsed = list(given) if key in jobfiles.BUILD_KEYS else [jobfiles.parse_scalar(v) for v in given]
            out[key] = parsed if len(parsed) > 1 else parsed[0]
    return out


def _family_command(name: str) -> click.Command:
    """A `perflab run NAME` command made from the family's parameter model."""
    from perflab import benchmarks

    fam = benchmarks.family(name)

    def callback(runs, warmup, timeout, monitor_specs, tag, box, repo, comment, db, measure=None,
                 **values):
        from perflab.runner import service

        placed = placed_on(values)
        options = service.JobOptions(runs=runs, warmup=warmup, timeout=timeout, tag=tag, comment=comment,
                                     monitor_specs=monitor_specs, measure=measure, target_keys=placed)
        request = service.RunRequest(f"perflab run {name}", name, (_given_values(values),), options=options, box=box,
                                     repo=repo)
        service.raise_first_failure(service.perform(request, lambda: get_store(db, recording=True), on_done=job_line))

    params = [*_job_key_options("the family's"), *_param_options(fam)]
    command = click.Command(name, callback=callback, params=params,
                            help=f"Run {name}: {fam.summary}.\n\nEvery parameter option may be repeated: "
                                 f"each value is one point of the matrix.\n\n\b\nExample:\n"
                                 f"  perflab jobs list   # shipped job files, e.g. perflab run JOB.yaml")
    for option in [click.Option(["--measure"], type=click.Choice(["instructions", "cache"]), help=MEASURE_HELP),
                   click.Option(["--monitor", "monitor_specs"], multiple=True, metavar="NAME[:OPT=VAL,...]",
                                help=MONITOR_HELP),
                   click.Option(["--tag", "-t"], help="Label of this variant (kernel, patch, compiler ...)."),
                   click.Option(["--box"], help="Testbox name (default: hostname)."),
                   click.Option(["--repo"], type=click.Path(), help="Git checkout of the system under test: its commit is recorded."),
                   click.Option(["--comment", "-m"], help="A note kept with the run."),
                   click.Option(["--db"], metavar="URL", help="Store URL or SQLite path (overrides the global --db and $PERFLAB_DB).")]:
        command.params.append(option)
    return command


def _family_of_file(path: str):
    """The family a job file names, for its options; None when the file does not say (yet)."""
    import yaml

    from perflab import benchmarks

    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None      # reported properly, at its line, when the job is loaded
    name = doc.get("benchmark") if isinstance(doc, dict) else None
    return benchmarks.family(name) if isinstance(name, str) and name in benchmarks.FAMILIES else None


def _job_command(path: str) -> click.Command:
    fam = _family_of_file(path)

    def run_job(overrides, measure, monitor_specs, tag, box, repo, comment, db, runs=None,
                warmup=None, timeout=None, **values) -> None:
        from perflab.runner import service

        placed = placed_on(values)
        options = service.JobOptions(runs=runs, warmup=warmup, timeout=timeout, tag=tag, comment=comment,
                                     monitor_specs=monitor_specs, measure=measure, target_keys=placed)
        request = service.RunRequest(f"perflab run {path}", job_file=path, overrides=tuple(overrides),
                                     points=(_given_values(values),), options=options, box=box, repo=repo)
        service.raise_first_failure(service.perform(request, lambda: get_store(db, recording=True), on_done=job_line))

    command = click.command(path, help=(
        "Run every atomic job of a job file (the Cartesian product of its list values).\n\n"
        "An option given here wins over the file's key (as --set KEY=VALUE does).\n\n"
        "\b\nExample:\n  perflab run will-it-scale-seed.yaml --runs 3 --duration 2 --tag v6.8"))(
        click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
                     help="Override a key of the job file (a YAML value; a list makes an axis).")(
            _measure_option()(_variant_options(run_job))))
    extra = _job_key_options("the job file's, else the family's")
    if fam is not None:
        extra += _param_options(fam, over=", over the file's")
    command.params[2:2] = extra
    return command


class RunGroup(click.Group):
    """`perflab run FAMILY` for every registered family, or `perflab run JOB.yaml`."""

    def list_commands(self, ctx):
        from perflab import benchmarks

        return list(benchmarks.FAMILIES)

    def get_command(self, ctx, name):
        from perflab import benchmarks

        if name in HANDWRITTEN:
            return target_options(HANDWRITTEN[name])
        if name in benchmarks.FAMILIES:
            return target_options(_family_command(name))
        if name.endswith((".yaml", ".yml")) or os.sep in name or os.path.isfile(name):
            from perflab import jobs as jobfiles

            if not os.path.isfile(name):
                shipped = {p.name: p for p in jobfiles.shipped()}
                if name in shipped:
                    return target_options(_job_command(str(shipped[name])))
                hint = jobfiles._did_you_mean(name, shipped)
                raise PerflabError(f"job file {name}: no such file{hint} (shipped job files: `perflab jobs list`)")
            return target_options(_job_command(name))
        # Not a family: a near family or shipped job file name is most likely what was meant.
        from perflab import jobs as jobfiles
        from perflab.jobs import _did_you_mean

        hint = _did_you_mean(name, [*benchmarks.FAMILIES, *(p.name for p in jobfiles.shipped())])
        if hint:
            raise click.UsageError(f"No such command {name!r}{hint}", ctx)
        return None


@click.group("run", cls=RunGroup)
def run_group() -> None:
    """Run a benchmark (a family, or a job file) and record every sample with its environment.

    \b
    Example:
      perflab run cmd --runs 20 --tag v6.8 -- make -s -C /src/tool
      perflab run will-it-scale --test page_fault1 --mode thread --nr-task 1 --nr-task 2
      perflab run will-it-scale-seed.yaml --tag v6.8
    """


COMMANDS = [run_group]

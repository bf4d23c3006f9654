"""`perflab run FAMILY ...` and `perflab run JOB.yaml`: execute benchmarks and record every sample.

The subcommands are built from the family registry (perflab.benchmarks.FAMILIES):
`cmd` and `lmbench` keep their own options; any other family gets options
made from its parameter model. A job file given instead of a family runs its
whole matrix.
"""

from __future__ import annotations

import os

import click

from perflab.cli.common import FiniteFloat, db_option, get_store
from perflab.core.errors import PerflabError


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


def _monitors(specs: tuple[str, ...], base: dict | None = None) -> dict:
    """--monitor options (over a job's own `monitors`) -> the job's validated monitors mapping."""
    from perflab import monitors

    merged = dict(base or {})
    for spec in specs:
        merged.update(monitors.parse_spec(spec))
    return monitors.validate(merged)


KERNEL_HELP = ("Boot this kernel (bzImage, vmlinuz) in a QEMU guest and run the job inside "
               "(lmbench, will-it-scale, ebizzy, hackbench, cmd, fio, aim7, news; docs/vm.md).")
VM_HELP = ("The guest's mode: tcg (emulated, wall time), icount (emulated, instruction-time: exact "
           "and repeatable) or kvm. Needs --kernel (or a job's kernel key).")


def _guest_options() -> list:
    from perflab.execution.vm import MODES

    return [click.option("--kernel", "kernel", metavar="PATH", help=KERNEL_HELP),
            click.option("--vm", "vm_mode", type=click.Choice(MODES), help=VM_HELP)]


MEASURE_HELP = ("Count each measured process's instructions under valgrind (cachegrind): instructions, or "
                "cache to add cache misses and estimated cycles (docs/instructions.md).")


def _measure_option():
    return click.option("--measure", type=click.Choice(["instructions", "cache"]), help=MEASURE_HELP)


def _vm(vm_mode: str | None) -> dict | None:
    return {"mode": vm_mode} if vm_mode else None


def _variant_options(f):
    for option in reversed([
        *_guest_options(),
        click.option("--monitor", "monitor_specs", multiple=True, metavar="NAME[:OPT=VAL,...]", help=MONITOR_HELP),
        click.option("--tag", "-t", help="Label of this variant (kernel, patch, compiler ...)."),
        click.option("--box", help="Testbox name (default: hostname)."),
        click.option("--repo", type=click.Path(), help="Git checkout of the system under test: its commit is recorded."),
        click.option("--comment", "-m", help="A note kept with the run (see `perflab annotate`)."),
    ]):
        f = option(f)
    return db_option(f)


def _finish(outcomes) -> None:
    """Exit status of a run command: a failed job fails the command (after the others ran)."""
    from perflab.runner.recorder import RunFailed

    failed = [o for o in outcomes if o.error is not None]
    if failed:
        more = f" (and {len(failed) - 1} more failed jobs)" if len(failed) > 1 else ""
        raise RunFailed(failed[0].error + more)


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
            kernel, vm_mode, monitor_specs, tag, name, box, repo, comment, db, command) -> None:
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
    from perflab.benchmarks.cmd import FAMILY, MetricRule, check_unique
    from perflab.jobs import atomic
    from perflab.runner.loop import run_jobs
    from perflab.stats.relative import relative_to_fastest, spread

    unit_map = _key_values(units, "--unit")
    rules = [MetricRule.parse(m, unit_map, set(higher)) for m in metrics]
    check_unique(rules)
    for key in list(unit_map) + list(higher):
        if key not in {r.name for r in rules}:
            raise click.BadParameter(f"{key!r} names no --metric", param_hint="--unit/--higher-is-better")
    monitors = _monitors(monitor_specs)
    groups = [[c] for c in cmds] + _split_commands(command)
    if not groups:
        raise click.UsageError("no command given: put it after -- or use --cmd")
    if name and len(groups) > 1:
        raise click.BadParameter("--name applies to a single command", param_hint="--name")
    jobs = []
    for words in groups:
        params = {"argv": words, "shell": shell, "prepare": prepare, "ignore_failure": ignore_failure,
                  "metrics": [{"name": r.name, "pattern": r.pattern, "unit": r.unit, "direction": r.direction}
                              for r in rules]}
        if name:
            params["name"] = name
        if cpus:
            params["cpus"] = cpus
        job = atomic("cmd", params, runs=runs, warmup=warmup, timeout=timeout, tag=tag, comment=comment,
                     monitors=monitors, kernel=kernel, vm=_vm(vm_mode), measure=measure)
        FAMILY.command(job.parsed)   # the executable exists: checked before the store is opened
        jobs.append(job)
    store = get_store(db)
    outcomes = run_jobs(store, jobs, interleave=True, randomise=True, box=box, repo=repo)
    done = [o for o in outcomes if o.walls.get(o.session.processes(0)[-1].item)]
    means = []
    for o in done:
        walls = o.walls[o.session.processes(0)[-1].item]
        s = spread(walls)
        means.append(s.mean)
        sd = s.stddev
        click.echo(f"run #{o.run_id}: {o.session.command.display}")
        click.echo(f"  Time (mean ± σ):   {_fmt_time(s.mean):>10} ± {_fmt_time(sd):>10}")
        click.echo(f"  Range (min … max): {_fmt_time(s.min):>10} … {_fmt_time(s.max):>10}    {s.n} runs")
    if len(done) > 1 and len(done) == len(outcomes):
        fastest, ratios = relative_to_fastest(means)
        click.echo(f"Fastest: {done[fastest].session.command.display}")
        for i, o in enumerate(done):
            if i != fastest:
                click.echo(f"  {ratios[i]:.2f} times faster than {o.session.command.display}")
    _finish(outcomes)


# -- lmbench ----------------------------------------------------------------------

@click.command("lmbench")
@click.option("--quick", is_flag=True,
              help="Fewer, shorter samples (4 processes x 3 samples of 10 ms per figure, file "
                   "create/delete 2 x 3; under a minute) instead of 5 x 5 of 50 ms (about 4 minutes).")
@click.option("--only", "only", multiple=True, metavar="CATEGORY",
              help="Run only these categories (repeatable or comma-separated): "
                   "processes, select, ctx, filevm, latency, bandwidth, memory.")
@_variant_options
def run_lmbench(quick, only, kernel, vm_mode, monitor_specs, tag, box, repo, comment, db) -> None:
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
    from perflab.benchmarks.lmbench.catalog import metrics_of_program
    from perflab.benchmarks.lmbench.driver import parse_only
    from perflab.runner.suite import run_suite

    categories = parse_only(only)
    monitors = _monitors(monitor_specs)
    if kernel or vm_mode:
        # Checked before the store is opened: a refused guest job leaves nothing behind.
        from perflab.jobs import atomic, guest

        guest.check(atomic("lmbench", {}, monitors=monitors, kernel=kernel, vm=_vm(vm_mode)))
    store = get_store(db)
    result = run_suite(store, quick=quick, categories=categories or None, tag=tag, box=box, repo=repo,
                       comment=comment, monitors=monitors, kernel=kernel, vm=_vm(vm_mode))
    figures = len({m for p in result.programs for m in metrics_of_program(p)})
    line = (f"run #{result.run_id}: lmbench ({result.mode.name}), {result.samples} samples of {figures} figures "
            f"in {result.seconds:.0f} s")
    if result.failures:
        line += f"; {len(result.failures)} failed: {', '.join(result.failures)} (see `perflab show {result.run_id}`)"
    click.echo(line)


HANDWRITTEN = {"cmd": run_cmd, "lmbench": run_lmbench}


# -- any other family, and job files ---------------------------------------------

def _report_jobs(outcomes) -> None:
    from perflab.cli.common import fmt_num
    from perflab.stats.relative import spread
    from perflab.core.text import printable

    for o in outcomes:
        if o.recorder is None:
            continue
        headline = ""
        for metric in o.job.family.metrics(o.job.parsed).values():
            if o.values.get(metric.name):
                s = spread(o.values[metric.name])
                headline = f"{metric.name} {fmt_num(s.mean)} {metric.unit}".rstrip() + (
                    f" ± {s.cov * 100:.1f}%" if s.n > 1 and s.cov == s.cov else "") + ", "
                break
        status = "failed: " + o.error if o.error else (f"{len(o.failures)} items failed" if o.failures else "ok")
        click.echo(f"run #{o.run_id}: {printable(o.session.name, 80)}: {headline}{o.samples} samples "
                   f"in {o.seconds:.1f} s ({printable(status, 200)})")


def _run_atomic_jobs(jobs: list, box, repo, db) -> None:
    """Run AtomicJobs (perflab.jobs) one after another, print a line per run; exit status by failures."""
    from perflab.runner import guest
    from perflab.runner.loop import run_jobs

    guest.check(jobs)    # a guest job that cannot run: refused before the store is opened
    store = get_store(db)
    outcomes = run_jobs(store, jobs, interleave=False, box=box, repo=repo)
    _report_jobs(outcomes)
    _finish(outcomes)


def _family_command(name: str) -> click.Command:
    """A `perflab run NAME` command made from the family's parameter model."""
    from perflab import benchmarks

    fam = benchmarks.family(name)

    def callback(runs, warmup, timeout, kernel, vm_mode, monitor_specs, tag, box, repo, comment, db, measure=None,
                 **values):
        from perflab import jobs as jobfiles

        doc = {"benchmark": name, "runs": runs, "warmup": warmup, "timeout": timeout, "tag": tag, "comment": comment,
               "monitors": _monitors(monitor_specs)}
        if kernel is not None or vm_mode:
            doc.update(kernel=kernel, vm=_vm(vm_mode))
        if measure is not None:
            doc["measure"] = measure
        for key, given in values.items():
            if given:
                parsed = [jobfiles.parse_scalar(v) for v in given]
                doc[key] = parsed if len(parsed) > 1 else parsed[0]
        _run_atomic_jobs(jobfiles.expand_atomic(doc, f"perflab run {name}"), box, repo, db)

    params = [
        click.Option(["--runs", "-r"], type=click.IntRange(min=1), default=None,
                     help="Repetitions of each atomic job (default: the family's)."),
        click.Option(["--warmup", "-w"], type=click.IntRange(min=0), default=0, show_default=True, help="Untimed repetitions first."),
        click.Option(["--timeout"], type=FiniteFloat(0, open_min=True), metavar="S", help="Kill a process after S seconds."),
    ]
    for key, field in fam.Params.model_fields.items():
        params.append(click.Option([f"--{key.replace('_', '-')}", key], multiple=True, metavar="VALUE",
                                   help=(field.description or key) + " (repeat for a matrix axis)."))
    command = click.Command(name, callback=callback, params=params,
                            help=f"Run {name}: {fam.summary}.\n\nEvery parameter option may be repeated: "
                                 f"each value is one point of the matrix.\n\n\b\nExample:\n"
                                 f"  perflab jobs list   # shipped job files, e.g. perflab run JOB.yaml")
    from perflab.execution.vm import MODES

    for option in [click.Option(["--kernel", "kernel"], metavar="PATH", help=KERNEL_HELP),
                   click.Option(["--vm", "vm_mode"], type=click.Choice(MODES), help=VM_HELP),
                   click.Option(["--measure"], type=click.Choice(["instructions", "cache"]), help=MEASURE_HELP),
                   click.Option(["--monitor", "monitor_specs"], multiple=True, metavar="NAME[:OPT=VAL,...]",
                                help=MONITOR_HELP),
                   click.Option(["--tag", "-t"], help="Label of this variant (kernel, patch, compiler ...)."),
                   click.Option(["--box"], help="Testbox name (default: hostname)."),
                   click.Option(["--repo"], type=click.Path(), help="Git checkout of the system under test: its commit is recorded."),
                   click.Option(["--comment", "-m"], help="A note kept with the run."),
                   click.Option(["--db"], metavar="URL", help="Store URL or SQLite path (overrides the global --db and $PERFLAB_DB).")]:
        command.params.append(option)
    return command


def _job_command(path: str) -> click.Command:
    @click.command(path)
    @click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
                  help="Override a key of the job file (a YAML value; a list makes an axis).")
    @_measure_option()
    @_variant_options
    def run_job(overrides, measure, kernel, vm_mode, monitor_specs, tag, box, repo, comment, db) -> None:
        """Run every atomic job of a job file (the Cartesian product of its list values).

        \b
        Example:
          perflab run will-it-scale-seed.yaml --set runs=3 --tag v6.8
        """
        from perflab import jobs as jobfiles

        atomic = []
        from perflab.jobs import guest

        # --kernel/--vm before the file is expanded: the guest's vCPUs decide its points.
        for job in jobfiles.load_atomic(path, guest.file_overrides(path, list(overrides), kernel, _vm(vm_mode))):
            if tag is not None:
                job = job.with_(tag=tag)
            if comment is not None:
                job = job.with_(comment=comment)
            if monitor_specs:
                job = job.with_(monitors=_monitors(monitor_specs, job.monitors))
            job = jobfiles.measured(job, measure, f"perflab run {path}")
            atomic.append(job)
        _run_atomic_jobs(atomic, box, repo, db)

    return run_job


class RunGroup(click.Group):
    """`perflab run FAMILY` for every registered family, or `perflab run JOB.yaml`."""

    def list_commands(self, ctx):
        from perflab import benchmarks

        return list(benchmarks.FAMILIES)

    def get_command(self, ctx, name):
        from perflab import benchmarks

        if name in HANDWRITTEN:
            return HANDWRITTEN[name]
        if name in benchmarks.FAMILIES:
            return _family_command(name)
        if name.endswith((".yaml", ".yml")) or os.sep in name or os.path.isfile(name):
            from perflab import jobs as jobfiles

            if not os.path.isfile(name):
                shipped = {p.name: p for p in jobfiles.shipped()}
                if name in shipped:
                    return _job_command(str(shipped[name]))
                raise PerflabError(f"job file {name}: no such file (shipped job files: `perflab jobs list`)")
            return _job_command(name)
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

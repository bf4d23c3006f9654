"""`perflab log`, `runs`, `show`, `annotate`: what has been measured."""

from __future__ import annotations

import math
import shlex

import click

from perflab.cli.common import FiniteFloat, db_option, fmt_num, get_store, local_time, parse_since
from perflab.core.errors import PerflabError
from perflab.core.text import printable

# `show` is about one run: it shows more of a long string than a table cell does,
# still bounded (a 100 KB comment is not read on a terminal).
SHOW_LIMIT = 1000

# Statuses other than finished are printed in the log, so that an interrupted
# or failed run is never mistaken for a good one.
# A finished run reads "done"; the others in capitals where they hold less than was asked.
_MARK = {"finished": "done", "running": "running", "interrupted": "INTERRUPTED", "failed": "FAILED", "partial": "partial"}
# The metrics the log's three time columns show, for runs that record them (cmd, news, kernbench).
TIMES = ("time.elapsed_time", "time.user_time", "time.system_time")


def _boot_shared(facts: dict) -> str:
    """Which job of its guest's boot the run was, when the boot was shared (vm_boot_job of vm_boot_jobs)."""
    job, jobs = str(facts.get("vm_boot_job") or ""), str(facts.get("vm_boot_jobs") or "")
    if not (job.isdigit() and jobs.isdigit()) or jobs == "1":
        return ""
    return f"; booted once for {jobs} jobs, this the {_ordinal(int(job))}"


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _commit(row) -> str:
    if not row.commit:
        return "-"
    return printable(row.commit[:12]) + ("+dirty" if row.dirty else "")


def _nothing_matched(store, benchmark, filtered: bool) -> str:
    """Why a listing is empty, for stderr; raises when BENCHMARK names no run at all."""
    if not store.find_runs(limit=1):
        return "(no runs recorded yet: try `perflab run cmd -- true`)"
    if benchmark and not store.find_runs(benchmark=benchmark, limit=1):
        families, names, count = store.run_names(limit=8)
        more = f", ... ({count - len(names)} more)" if count > len(names) else ""
        raise PerflabError(
            f"no run matches {printable(benchmark, 40)!r} (a benchmark family or run name); "
            f"families: {', '.join(printable(f, 40) for f in families)}; "
            f"names: {', '.join(printable(n, 40) for n in names)}{more}"
        )
    return "(no run matches these filters)" if filtered else ""


@click.command("log")
@click.argument("benchmark", required=False)
@click.option("--per", type=FiniteFloat(0, open_min=True), metavar="N",
              help="Divide times by N units of work (e.g. articles), as the C News log does.")
@click.option("--tag", "-t", help="Only runs with this tag.")
@click.option("--box", help="Only runs on this testbox.")
@click.option("--since", help="Only runs started since a date (YYYY-MM-DD) or an age (3d, 12h).")
@click.option("--plot", type=click.Path(dir_okay=False), metavar="FILE.png",
              help="Also draw real, user and sys per run into a PNG or SVG (by the file's extension).")
@click.option("--order", type=click.Choice(["time", "kernel"]), default=None,
              help="Oldest first, or by kernel release in version order (then oldest first). Default: by kernel "
                   "when every run listed ran in a guest and they measured more than one kernel; else by time.")
@db_option
def log_cmd(benchmark, per, tag, box, since, plot, db, order=None) -> None:
    """One line per run, oldest first: date, real, user, sys, status, kernel, tag, commit, comment.

    Times are the mean of the run's repetitions in seconds (per unit of work with --per).
    A run that records no times shows its family's primary metric in the first column (its
    figure as show and compare print it: a rate's harmonic mean),
    named in brackets before the comment; the header's unit line says what the column holds.
    BENCHMARK filters by benchmark family or run name.

    \b
    Example:
      perflab log
      perflab log "./rnews < batch" --per 171
    """
    if per is not None and not math.isfinite(1.0 / per):
        raise click.BadParameter(f"{per!r} is too small to divide by", param_hint="--per")
    since_time = parse_since(since)
    if plot:
        from perflab.report.plots import check_path

        check_path(plot)
    store = get_store(db, reading=True)
    rows = store.log_rows(benchmark=benchmark, tag=tag, box=box, since=since_time, metrics=TIMES)
    note = "" if rows else _nothing_matched(store, benchmark, bool(benchmark or tag or box or since))
    scale = 1.0 / per if per else 1.0
    unit = f"s/{per:g}" if per else "s"
    listed = {r.id: r for r in store.find_runs(benchmark=benchmark, tag=tag, box=box, since=since_time)} if rows else {}
    from perflab.analysis import variant

    variants = {rid: variant.of(run) for rid, run in listed.items()}    # decoded once for the log
    headline = _headlines(listed, variants, rows, store, benchmark=benchmark, tag=tag, box=box, since=since_time)
    kernel = _kernel_labels(listed, variants)
    rows = _ordered(rows, listed, variants, order)
    # A kernel's label is printed whole (docs/views.md "Names of rows and series"): the variant
    # labels are short by construction, and what tells two apart is often at their end.
    kernel_width = max([6, *(len(printable(kernel.get(r.id), None)) for r in rows)])
    first, first_unit = _first_column(rows, headline, unit)
    out = [f"{'run':>5}  {'date':16}  {first:>9}  {'user':>9}  {'sys':>9}  {'status':11}  {'kernel':{kernel_width}}  "
           f"{'tag':14}  {'commit':18}  comment"]
    out.append(f"{'':>5}  {'':16}  {first_unit:>9}  {'':>9}  {'':>9}".rstrip())
    for r in rows:
        real, user, sys_ = (None if v is None else v * scale for v in (r.m0, r.m1, r.m2))
        # Without a comment, the run's name (the command line) says what was run.
        comment = printable(r.comment or r.name, 120)
        if r.id in headline:
            # A run that records no times (will-it-scale, lmbench ...): its family's primary
            # metric in the first column, named (with its unit) before the comment.
            metric, metric_unit, value = headline[r.id]
            real, user, sys_ = value, None, None
            comment = f"[{printable(metric, 60)}{' ' + printable(metric_unit, 20) if metric_unit else ''}] {comment}"
        out.append(
            f"{r.id:>5}  {local_time(r.started):16}  {fmt_num(real, 9)}  {fmt_num(user, 9)}  {fmt_num(sys_, 9)}  "
            f"{_MARK.get(r.status, r.status):11}  {printable(kernel.get(r.id), None):{kernel_width}}  "
            f"{printable(r.tag):14}  {_commit(r):18}  {comment}"
        )
    click.echo("\n".join(out))
    if note:
        click.echo(note, err=True)
    if plot and rows:
        from perflab.report.plots import plot_log

        plot_log(rows, plot, scale=scale, unit=unit, title=f"perflab log {benchmark or ''}".strip())
        click.echo(f"plot: {plot}", err=True)
    elif plot:
        click.echo(f"plot: nothing to draw, {plot} not written", err=True)


def _kernel_labels(listed: dict, variants: dict) -> dict[int, str | None]:
    """run id -> its kernel as the log shows it: the release, or, where the runs listed differ in
    more than the release (a flavour, boot options, a build, the target), their variants' labels
    (analysis.naming.variant_labels: `6.1.0-56 amd64 mitigations=off`)."""
    from perflab.analysis import naming

    kinds = {v.measured: v for v in variants.values()}   # target, kernel, file system, compiler
    if len(kinds) < 2:
        return {rid: (run.environment or {}).get("kernel_release") for rid, run in listed.items()}
    label = dict(zip(kinds, naming.variant_labels(list(kinds.values()))))
    return {rid: label[v.measured] for rid, v in variants.items()}


def _ordered(rows, listed: dict, variants: dict, order: str | None) -> list:
    """The log's rows oldest first, or by kernel release in version order (oldest first within one)."""
    from perflab.core.kernel_version import order_key

    def env(rid) -> dict:
        return getattr(listed.get(rid), "environment", None) or {}

    if order is None:
        guests = all(rid in variants and variants[rid].target.guest for rid in (r.id for r in rows))
        order = "kernel" if rows and guests and len({env(r.id).get("kernel_release") for r in rows}) > 1 else "time"
    if order == "time":
        return list(rows)
    # A line of kernels (a flavour, a build, boot options) after another, each in version order:
    # releases of different lines are not one history (docs/views.md, "Variants").
    lines: dict = {}
    for r in rows:
        if r.id in variants:
            lines.setdefault(variants[r.id].line, len(lines))
    versions = {}
    for rid in listed:
        if env(rid).get("kernel_release") and isinstance(env(rid).get("kernel_version"), str):
            versions.setdefault(env(rid)["kernel_release"], env(rid)["kernel_version"])
    place = {r.id: order_key(env(r.id).get("kernel_release"), versions.get(env(r.id).get("kernel_release")))
             for r in rows}
    return sorted(rows, key=lambda r: (lines.get(variants[r.id].line, -1) if r.id in variants else -1,
                                       place[r.id]))   # stable: oldest first within a kernel


def _first_column(rows, headline: dict, unit: str) -> tuple[str, str]:
    """The first figure column's header and unit line: real time in seconds, or, where runs record
    no times, the unit of the primary metric printed there (named per row in brackets)."""
    units = {headline[r.id][1] for r in rows if r.id in headline}
    if not units:
        return "real", f"({unit})"
    if len(units) == 1 and all(r.id in headline for r in rows):
        only = units.pop()
        return "figure", f"({only})" if only else ""
    return "real/[..]", f"({unit} or [unit])"


def _headlines(listed: dict, variants: dict, rows, store, **filters) -> dict[int, tuple[str, str, float]]:
    """run id -> (metric, unit, figure) of its family's primary metric, for runs that record no times.

    The primary metric is the first of the family's catalog for the run's stored job (what
    `perflab run` prints on the run's line); two queries whatever the number of runs.
    """
    timeless = {r.id for r in rows if r.m0 is None and r.m1 is None and r.m2 is None}
    if not timeless:
        return {}
    primary: dict[int, tuple[str, str, int]] = {}
    for run in listed.values():
        if run.id in timeless:
            found = _primary_metric(run.benchmark, run.job)
            if found is not None:
                primary[run.id] = found
    unknown = sorted(timeless - set(primary))
    if unknown:
        # No job to read a catalog from (an import, a store written directly): its first metric
        # that is not a monitor's.
        from perflab.monitors import monitor_of

        for smp in store.samples(unknown):
            if smp.run_id not in primary and monitor_of(smp.metric) is None:
                primary[smp.run_id] = (smp.metric, smp.unit, smp.direction)
    metrics = tuple(dict.fromkeys(m for m, _u, _d in primary.values()))
    if not metrics:
        return {}
    # The run's figure as show and compare print it (stats.descriptive: a rate's harmonic mean,
    # an exact metric's least disturbed sample), not the database's average.
    from perflab.analysis.run_summary import figure_of

    values = store.metric_values(list(primary), metrics)
    icount = {run.id for run in listed.values() if run.id in primary and variants[run.id].target.icount}
    out = {}
    for run_id, (metric, unit, direction) in primary.items():
        found = values.get((run_id, metric))
        if found:
            out[run_id] = (metric, unit, figure_of(found, direction, metric, unit, run_id in icount))
    return out


_PRIMARY_CACHE: dict[str, tuple[str, str, int] | None] = {}


def _primary_metric(benchmark: str, job: dict | None) -> tuple[str, str, int] | None:
    """(name, unit, direction) of the first metric a family's job records; None when it cannot be told."""
    import json

    from perflab import benchmarks, jobs

    if benchmark not in benchmarks.FAMILIES or not job:
        return None
    key = json.dumps(job, sort_keys=True, default=str)
    if key not in _PRIMARY_CACHE:
        try:
            atomic = jobs.resolve(job)
            first = next(iter(atomic.family.metrics(atomic.parsed).values()), None)
            _PRIMARY_CACHE[key] = (first.name, first.unit, first.direction) if first is not None else None
        except (PerflabError, ValueError):
            _PRIMARY_CACHE[key] = None    # a job stored by an older perflab that no longer validates
    return _PRIMARY_CACHE[key]


@click.command("runs")
@click.option("--benchmark", "-b", help="Benchmark family or run name.")
@click.option("--tag", "-t", help="Only runs with this tag.")
@click.option("--box", help="Only runs on this testbox.")
@click.option("--since", help="Only runs started since a date (YYYY-MM-DD) or an age (3d, 12h).")
@click.option("--status", type=click.Choice(["running", "finished", "partial", "failed", "interrupted"]))
@db_option
def runs_cmd(benchmark, tag, box, since, status, db) -> None:
    """List runs with their status, testbox, tag and commit.

    \b
    Example:
      perflab runs --tag v6.8 --since 7d
    """
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    since_time = parse_since(since)
    store = get_store(db, reading=True)
    rows = store.find_runs(benchmark=benchmark, tag=tag, box=box, since=since_time, status=status)
    note = "" if rows else _nothing_matched(store, benchmark, bool(benchmark or tag or box or since or status))
    counts = store.sample_counts([r.id for r in rows])
    table = Table(box=None, pad_edge=False, header_style="bold")
    for col in ("id", "started", "status", "testbox", "benchmark", "tag", "commit", "samples", "name"):
        table.add_column(col, justify="right" if col in ("id", "samples") else "left", overflow="fold")
    for r in rows:
        # Text, not str: rich would read "[...]" in a tag as markup.
        table.add_row(str(r.id), local_time(r.started), r.status, *(Text(printable(v)) for v in (r.box, r.benchmark, r.tag)),
                      Text(_commit(r)), str(counts.get(r.id, 0)), Text(printable(r.name)))
    Console(width=200).print(table)
    if note:
        click.echo(note, err=True)


@click.command("show")
@click.argument("run_id")
@click.option("--monitors", "with_monitors", is_flag=True, help="Also list every monitor metric's samples.")
@db_option
def show_cmd(run_id, with_monitors, db) -> None:
    """Every sample of a run and its summary (n, figure, median, stddev, CoV, min, max).

    The figure is the one compare and the reports print: the harmonic mean (hmean) of a
    higher-is-better rate, else the arithmetic mean (mean); its column `of` names which.

    The monitors that ran are listed with their status; their metrics only with --monitors.

    \b
    Example:
      perflab show 42
      perflab show 42 --monitors
    """
    from perflab.monitors import MONITORS, monitor_of
    from perflab.monitors.windows import TEXT, run_windows

    store = get_store(db, reading=True)
    run = store.get_run(run_id)
    from perflab.analysis.run_summary import metric_summaries

    def shown(value) -> str:
        return printable(value, SHOW_LIMIT)

    lines = [
        f"run #{run.id}  {shown(run.benchmark)}: {shown(run.name)}",
        f"  status    {run.status}" + (f" ({shown(run.error)})" if run.error else ""),
        f"  started   {local_time(run.started, '%Y-%m-%d %H:%M:%S')}   finished {local_time(run.finished, '%Y-%m-%d %H:%M:%S')}",
        f"  testbox   {shown(run.box)}   kernel {shown(run.environment.get('kernel_release', 'n/a'))}",
        f"  tag       {shown(run.tag)}   commit {_commit(run)}",
    ]
    if run.environment.get("workdir_fs"):
        # Where the files were read and written: the host's default is not a guest's (issue 44).
        lines.append(f"  workdir   {shown(run.environment['workdir_fs'])} at {shown(run.environment.get('workdir', '?'))}")
    if run.comment:
        lines.append(f"  comment   {shown(run.comment)}")
    if run.params:
        lines.append("  params    " + shown(", ".join(f"{k}={v}" for k, v in run.params.items() if v not in (None, [], {}))))
    guest = (run.job or {}).get("vm") or {}
    if (run.job or {}).get("kernel") and guest:
        # Every word QEMU was given beyond perflab's own, so an imported run hides none (docs/lab.md).
        extra = guest.get("qemu_args") or []
        lines.append(f"  guest     {shown(guest.get('mode'))}, {shown(guest.get('cpus'))} vCPUs, "
                     f"{shown(guest.get('memory'))} MiB, qemu_args "
                     + (shown(" ".join(shlex.quote(str(a)) for a in extra)) if extra else "none")
                     + _boot_shared(run.environment))
    env = run.environment or {}
    if env.get("kernel_build_commands"):
        # A kernel perflab built from a recipe: what decided it, and how a person builds it again.
        lines.append(f"  kernel    built from {shown(env.get('kernel_recipe', '?'))} at "
                     f"{shown(env.get('kernel_recipe_commit', '?')[:12])} with {shown(env.get('kernel_compiler', '?'))}, "
                     f"config {shown(env.get('kernel_built_config_hash', '?'))}; to build it again:")
        lines += [f"            {shown(line)}" for line in str(env["kernel_build_commands"]).splitlines()]
    for f in store.failures([run.id]):
        lines.append(f"  FAILED    {shown(f.item)}: {shown(f.message)}")
    by_metric: dict[str, list] = {}
    hidden: dict[str, int] = {}
    for smp in store.samples([run.id]):
        mon = monitor_of(smp.metric)
        if mon and not with_monitors:
            hidden[mon] = hidden.get(mon, 0) + (smp.metric not in by_metric and smp.repetition == 0)
            continue
        by_metric.setdefault(smp.metric, []).append(smp)
    windows = run_windows(run)
    for name, entry in (run.monitors if isinstance(run.monitors, dict) else {}).items():
        if not isinstance(entry, dict) or not isinstance(entry.get("options", {}), dict):
            lines.append(f"  monitor   {shown(name)}: its record is not readable ({shown(entry)})")
            continue
        options = ", ".join(f"{k}={v}" for k, v in entry.get("options", {}).items())
        text = f"  monitor   {shown(name)} ({shown(options)}): {entry.get('status')}"
        if name in windows and entry.get("status") == "ran":
            text += f", {windows[name].describe()}"    # the window its figures cover (issue 44)
        if hidden.get(name):
            text += f", {hidden[name]} metrics (--monitors lists them)"
        if entry.get("unsupported"):
            text += "; unsupported here: " + shown(", ".join(entry["unsupported"]))
        for error in entry.get("errors", []):
            text += "; " + shown(error)
        lines.append(text)
    if not by_metric:
        lines.append("  (no samples)")
    # The run's figure is the one compare, the mail and the HTML print (stats.descriptive.estimator),
    # named in its own column; the median beside it.
    header = (f"  {'metric':40} {'unit':6} {'n':>4} {'figure':>11} {'of':<5} {'median':>11} {'stddev':>11} {'CoV':>7} "
              f"{'min':>11} {'max':>11}")
    summaries = metric_summaries(by_metric)
    # The monitors' figures apart from the benchmark's own, one table per window they cover (issue 44):
    # figures over different windows are not set side by side.
    tables: dict[str, list[str]] = {}
    for metric in summaries:
        mon = monitor_of(metric)
        tables.setdefault("" if not mon else windows[mon].text if mon in windows else TEXT["process"], []).append(metric)
    for window, metrics in sorted(tables.items(), key=lambda kv: kv[0] != ""):
        lines.append("")
        if window:
            names = sorted({monitor_of(m) for m in metrics}, key=list(MONITORS).index)   # the registry's order
            lines.append(f"  monitor figures over {window}: {', '.join(names)}")
            ticked = [m for m in metrics if monitor_of(m) in windows and windows[monitor_of(m)].guest
                      and windows[monitor_of(m)].is_tick_sampled(m)]
            if ticked:
                lines.append(f"  {', '.join(sorted({m.rsplit('.', 1)[0] + '.*' for m in ticked}))}: "
                             f"{windows[monitor_of(ticked[0])].tick_note}")
        lines.append(header)
        for metric in metrics:
            s, items = summaries[metric], by_metric[metric]
            cov = "-" if s.cov is None or s.cov != s.cov else f"{s.cov * 100:.2f}%"
            lines.append(
                f"  {printable(metric, 80):40} {printable(items[0].unit, 20):6} {s.n:>4} {fmt_num(s.center, 11)} "
                f"{s.estimator:<5} {fmt_num(s.median, 11)} {fmt_num(s.stddev if s.n > 1 else None, 11)} {cov:>7} "
                f"{fmt_num(s.min, 11)} {fmt_num(s.max, 11)}"
            )
    lines += ["", "  samples (repetition: value per metric)"]
    for metric, items in by_metric.items():
        values = " ".join(f"{x.repetition}:{x.value:.6g}" for x in items)
        lines.append(f"  {printable(metric, 80)}: {values}")
    click.echo("\n".join(lines))


@click.command("annotate")
@click.argument("run_id")
@click.argument("text")
@db_option
def annotate_cmd(run_id, text, db) -> None:
    """Attach a comment to a run (shown by `perflab log`).

    \b
    Example:
      perflab annotate 42 "fewer opens: just rewind the spool file"
    """
    store = get_store(db, recording=True)
    run = store.get_run(run_id)
    store.annotate(run.id, text)
    click.echo(f"run #{run.id}: {printable(text, SHOW_LIMIT)}")


COMMANDS = [log_cmd, runs_cmd, show_cmd, annotate_cmd]

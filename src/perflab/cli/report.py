"""`perflab report ...`: summaries in the formats users already read."""

from __future__ import annotations

import os
import socket

import click

from perflab.cli.common import FiniteFloat, db_option, get_store
from perflab.core.errors import PerflabError


@click.group("report")
def report_group() -> None:
    """Print summaries of stored runs.

    \b
    Example:
      perflab report lmbench 6.8-rc1 6.8-rc2
    """


def _label(run) -> str:
    release = (run.environment or {}).get("kernel_release") or "?"
    return f"{release}-{run.tag}" if run.tag else release


@report_group.command("lmbench")
@click.argument("operands", nargs=-1)
@click.option("--box", help="Testbox whose runs to show when no operand is given (default: this host).")
@click.option("--all-boxes", is_flag=True, help="With no operand: every run of every testbox, one row each, by box.")
@db_option
def report_lmbench(operands, box, all_boxes, db) -> None:
    """The LMbench 2.0 summary: one row per run or tag, tables by category.

    Each OPERAND (run id, tag, commit prefix, kernel release or key=value)
    becomes one row, labelled by kernel release plus tag, its figures averaged
    over every sample of its runs; an operand whose runs come from several
    testboxes gives one row per box (boxes are never pooled). With no operand:
    every LMbench run of this testbox, oldest first (--all-boxes: of every box).

    \b
    Example:
      perflab run lmbench --quick --tag gcc-12
      perflab report lmbench gcc-12 gcc-13
    """
    from perflab.benchmarks.lmbench.catalog import FIGURES
    from perflab.report.lmbench import render_summary
    from perflab.analysis.selection import USABLE_STATUSES, select

    store = get_store(db)
    runs = store.find_runs(benchmark="lmbench")
    groups: list[tuple[str, list]] = []
    if operands:
        for operand in operands:
            sel = select(store, operand, runs)
            label = _label(sel.runs[-1])
            if operand.lstrip("#").isdigit():
                label = f"{label} #{sel.runs[0].id}"
            elif sel.runs[-1].tag != operand:
                label = f"{label} ({operand})"
            by_box: dict[str, list] = {}
            for r in sel.runs:
                by_box.setdefault(r.testbox, []).append(r)
            if len(by_box) == 1:
                groups.append((label, sel.runs))
            else:
                # Boxes are never pooled: one row per box, as the LMbench summaries of a lab show them.
                groups += [(f"{b}: {label}", rs) for b, rs in by_box.items()]
    elif all_boxes:
        usable = [r for r in runs if r.status in USABLE_STATUSES]
        if not usable:
            raise PerflabError("no LMbench runs in the store; run `perflab run lmbench --quick` first")
        groups = [(f"{r.testbox}: {_label(r)}", [r]) for r in sorted(usable, key=lambda r: (r.testbox, r.started, r.id))]
    else:
        box = box or socket.gethostname()
        mine = [r for r in runs if r.testbox == box and r.status in USABLE_STATUSES]
        if not mine:
            others = sorted({r.testbox for r in runs})
            hint = f"; boxes with LMbench runs: {', '.join(others)} (use --box)" if others else \
                "; run `perflab run lmbench --quick` first"
            raise PerflabError(f"no LMbench runs of testbox {box!r}{hint}")
        groups = [(_label(r), [r]) for r in mine]
    # One query for every run: the database sums each (run, metric); a row's
    # figure is the mean of all the samples of its runs.
    sums = store.metric_sums([r.id for _, rs in groups for r in rs], FIGURES)
    rows_of: dict[int, list[int]] = {}  # one run may stand in several rows (e.g. its id and its tag)
    for i, (_, rs) in enumerate(groups):
        for r in rs:
            rows_of.setdefault(r.id, []).append(i)
    from perflab.stats.scaling import pooled_means

    means = pooled_means(sums, rows_of, len(groups))
    rows = [(label, row) for (label, _), row in zip(groups, means)]
    click.echo(render_summary(rows), nl=False)


@report_group.command("scaling")
@click.argument("operands", nargs=-1)
@click.option("--test", "tests", multiple=True, metavar="TESTCASE", help="Only these testcases (repeatable).")
@click.option("--box", help="Only runs of this testbox (default: every box; one table per box).")
@click.option("--plot", "plot", type=click.Path(dir_okay=False), metavar="FILE.png",
              help="Also draw the curves (ops/s against tasks, with the linear line) into a PNG or SVG.")
@db_option
def report_scaling(operands, tests, box, plot, db) -> None:
    """Scaling curves of will-it-scale runs: ops/s against tasks, processes and threads.

    One table per testcase, as will-it-scale's runtest.py prints it: for each
    task count the workload (ops/s of all tasks) of processes and of threads,
    the linear line (the 1-task figure times the tasks) and the efficiency.
    OPERANDS (tags, run ids, commits ...) pick the runs; default: all.

    \b
    Example:
      perflab run will-it-scale-scaling.yaml --tag v6.8
      perflab report scaling v6.8 --plot scaling.png
    """
    from perflab.benchmarks.will_it_scale import WORKLOAD
    from perflab.report.scaling import render_scaling
    from perflab.analysis.selection import USABLE_STATUSES, select
    from perflab.stats.scaling import curves

    if plot:
        from perflab.report.plots import check_path

        check_path(plot)
    store = get_store(db)
    runs = [r for r in store.find_runs(benchmark="will-it-scale", box=box) if r.status in USABLE_STATUSES]
    if operands:
        wanted = {r.id for operand in operands for r in select(store, operand, runs).runs}
        runs = [r for r in runs if r.id in wanted]
    if tests:
        runs = [r for r in runs if (r.params or {}).get("test") in tests]
    if not runs:
        raise PerflabError("no will-it-scale runs match" + (f" {' '.join(operands)}" if operands else "")
                           + "; run e.g. `perflab run will-it-scale-scaling.yaml` first")
    key_of = {r.id: (r.params["test"], r.params["mode"], int(r.params["nr_task"])) for r in runs}
    workloads: dict[tuple, list[float]] = {}
    for smp in store.samples(list(key_of)):
        if smp.metric == WORKLOAD:
            workloads.setdefault(key_of[smp.run_id], []).append(smp.value)
    found = curves(workloads)
    click.echo(render_scaling(found), nl=False)
    if plot:
        from perflab.report.scaling import plot_scaling

        plot_scaling(found, plot)
        click.echo(f"plot: {plot}", err=True)


@report_group.command("kernbench")
@click.argument("operands", nargs=-1)
@click.option("--box", help="Testbox whose runs to show when no operand is given (default: this host).")
@db_option
def report_kernbench(operands, box, db) -> None:
    """kernbench's blocks: per load, each figure's mean (std deviation), a column per run or tag.

    One block per load ("Average Half load -j 1 Run (std deviation):"), the
    lines kernbench prints (Elapsed Time, User Time, System Time, Percent CPU,
    Context Switches, Sleeps). Each OPERAND (run id, tag, commit prefix,
    kernel release or key=value) is one column, its figures over every
    sample of its runs; columns after the first carry their %change against
    it (for significance: `perflab compare A B --style kernbench`). With no
    operand: one column per tag of this testbox's kernbench runs.

    \b
    Example:
      perflab run kernbench.yaml --tag v6.8
      perflab report kernbench v6.8 v6.9
    """
    from perflab.report.kernbench import report_columns
    from perflab.analysis.selection import USABLE_STATUSES, select

    store = get_store(db)
    runs = [r for r in store.find_runs(benchmark="kernbench") if r.status in USABLE_STATUSES]
    columns: list[tuple[str, list]] = []
    if operands:
        for operand in operands:
            sel = select(store, operand, runs)
            columns.append((sel.label, sel.runs))
    else:
        box = box or socket.gethostname()
        mine = sorted((r for r in runs if r.testbox == box), key=lambda r: r.id)
        if not mine:
            others = sorted({r.testbox for r in runs})
            hint = f"; boxes with kernbench runs: {', '.join(others)} (use --box)" if others else \
                "; run `perflab run kernbench.yaml` first"
            raise PerflabError(f"no kernbench runs of testbox {box!r}{hint}")
        by_tag: dict[str, list] = {}
        for r in mine:
            by_tag.setdefault(r.tag if r.tag else "(untagged)", []).append(r)
        columns = list(by_tag.items())
    text = report_columns(store, columns)
    if text is None:
        raise PerflabError("the selected kernbench runs hold no samples")
    click.echo(text)


@report_group.command("profile")
@click.argument("base")
@click.argument("head")
@click.option("--benchmark", help="Only runs of this benchmark (family or run name); needed when an operand "
                                  "selects profiled runs of several.")
@click.option("--top", default=20, show_default=True, type=click.IntRange(1, 100000),
              help="How many symbols to show, largest change first.")
@db_option
def report_profile(base, head, benchmark, top, db) -> None:
    """perf-profile shares of BASE and HEAD: the symbols whose share changed most.

    Per symbol: children% and self% of base and head (means over the
    repetitions of the selected runs), the change in percentage points, its
    significance (Welch's t-test over repetitions, FDR-adjusted; "too few
    samples" below 2 repetitions a side), then comm, [k]/[.] and the symbol,
    as `perf report --children` prints them. BASE and HEAD select runs as
    `perflab compare` does (run id, tag, commit prefix, kernel release,
    key=value). The runs need the perf-profile monitor.

    \b
    Example:
      perflab run cmd --runs 3 --monitor perf-profile --tag v1 -- ./bench
      perflab run cmd --runs 3 --monitor perf-profile --tag v2 -- ./bench
      perflab report profile v1 v2 --top 10
    """
    from perflab.monitors.perf import symbols_from_series
    from perflab.analysis.selection import select

    store = get_store(db)
    runs = store.find_runs(benchmark=benchmark) if benchmark else store.find_runs()
    sides = []
    for operand in (base, head):
        sel = select(store, operand, runs)
        reps: dict[tuple[int, int], dict] = {}
        benchmarks: dict[str, int] = {}
        bench_of = {r.id: r.benchmark for r in sel.runs}
        for smp in store.samples(sel.run_ids):
            kind, _, symbol = smp.metric.partition(".cycles-pp.")
            if kind not in ("perf-profile.children", "perf-profile.self") or not symbol:
                continue
            reps.setdefault((smp.run_id, smp.repetition), {})[(kind.rsplit(".", 1)[1], symbol)] = smp.value
            benchmarks[bench_of[smp.run_id]] = benchmarks.get(bench_of[smp.run_id], 0) + 1
        if not reps:
            raise PerflabError(f"operand {operand!r} selects {len(sel.runs)} run(s) ({', '.join('#%d' % r.id for r in sel.runs[:5])}"
                               f"{' ...' if len(sel.runs) > 5 else ''}) but none holds perf-profile data; "
                               "run with `--monitor perf-profile`")
        if len(benchmarks) > 1:
            raise PerflabError(f"operand {operand!r} selects perf-profile data of several benchmarks "
                               f"({', '.join(sorted(benchmarks))}); pick one with --benchmark")
        profiled = sorted({rid for rid, _ in reps})
        sides.append((sel, profiled, [reps[k] for k in sorted(reps)], next(iter(benchmarks))))
    facts: dict[str, tuple[str, str]] = {}
    notes: list[str] = []
    for sel, profiled, _, _ in sides:
        if hasattr(store, "monitor_series"):
            for row in store.monitor_series(profiled, "perf-profile"):
                facts.update(symbols_from_series(row.values or {}))
        for r in sel.runs:
            record = (getattr(r, "monitors", None) or {}).get("perf-profile") or {}
            notes.extend(n for n in record.get("notes", []) if n not in notes)
    (bsel, bruns, brows, bbench), (hsel, hruns, hrows, hbench) = sides
    # scipy is imported only once the operands are known good (a bad one fails fast).
    from perflab.report.profile import render_profile
    from perflab.stats.profile import compare_profiles

    result = compare_profiles(brows, hrows, top=top)

    def label(sel, profiled, rows):
        return (f"{sel.label} ({len(profiled)} run{'s' if len(profiled) != 1 else ''}, "
                f"{len(rows)} repetition{'s' if len(rows) != 1 else ''})")

    header = [f"perf-profile of {bbench}" + (f" (base) and {hbench} (head)" if hbench != bbench else "")
              + f": base {label(bsel, bruns, brows)}, head {label(hsel, hruns, hrows)}", *notes]
    click.echo(render_profile(result, bsel.label, hsel.label, facts, header=header), nl=False)


@report_group.command("html")
@click.argument("operands", nargs=-1)
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=True), metavar="FILE.html",
              help="The file to write (one self-contained page).")
@click.option("--benchmark", "-b", help="Only this benchmark family or run name.")
@click.option("--metric", "metrics", multiple=True, help="Only metrics whose name contains this (repeatable).")
@click.option("--box", help="Only runs on this testbox.")
@click.option("--tag", "-t", help="Only runs with this tag (the trends; operands select the comparison).")
@click.option("--since", help="Only runs started since a date (YYYY-MM-DD) or an age (3d, 12h).")
@click.option("--repo", metavar="PATH", help="Order the trends by the first-parent history of this git repository.")
@click.option("--branch", metavar="B", help="The branch (or revision) of --repo; default its HEAD.")
@click.option("--threshold", type=FiniteFloat(minimum=0), default=1.0, show_default=True, metavar="PCT",
              help="Minimum effect in percent for the comparison (as compare's).")
@click.option("--alpha", type=FiniteFloat(minimum=0, open_min=True), default=0.05, show_default=True,
              help="False-discovery rate of the comparison (as compare's).")
@click.option("--cross-box", is_flag=True, help="Allow operands from different testboxes.")
@click.option("--monitors", type=click.Choice(("changed", "all", "none")), default="changed", show_default=True,
              help="Monitor metrics in the comparison, as compare's: 'changed' shows those that changed "
                   "significantly above the noise floor (with their time series), 'all' every one, 'none' none.")
@click.option("--title", help="The page's title (default: perflab report).")
@db_option
def report_html(operands, output, benchmark, metrics, box, tag, since, repo, branch, threshold, alpha, cross_box,
                monitors, title, db) -> None:
    """One self-contained HTML page with every view: comparison, trends, scaling, distributions.

    With OPERANDS (BASE HEAD [MORE ...], as `perflab compare` takes them) the page
    leads with their comparison (every number of `compare`, sortable, filterable by
    metric and verdict), the environment differences and the monitors that moved,
    and draws the trends of the compared series. Without operands: the trends
    of every series the filters select. Then scaling curves (will-it-scale
    sweeps), distributions (every sample, per operand or per tag), the LMbench
    summary and kernbench blocks when such runs are selected. Scripts, styles
    and data are in the file: it opens offline. An empty selection writes nothing.

    \b
    Examples:
      perflab report html v6.7 v6.8 -o report.html
      perflab report html --benchmark will-it-scale --since 30d -o trends.html
    """
    if alpha >= 1:
        raise click.BadParameter(f"{alpha:g} must be < 1", param_hint="--alpha")
    from perflab.cli.common import parse_since
    from perflab.report import html

    since_time = parse_since(since)
    html.check_writable(output)
    store = get_store(db)
    filters = html.Filters(operands=tuple(operands), benchmark=benchmark, metrics=tuple(metrics), box=box, tag=tag,
                           since=since_time, repo=repo, branch=branch, alpha=alpha, threshold=threshold / 100.0,
                           cross_box=cross_box, monitors=monitors, title=title)
    doc = html.report(store, filters, output)
    size = os.path.getsize(output)
    click.echo(f"report: {output} ({size / 1e6:.1f} MB): {len(doc['runs'])} runs, "
               f"{doc['sample_count']} samples, {len(doc['trends'])} trends"
               + (f", comparison of {len(doc['comparison']['labels'])} operands" if doc.get("comparison") else ""), err=True)

# -- report table: the fio seed's pivot (docs/lab.md) -------------------------------------
_RUN_KEYS = {"box": lambda r: r.testbox, "testbox": lambda r: r.testbox, "tag": lambda r: r.tag or "-",
             "benchmark": lambda r: r.benchmark, "name": lambda r: r.name, "commit": lambda r: (r.commit or "-")[:12]}


def _key_value(run, key: str) -> str | None:
    """A run's value of a pivot key: a run field (box, tag, benchmark, name, commit) or a parameter."""
    if key in _RUN_KEYS:
        return _RUN_KEYS[key](run)
    params = run.params or {}
    return None if key not in params else str(params[key])


@report_group.command("table")
@click.argument("metrics", nargs=-1)
@click.option("--rows", "row_key", required=True, metavar="KEY",
              help="One line per value of this parameter or run field (box, tag, benchmark, name, commit).")
@click.option("--cols", "col_keys", required=True, metavar="KEY[,KEY...]",
              help="One column per combination of these keys, e.g. box,tag.")
@click.option("--benchmark", "-b", help="Only runs of this benchmark family or run name.")
@click.option("--box", "boxes", multiple=True, help="Only runs of this testbox (repeatable).")
@click.option("--tag", "tags", multiple=True, help="Only runs with this tag (repeatable).")
@db_option
def report_table(metrics, row_key, col_keys, benchmark, boxes, tags, db) -> None:
    """A pivot of metric means: lines by --rows, columns by --cols (one table per METRIC,
    every metric of the runs when none is named). Each cell is the mean of every sample
    of the runs that have that line's and that column's values.

    \b
    Example (the fio seed: I/O type x {bare metal, KVM} x {without, with patch}):
      perflab report table --rows rw --cols box,tag fio.read_bw_kib
    """
    from perflab.report.pivot import render_pivot
    from perflab.analysis.selection import USABLE_STATUSES
    from perflab.stats.scaling import pooled_means

    cols = [k.strip() for k in col_keys.split(",") if k.strip()]
    if not cols:
        raise click.BadParameter(f"{col_keys!r}: name one key or more, comma-separated", param_hint="--cols")
    store = get_store(db)
    runs = [r for r in store.find_runs(benchmark=benchmark) if r.status in USABLE_STATUSES
            and (not boxes or r.testbox in boxes) and (not tags or (r.tag or "") in tags)]
    placed = []
    for r in runs:
        row, col = _key_value(r, row_key), tuple(_key_value(r, k) for k in cols)
        if row is not None and None not in col:
            placed.append((r, row, col))
    if not placed:
        raise PerflabError(f"no runs{' of ' + benchmark if benchmark else ''} have both --rows {row_key} and "
                           f"--cols {','.join(cols)} (keys: box, tag, benchmark, name, commit or a parameter)")
    row_values = list(dict.fromkeys(row for _, row, _ in placed))
    # Each key's values in the order the runs first had them (oldest first: "without" before "with").
    first_seen = [{v: i for i, v in enumerate(dict.fromkeys(col[level] for _, _, col in placed))}
                  for level in range(len(cols))]
    col_values = sorted(dict.fromkeys(col for _, _, col in placed),
                        key=lambda col: tuple(first_seen[level][v] for level, v in enumerate(col)))
    cell_index = {cell: i for i, cell in enumerate((row, col) for row in row_values for col in col_values)}
    rows_of = {r.id: [cell_index[(row, col)]] for r, row, col in placed}
    units = _units(store, list(rows_of))
    names = list(metrics) or sorted(units)
    means = pooled_means(store.metric_sums(list(rows_of), names), rows_of, len(cell_index))
    out = []
    for metric in names:
        cells = {cell: means[i][metric] for cell, i in cell_index.items() if metric in means[i]}
        if not cells:
            raise PerflabError(f"metric {metric!r}: no sample in the selected runs; "
                               f"they hold: {', '.join(sorted(units)[:20]) or 'nothing'}")
        out.append(render_pivot(metric, units.get(metric, ""), row_key, cols, row_values, col_values, cells))
    click.echo("\n".join(out), nl=False)


def _units(store, run_ids: list[int]) -> dict[str, str]:
    """metric -> unit of the samples of these runs (one pass over their samples)."""
    units: dict[str, str] = {}
    for smp in store.samples(run_ids):
        units.setdefault(smp.metric, smp.unit)
    return units


COMMANDS = [report_group]

"""`perflab report ...`: summaries in the formats users already read."""

from __future__ import annotations

import os
import socket

import click

from perflab.cli.common import FiniteFloat, db_option, get_store


@click.group("report")
def report_group() -> None:
    """Print summaries of stored runs.

    \b
    Example:
      perflab report lmbench 6.8-rc1 6.8-rc2
    """


@report_group.command("lmbench")
@click.argument("operands", nargs=-1)
@click.option("--box", help="Testbox whose runs to show when no operand is given (default: this host).")
@click.option("--all-boxes", is_flag=True, help="With no operand: every run of every testbox, one row each, by box.")
@db_option
def report_lmbench(operands, box, all_boxes, db) -> None:
    """The LMbench 2.0 summary: one row per run or tag, tables by category.

    Each OPERAND (run id, tag, commit prefix, kernel release or key=value)
    becomes one row, labelled by kernel release plus tag, each figure the median
    of every sample of its runs (as LMbench prints the median of its tries); an operand whose runs come from several
    testboxes gives one row per box (boxes are never pooled). With no operand:
    every LMbench run of this testbox, oldest first (--all-boxes: of every box).

    \b
    Example:
      perflab run lmbench --quick --tag gcc-12
      perflab report lmbench gcc-12 gcc-13
    """
    from perflab.benchmarks.lmbench.view import summary
    from perflab.report.lmbench import render_summary

    view = summary(get_store(db, reading=True), tuple(operands), box or socket.gethostname(), all_boxes)
    click.echo(render_summary(view.rows, icount=view.icount), nl=False)


@report_group.command("scaling")
@click.argument("operands", nargs=-1)
@click.option("--test", "tests", multiple=True, metavar="TESTCASE", help="Only these testcases (repeatable).")
@click.option("--box", help="Only runs of this testbox (default: every box; one table per box).")
@click.option("--plot", "plot", type=click.Path(dir_okay=False), metavar="FILE.png",
              help="Also draw the curves (ops/s against tasks, with the linear line) into a PNG or SVG.")
@click.option("--size", metavar="WxH", help="Size of each panel of --plot in pixels  [default: 1100x520]")
@db_option
def report_scaling(operands, tests, box, plot, size, db) -> None:
    """Scaling curves of will-it-scale runs: ops/s against tasks, processes and threads.

    One table per testcase, as will-it-scale's runtest.py prints it: for each
    task count the workload (ops/s of all tasks) of processes and of threads,
    the linear line (the 1-task figure times the tasks) and the efficiency.
    Each figure is the harmonic mean of the repetitions' workloads.
    OPERANDS (tags, run ids, commits ...) pick the runs, one variant each,
    shown side by side (a table per testcase and mode, with the %change
    against the first) and never pooled; default: one variant per tag.

    \b
    Example:
      perflab run will-it-scale-scaling.yaml --tag v6.8
      perflab report scaling v6.7 v6.8 --plot scaling.png --size 1400x600
    """
    from perflab.report.scaling import parse_size

    pixels = parse_size(size)
    if plot:
        from perflab.report.plots import check_path

        check_path(plot)
    from perflab.benchmarks.will_it_scale.view import scaling
    from perflab.report.scaling import render_scaling

    view = scaling(get_store(db, reading=True), tuple(operands), tuple(tests), box)
    if not view.curves:
        # Runs matched, but none holds the workload figure a curve is drawn from: say so, never print nothing.
        from perflab.benchmarks.will_it_scale import WORKLOAD
        from perflab.core.errors import PerflabError

        raise PerflabError(f"the will-it-scale runs{' of ' + ' '.join(operands) if operands else ''} hold no "
                           f"{WORKLOAD} samples to draw a curve from (runs stored by another tool?)")
    click.echo(render_scaling(view.curves, view.variants), nl=False)
    if plot:
        from perflab.report.scaling import plot_scaling

        plot_scaling(view.curves, plot, view.variants, pixels)
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
    from perflab.benchmarks.kernbench.view import report
    from perflab.report.kernbench import render_report

    view = report(get_store(db, reading=True), tuple(operands), box or socket.gethostname())
    click.echo(render_report(view))


@report_group.command("profile")
@click.argument("base")
@click.argument("head", required=False)
@click.option("--benchmark", help="Only runs of this benchmark (family or run name).")
@click.option("--top", default=20, show_default=True, type=click.IntRange(1, 100000),
              help="How many symbols to show: largest change first, or with one operand largest children%.")
@click.option("--per-op", "per_op", metavar="METRIC",
              help="insn-profile: the benchmark's metric that says what one operation took (a rate or a time "
                   "per operation); default will-it-scale.workload for will-it-scale, else per window.")
@click.option("--sampled", is_flag=True,
              help="Show perf-profile's sampled shares even where the runs also counted instructions (insn-profile).")
@db_option
def report_profile(base, head, benchmark, top, per_op, sampled, db) -> None:
    """perf-profile of BASE alone, or of BASE and HEAD: the symbols whose share changed most.

    One section per testcase (benchmark and parameters): runs of different
    testcases are never pooled; a testcase on one side only is named, not
    compared. Each section says the window its figures cover.

    With one operand: its profile as `perf report --children` lists it, the
    symbols with the largest children% first (means over the repetitions of
    the selected runs), with self%, comm and [k]/[.].

    With two, per symbol: children% and self% of base and head (means over the
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
      perflab report profile v1 --top 10
      perflab report profile v1 v2 --top 10

    Runs in a VM guest with the insn-profile monitor (`--vm icount --monitor
    insn-profile`) are shown as counted instructions instead: per kernel
    function (and [user], user space) the instructions per operation of
    base and head, the change and its part of the benchmark's whole change,
    largest first; the rows add up to the whole. A function renamed between
    the sides (leading underscores, .part.N, .isra.N, .constprop.N, .cold) is
    one row marked "renamed". --sampled shows perf-profile instead where runs
    have both.

    \b
      perflab run will-it-scale --test getppid1 --kernel A --vm icount --monitor insn-profile
      perflab run will-it-scale --test getppid1 --kernel B --vm icount --monitor insn-profile
      perflab report profile kernel=6.1.0-47-amd64 kernel=6.1.0-56-amd64
    """
    from perflab.analysis.views.profile import has_instruction_profile

    store = get_store(db, reading=True)
    if not sampled and has_instruction_profile(store, base, benchmark):
        from perflab.analysis.views.profile import instruction_view
        from perflab.report.profile import render_instructions

        click.echo(render_instructions(instruction_view(store, base, head, benchmark, top, per_op)), nl=False)
        return
    if head is None:
        from perflab.analysis.views.profile import profile_side_view
        from perflab.report.profile import render_profile_side_view

        click.echo(render_profile_side_view(profile_side_view(store, base, benchmark, top)), nl=False)
        return
    from perflab.analysis.views.profile import profile_view

    view = profile_view(store, base, head, benchmark, top)
    from perflab.report.profile import render_profile_view

    click.echo(render_profile_view(view), nl=False)


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
@click.option("--threshold", type=FiniteFloat(minimum=0), default=None, metavar="PCT",
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
    from perflab.analysis.views.page import Filters, build_page
    from perflab.cli.common import parse_since
    from perflab.report import html

    since_time = parse_since(since)
    html.check_writable(output)
    store = get_store(db, reading=True)
    filters = Filters(operands=tuple(operands), benchmark=benchmark, metrics=tuple(metrics), box=box, tag=tag,
                           since=since_time, repo=repo, branch=branch, alpha=alpha, threshold=None if threshold is None else threshold / 100.0,
                           cross_box=cross_box, monitors=monitors, title=title)
    doc = html.report(build_page(store, filters), output)
    size = os.path.getsize(output)
    click.echo(f"report: {output} ({size / 1e6:.1f} MB): {len(doc['runs'])} runs, "
               f"{doc['sample_count']} samples, {len(doc['trends'])} trends"
               + (f", comparison of {len(doc['comparison']['labels'])} operands" if doc.get("comparison") else ""), err=True)

# -- report table: the fio seed's pivot (docs/lab.md) -------------------------------------

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
    from perflab.analysis.views.table import pivots
    from perflab.core.text import printable
    from perflab.report.pivot import render_pivot

    cols = [k.strip() for k in col_keys.split(",") if k.strip()]
    if not cols:
        raise click.BadParameter(f"{col_keys!r}: name one key or more, comma-separated", param_hint="--cols")
    found = pivots(get_store(db, reading=True), tuple(metrics), row_key, cols, benchmark, tuple(boxes), tuple(tags))
    # The notes name keys and values as stored (tags, variants): shown as every view shows them,
    # one line each whatever a tag holds.
    if found and found[0].note:
        click.echo(f"note: {printable(found[0].note, None)}", err=True)
    for p in found:
        if p.left_out:
            click.echo(f"note: {printable(p.left_out, None)}", err=True)
    click.echo("\n".join(render_pivot(p.metric, p.unit, p.row_key, p.col_keys, p.row_values, p.col_values, p.cells)
                         for p in found), nl=False)


COMMANDS = [report_group]

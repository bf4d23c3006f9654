"""`perflab compare BASE HEAD [MORE ...]`: what changed, by how much, and is it real."""

from __future__ import annotations

import click

from perflab.cli.common import FiniteFloat, db_option, get_store
from perflab.report.registry import layout, layout_names, render_comparison

# perflab.stats.exact.EXACT_MIN_EFFECT in percent, written out so that loading the CLI does not
# import numpy (a test checks they agree); and the statistical test's default minimum effect.
EXACT_MIN_EFFECT_PCT, THRESHOLD_PCT = 0.1, 1.0


def show(result, style: str) -> str:
    """A comparison in a layout: its view built with the extras the layout needs
    (perflab.analysis.views), then rendered (perflab.report.registry)."""
    from perflab.analysis.views.comparison import comparison_view

    return render_comparison(comparison_view(result, layout(style).needs), style)


def _below_one(ctx, param, value):
    """--alpha is a probability: FiniteFloat bounds it below, this above."""
    if value is not None and value >= 1:
        raise click.BadParameter(f"{value:g} must be < 1", ctx=ctx, param=param)
    return value


@click.command("compare")
@click.argument("operands", nargs=-1, required=True)
@click.option("--style", "-s", type=click.Choice(layout_names()), default="lkp", show_default=True, help="Output layout.")
@click.option("--threshold", type=FiniteFloat(minimum=0), default=None, metavar="PCT",
              help=f"Minimum effect in percent: smaller changes are never called. Default {THRESHOLD_PCT:g} for "
                   f"metrics tested statistically, {EXACT_MIN_EFFECT_PCT:g} for exact metrics (instruction counts, "
                   "icount instruction-time, samples that agree to 0.2%), which are also called only beyond 3 "
                   "times their resolution (docs/statistics.md, Exact metrics).")
@click.option("--alpha", type=FiniteFloat(minimum=0, open_min=True), default=0.05, callback=_below_one,
              show_default=True, help="False-discovery rate over the metrics of one FDR family (0 < alpha < 1).")
@click.option("--benchmark", "-b", help="Only this benchmark family or run name.")
@click.option("--metric", "metrics", multiple=True, help="Only metrics whose name contains this (repeatable).")
@click.option("--primary", "primary", multiple=True, metavar="GLOB",
              help="Metrics (shell glob on the name, repeatable) that form the primary FDR family; the others are "
                   "secondary, tested in a family of their own. Default: every metric but the resource figures "
                   "of a command (time.user_time, time.system_time, time.maximum_resident_set_size, time.exit_status).")
@click.option("--cross-box", is_flag=True, help="Allow operands from different testboxes (environment differences are printed).")
@click.option("--monitors", type=click.Choice(("changed", "all", "none")), default="changed", show_default=True,
              help="Monitor metrics (vmstat.*, proc-vmstat.*, perf-stat.*, perf-profile.* ...), an FDR family of "
                   "their own (two-sided, minimum effect 5%): 'changed' shows those that changed significantly "
                   "and are above the noise floor "
                   "(perf-profile shares from 5%, counters from 1/s or 100 events), grouped by monitor; 'all' shows "
                   "every one; 'none' leaves them out before any statistics. Every text style follows it; json and "
                   "csv carry every row kept, each with its 'monitor'.")
@click.option("--fail-on-regression", is_flag=True,
              help="Exit with status 1 when any of the benchmark's own metrics regressed significantly "
                   "(monitor metrics never count: see --fail-on).")
@click.option("--fail-on", "fail_on", multiple=True, metavar="GLOB",
              help="Exit with status 1 when a metric matching GLOB (shell glob on the name, repeatable, monitor "
                   "metrics included) changed significantly: a regression for a directional metric; for a monitor "
                   "or informational metric, whose harmful direction is unknown, a significant change either way "
                   "(for monitors, one the 'changed' view shows). A GLOB matching no metric is an error (status 2).")
@click.option("--plot", type=click.Path(dir_okay=False), metavar="FILE.png",
              help="Also draw each metric's %change with its interval, coloured by verdict, into a PNG or SVG.")
@click.option("--size", metavar="WxH", help="Size of the --plot picture in pixels (default: 1400 wide).")
@db_option
def compare_cmd(operands, style, threshold, alpha, benchmark, metrics, primary, cross_box, monitors,
                fail_on_regression, fail_on, db, plot=None, size=None) -> None:
    """Compare a base with one or more heads, metric by metric.

    Each operand selects runs by run id, tag, commit prefix, kernel release, or
    key=value[,key=value] on run fields (tag, commit, box, benchmark, name), parameters or
    environment facts. Groups are matched on (testbox, benchmark, params, metric); each head
    is compared with the first operand. The false-discovery rate is controlled over the
    primary metrics of each head's comparison; secondary metrics form a family of their own
    (see --primary), the monitors' metrics a third (see --monitors), and every layout says
    how many metrics each family holds.

    \b
    Examples:
      perflab compare v6.7 v6.8
      perflab compare d55f3441 0355322b --style mmtests --threshold 2
      perflab compare base head --fail-on-regression --style benchstat
      perflab compare base head --primary 'time.elapsed_time' --primary 'app.*'
      perflab compare base head --monitors all
      perflab compare base head --fail-on-regression --fail-on 'perf-profile.self.*osq_lock'
      perflab compare v6.7 v6.8 --plot changes.png
    """
    if plot:
        from perflab.report.plots import check_path

        from perflab.report.scaling import parse_size

        pixels = parse_size(size) if size else None
        check_path(plot)   # before any work (and before numpy and scipy are imported)
    from perflab.analysis.comparison import compare
    from perflab.report.numbers import percent
    from perflab.core.text import printable

    store = get_store(db, reading=True)   # runs and samples only: perflab.store.reader
    exact_pct = EXACT_MIN_EFFECT_PCT if threshold is None else threshold
    threshold = THRESHOLD_PCT if threshold is None else threshold
    result = compare(store, list(operands), alpha=alpha, threshold=threshold / 100.0, cross_box=cross_box,
                     exact_threshold=exact_pct / 100.0,
                     benchmark=benchmark, metrics=list(metrics) or None, primary=list(primary) or None,
                     monitors=monitors, fail_on=list(fail_on) or None)
    click.echo(show(result, style), nl=False)
    if style not in ("json", "csv"):
        from perflab.analysis.change_kinds import kinds

        # A footnote: the kind of each timed change whose commits were also counted (docs/statistics.md).
        for found in kinds(store, result):
            runs = ", ".join(str(i) for i in found.runs[0] + found.runs[1])
            click.echo(f"kind of change, {printable(found.metric)} ({printable(found.head)}): "
                       f"{printable(found.kind.sentence, None)} [counted runs {runs}]")
    if plot:
        from perflab.report.plots import plot_comparison

        plot_comparison(result, plot, pixels)
        click.echo(f"plot: {plot}", err=True)
    failed = fail_on_regression and result.regressions_found
    if fail_on:
        hits = result.fail_on(list(fail_on))
        for label, row, cmp in hits:
            click.echo(f"perflab: --fail-on: {printable(row.metric)} {cmp.verdict} {percent(cmp.pct_change)} "
                       f"({printable(label)} vs {printable(result.labels[0])})", err=True)
        failed = failed or bool(hits)
    if failed:
        raise click.exceptions.Exit(1)


COMMANDS = [compare_cmd]

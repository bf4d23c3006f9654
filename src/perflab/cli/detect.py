"""`perflab detect`: where the level of a series changed, over commits or over time."""

from __future__ import annotations

import click

from perflab.cli.common import FiniteFloat, db_option, get_store, parse_since

# perflab.stats.changepoints' ALPHA, MIN_SIZE and MIN_EFFECT (in percent), and perflab.stats.exact's
# EXACT_MIN_EFFECT (in percent), written out so that loading the CLI does not import numpy and scipy
# for every other command (a test checks they agree).
ALPHA, MIN_POINTS, THRESHOLD_PCT, EXACT_MIN_EFFECT_PCT = 0.001, 3, 1.0, 0.1


def _below_one(ctx, param, value):
    if value is not None and value >= 1:
        raise click.BadParameter(f"{value:g} must be < 1", ctx=ctx, param=param)
    return value


@click.command("detect")
@click.option("--benchmark", "-b", help="Only this benchmark family or run name.")
@click.option("--metric", "-m", "metrics", multiple=True, metavar="GLOB",
              help="Only metrics matching this shell glob (repeatable). Default: every metric but the monitors'.")
@click.option("--box", help="Only runs on this testbox.")
@click.option("--tag", "-t", help="Only runs with this tag.")
@click.option("--since", help="Only runs started since a date (YYYY-MM-DD) or an age (3d, 12h).")
@click.option("--repo", metavar="PATH", help="Order runs by the first-parent history of a branch of this git "
              "repository (runs at commits not on it are skipped and listed). Default: by run start time.")
@click.option("--branch", metavar="B", help="The branch (or revision) of --repo; default its HEAD.")
@click.option("--order", type=click.Choice(["kernel", "commit", "time"]), default=None,
              help="What orders the points: kernel releases in version order (the runs of one kernel one point), "
                   "commits (needs --repo) or run start time. Default: commits with --repo; else kernel releases "
                   "for a series of guest runs (vm) that measured several; else time.")
@click.option("--style", "-s", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--alpha", type=FiniteFloat(minimum=0, open_min=True), default=ALPHA, callback=_below_one,
              show_default=True, help="Level of the test that confirms each change point (two-sided, adjusted for the "
                   "positions the change could have taken).")
@click.option("--min-points", type=click.IntRange(min=1), default=MIN_POINTS, show_default=True,
              help="Shortest level, in points: a shorter excursion is a spike, not a change.")
@click.option("--threshold", type=FiniteFloat(minimum=0), default=None, metavar="PCT",
              help=f"Minimum change in percent: smaller level changes are never called. Default {THRESHOLD_PCT:g}; "
                   f"{EXACT_MIN_EFFECT_PCT:g} for exact series (instruction counts, icount instruction-time), "
                   "which are split where the level moves by more than 3 times their resolution.")
@click.option("--plot", type=click.Path(dir_okay=False), metavar="FILE.png",
              help="Also draw the series with change points (points, levels, change points) into a PNG or SVG, "
                   "against commits (--repo) or run ids.")
@click.option("--top", type=click.IntRange(min=1), metavar="N",
              help="With --plot: draw N series, those with change points first (largest change first), then the "
                   "ones that could see the smallest change.")
@click.option("--verbose", "-v", is_flag=True,
              help="List every series without a change point too (default: one summary line for them).")
@click.option("--size", metavar="WxH", help="Size of the --plot picture in pixels (default: 1400 wide).")
@db_option
def detect_cmd(benchmark, metrics, box, tag, since, repo, branch, order, style, alpha, min_points, threshold, db,
               plot=None, top=None, verbose=False, size=None) -> None:
    """Find where the level of each series changed: regressions and improvements in history.

    A series is the samples of one (testbox, benchmark, params, metric); each run is a
    point (its samples' mean; an exact series' point its undisturbed sample). With --repo the
    points follow the first-parent history of the branch (the runs of one commit are one
    point); a series of guest runs that measured several kernels follows kernel version order (the
    runs of one kernel are one point, named by its release); otherwise run start time. A change
    point is reported with its position, the change with its 95% interval, the level
    (mean ± stddev) before and after, the p-value, and the smallest change the points
    either side could detect with 90% power. An excursion of fewer than --min-points runs is a spike,
    never a change point.

    \b
    Examples:
      perflab detect
      perflab detect --benchmark will-it-scale --metric '*per_process_ops' --since 30d
      perflab detect --repo ~/linux --branch master --style json
      perflab detect --benchmark will-it-scale --order kernel
      perflab detect --benchmark will-it-scale --plot history.svg --top 4
      perflab detect --verbose
    """
    if top and not plot:
        raise click.UsageError("--top needs --plot: it says how many series to draw")
    if plot:
        from perflab.report.plots import check_path

        from perflab.report.scaling import parse_size

        pixels = parse_size(size) if size else None
        check_path(plot)   # before any work (and before numpy and scipy are imported)
    from perflab.analysis.views.detect import detect_view
    from perflab.report.detect import STYLES

    since_time = parse_since(since)
    view = detect_view(get_store(db, reading=True), benchmark=benchmark, metrics=metrics, box=box, tag=tag, since=since_time,
                       repo=repo, branch=branch, order=order, alpha=alpha, min_points=min_points,
                       min_effect=(THRESHOLD_PCT if threshold is None else threshold) / 100,
                       exact_min_effect=(EXACT_MIN_EFFECT_PCT if threshold is None else threshold) / 100)
    history, results = view.history, view.results
    click.echo(STYLES[style](history, results, alpha, min_points, verbose))
    if plot:
        from perflab.analysis.views.detect import series_to_plot

        shown = series_to_plot(results, top)
        if shown:
            from perflab.report.detect import series_name
            from perflab.report.detect_plot import plot_detect

            plot_detect(history, shown, len(results), plot, series_name, pixels)
            click.echo(f"plot: {plot} ({len(shown)} of {len(results)} series)", err=True)
        else:
            click.echo(f"plot: no series with a change point (--top N draws N anyway), {plot} not written", err=True)
    if not history.series:
        click.echo("(no series: no usable run matches these filters)" if not history.skipped
                   else "(no series: every matching run was skipped)", err=True)


COMMANDS = [detect_cmd]

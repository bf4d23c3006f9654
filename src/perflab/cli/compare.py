"""`perflab compare BASE HEAD [MORE ...]`: what changed, by how much, and is it real."""

from __future__ import annotations

import click

from perflab.cli.common import db_option, get_store

STYLES = ("lkp", "mmtests", "lmbench", "kernbench", "benchstat", "json", "csv")


@click.command("compare")
@click.argument("operands", nargs=-1, required=True)
@click.option("--style", "-s", type=click.Choice(STYLES), default="lkp", show_default=True, help="Output layout.")
@click.option("--threshold", type=click.FloatRange(min=0), default=1.0, show_default=True, metavar="PCT",
              help="Minimum effect in percent: smaller changes are never called.")
@click.option("--alpha", type=click.FloatRange(min=0, max=1, min_open=True, max_open=True), default=0.05,
              show_default=True, help="False-discovery rate over all metrics of one comparison.")
@click.option("--benchmark", "-b", help="Only this benchmark family or run name.")
@click.option("--metric", "metrics", multiple=True, help="Only metrics whose name contains this (repeatable).")
@click.option("--cross-box", is_flag=True, help="Allow operands from different testboxes (environment differences are printed).")
@click.option("--fail-on-regression", is_flag=True, help="Exit with status 1 when any significant regression is found.")
@db_option
def compare_cmd(operands, style, threshold, alpha, benchmark, metrics, cross_box, fail_on_regression, db) -> None:
    """Compare a base with one or more heads, metric by metric.

    Each operand selects runs by run id, tag, commit prefix, kernel release, or
    key=value[,key=value] on run fields (tag, commit, box, benchmark, name), parameters or
    environment facts. Groups are matched on (testbox, benchmark, params, metric); each head
    is compared with the first operand.

    \b
    Examples:
      perflab compare v6.7 v6.8
      perflab compare d55f3441 0355322b --style mmtests --threshold 2
      perflab compare base head --fail-on-regression --style benchstat
    """
    from perflab.comparison import compare
    from perflab.report.registry import render_comparison

    store = get_store(db)
    result = compare(store, list(operands), alpha=alpha, threshold=threshold / 100.0, cross_box=cross_box,
                     benchmark=benchmark, metrics=list(metrics) or None)
    click.echo(render_comparison(result, style), nl=False)
    if fail_on_regression and result.regressions_found:
        raise click.exceptions.Exit(1)


COMMANDS = [compare_cmd]

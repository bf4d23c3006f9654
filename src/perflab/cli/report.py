"""`perflab report ...`: summaries in the formats users already read."""

from __future__ import annotations

import socket

import click

from perflab.cli.common import db_option, get_store
from perflab.errors import PerflabError


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
@db_option
def report_lmbench(operands, box, db) -> None:
    """The LMbench 2.0 summary: one row per run or tag, tables by category.

    Each OPERAND (run id, tag, commit prefix, kernel release or key=value)
    becomes one row, labelled by kernel release plus tag, its figures averaged
    over every sample of its runs. With no operand: every LMbench run of this
    testbox, oldest first.

    \b
    Example:
      perflab run lmbench --quick --tag gcc-12
      perflab report lmbench gcc-12 gcc-13
    """
    from perflab.benchmarks.lmbench.catalog import FIGURES
    from perflab.report.lmbench import render_summary
    from perflab.selection import USABLE_STATUSES, select

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
            groups.append((label, sel.runs))
    else:
        box = box or socket.gethostname()
        mine = [r for r in runs if r.testbox == box and r.status in USABLE_STATUSES]
        if not mine:
            others = sorted({r.testbox for r in runs})
            hint = f"; boxes with LMbench runs: {', '.join(others)} (use --box)" if others else \
                "; run `perflab run lmbench --quick` first"
            raise PerflabError(f"no LMbench runs of testbox {box!r}{hint}")
        groups = [(_label(r), [r]) for r in mine]
    # One query for every run: the database averages each (run, metric).
    ids = [r.id for _, rs in groups for r in rs]
    means = store.metric_means(ids, FIGURES)
    counts = store.metric_counts(ids, FIGURES) if len(ids) != len(groups) else None
    rows = []
    for label, rs in groups:
        values: dict[str, float] = {}
        for metric in FIGURES:
            if counts is None or len(rs) == 1:
                v = means.get((rs[0].id, metric))
                if v is not None:
                    values[metric] = v
                continue
            # A tag of several runs: the mean of all their samples.
            total = n = 0
            for r in rs:
                if (r.id, metric) in means:
                    c = counts[(r.id, metric)]
                    total += means[(r.id, metric)] * c
                    n += c
            if n:
                values[metric] = total / n
        rows.append((label, values))
    click.echo(render_summary(rows), nl=False)


COMMANDS = [report_group]

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
    # One query for every run: the database sums each (run, metric); a row's
    # figure is the mean of all the samples of its runs.
    sums = store.metric_sums([r.id for _, rs in groups for r in rs], FIGURES)
    rows_of: dict[int, list[int]] = {}  # one run may stand in several rows (e.g. its id and its tag)
    for i, (_, rs) in enumerate(groups):
        for r in rs:
            rows_of.setdefault(r.id, []).append(i)
    pooled: list[dict[str, list[float]]] = [{} for _ in groups]
    for (run_id, metric), (total, n) in sums.items():
        for i in rows_of[run_id]:
            acc = pooled[i].setdefault(metric, [0.0, 0])
            acc[0] += total
            acc[1] += n
    rows = [(label, {m: t / n for m, (t, n) in acc.items()}) for (label, _), acc in zip(groups, pooled)]
    click.echo(render_summary(rows), nl=False)


COMMANDS = [report_group]

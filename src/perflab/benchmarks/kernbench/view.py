"""kernbench's view hook: its "Average Half load -j 8 Run (std deviation)" blocks, for
`perflab report kernbench`, the kernbench section of `report html` and the kernbench
layout of `compare` (which rows go in which block).

The only place of the read side that knows kernbench's parameter names (load, jobs,
generator). Part of the read side (perflab.analysis.views finds it by the family's name);
report.kernbench formats it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from perflab.core.errors import PerflabError

PAGE_ORDER = 2           # report html: the last family section
PAGE_SECTION = "kernbench"
KERNBENCH = "kernbench"
# kernbench's own lines, in its order.
KERNBENCH_NAMES = {
    "kernbench.elapsed_time": "Elapsed Time",
    "kernbench.user_time": "User Time",
    "kernbench.system_time": "System Time",
    "kernbench.percent_cpu": "Percent CPU",
    "kernbench.context_switches": "Context Switches",
    "kernbench.sleeps": "Sleeps",
}
ORDER = list(KERNBENCH_NAMES)
LOAD_NAMES = {"half": "Half load", "optimal": "Optimal load"}
# Parameters that name the load itself (the block's title), or only the generator's revision.
TITLE_PARAMS = ("load", "jobs", "generator")


@dataclass
class KernbenchView:
    """`perflab report kernbench`: a column per label; stats.kernbench Blocks keyed
    ((rank, jobs, title), rest key), sorted; rests: that key -> the block's other parameters."""

    labels: list[str]
    blocks: list
    rests: dict[tuple, dict]


@dataclass
class BlockGroup:
    """compare --style kernbench: the rows of one block, in kernbench's line order."""

    title: str
    rest: dict      # the other parameters (and the testbox) of the block
    rows: list      # MetricRows


def block_of(params: dict) -> tuple[tuple, dict]:
    """(sort key and title, the other parameters) of a kernbench run's parameters."""
    load, jobs = params.get("load"), params.get("jobs")
    rank = {"half": 0, "optimal": 1}.get(load, 2)
    title = f"{LOAD_NAMES.get(load, 'Load')} -j {jobs}" if jobs is not None else "Load -j ?"
    rest = {k: v for k, v in params.items() if k not in TITLE_PARAMS and v is not None}
    return (rank, jobs if isinstance(jobs, int) else 0, title), rest


def compared_blocks(rows: list) -> list[BlockGroup]:
    """A comparison's kernbench rows grouped by load, block by block (sorted as kernbench prints them)."""
    groups: dict[tuple, list] = {}
    rests: dict[tuple, dict] = {}
    for r in rows:
        key, rest = block_of(r.params)
        full = (key, r.box or "", json.dumps(rest, sort_keys=True, default=str))
        groups.setdefault(full, []).append(r)
        rests[full] = {**rest, **({"testbox": r.box} if r.box else {})}
    return [BlockGroup(full[0][2], rests[full],
                       sorted(groups[full], key=lambda r: (ORDER.index(r.metric) if r.metric in ORDER else len(ORDER),
                                                           r.metric)))
            for full in sorted(groups)]


def columns_view(store, columns: list[tuple[str, list]]) -> KernbenchView | None:
    """Columns (label, runs): every sample of each column's runs, grouped into stats.kernbench's
    blocks by load (block_of); None when the runs hold no kernbench samples."""
    from perflab.analysis.selection import params_key, variants_apart
    from perflab.stats.kernbench import blocks

    columns = variants_apart(columns)      # a column per variant of each: kernels never averaged together
    key_of, rests = {}, {}
    for _, rs in columns:
        for r in rs:
            title, rest = block_of(json.loads(params_key(r.params, KERNBENCH)))
            key = (title, json.dumps(rest, sort_keys=True, default=str))
            key_of[r.id], rests[key] = key, rest
    values: list[dict] = [{} for _ in columns]
    column_of: dict[int, list[int]] = {}
    for i, (_, rs) in enumerate(columns):
        for r in rs:
            column_of.setdefault(r.id, []).append(i)
    for smp in store.samples(list(column_of)):
        for i in column_of[smp.run_id]:
            values[i].setdefault(key_of[smp.run_id], {}).setdefault(smp.metric, []).append(smp.value)
    found = sorted(blocks(values, ORDER), key=lambda b: b.key)
    return KernbenchView([label for label, _ in columns], found, rests) if found else None


def report(store, operands: tuple[str, ...], box: str) -> KernbenchView:
    """`perflab report kernbench`: a column per operand, or per tag of `box`'s kernbench runs."""
    from perflab.analysis.selection import USABLE_STATUSES, select

    runs = [r for r in store.find_runs(benchmark=KERNBENCH) if r.status in USABLE_STATUSES]
    columns: list[tuple[str, list]] = []
    if operands:
        for operand in operands:
            sel = select(store, operand, runs)
            columns.append((sel.label, sel.runs))
    else:
        mine = sorted((r for r in runs if r.box == box), key=lambda r: r.id)
        if not mine:
            others = sorted({r.box for r in runs})
            hint = f"; boxes with kernbench runs: {', '.join(others)} (use --box)" if others else \
                "; run `perflab run kernbench.yaml` first"
            raise PerflabError(f"no kernbench runs of testbox {box!r}{hint}")
        by_tag: dict[str, list] = {}
        for r in mine:
            by_tag.setdefault(r.tag if r.tag else "(untagged)", []).append(r)
        columns = list(by_tag.items())
    view = columns_view(store, columns)
    if view is None:
        raise PerflabError("the selected kernbench runs hold no samples")
    return view


def page_section(store, chosen, runs, notes: list[str]) -> KernbenchView | None:
    """report html's kernbench blocks: a column per operand (chosen: (label, runs)), or per tag."""
    if chosen is not None:
        columns = [(label, [r for r in rs if r.benchmark == KERNBENCH]) for label, rs in chosen]
        columns = [(label, rs) for label, rs in columns if rs]
    else:
        by_tag: dict[str, list] = {}
        for r in runs:
            if r.benchmark == KERNBENCH:
                by_tag.setdefault(r.tag or "(untagged)", []).append(r)
        columns = list(by_tag.items())
    return columns_view(store, columns) if columns else None

"""will-it-scale's view hook: scaling curves (ops/s against tasks, processes and threads) for
`perflab report scaling` and the scaling section of `report html`.

The only place of the read side that knows will-it-scale's parameter names (test, mode,
nr_task). Part of the read side (perflab.analysis.views finds it by the family's name);
report.scaling and report.html format it.
"""

from __future__ import annotations

from dataclasses import dataclass

from perflab.core.errors import PerflabError

PAGE_ORDER = 0           # report html: the first family section
PAGE_SECTION = "scaling"
BENCHMARK = "will-it-scale"
KEYS = ("test", "mode", "nr_task")


@dataclass
class ScalingView:
    """stats.scaling Curves: one per (testcase, mode), points by task count."""

    curves: list


def _curves(store, key_of: dict[int, tuple[str, str, int]]) -> list:
    # Imported here: stats.scaling needs scipy.stats, a second of start-up.
    from perflab.benchmarks.will_it_scale import WORKLOAD
    from perflab.stats.scaling import curves

    workloads: dict[tuple, list[float]] = {}
    for smp in store.samples(list(key_of)):
        if smp.metric == WORKLOAD:
            workloads.setdefault(key_of[smp.run_id], []).append(smp.value)
    return curves(workloads)


def scaling(store, operands: tuple[str, ...], tests: tuple[str, ...], box: str | None) -> ScalingView:
    """`perflab report scaling`: the usable runs (of `box`), those the operands select, of `tests`."""
    from perflab.analysis.selection import USABLE_STATUSES, select

    runs = [r for r in store.find_runs(benchmark=BENCHMARK, box=box) if r.status in USABLE_STATUSES]
    if operands:
        wanted = {r.id for operand in operands for r in select(store, operand, runs).runs}
        runs = [r for r in runs if r.id in wanted]
    if tests:
        runs = [r for r in runs if (r.params or {}).get("test") in tests]
    if not runs:
        raise PerflabError("no will-it-scale runs match" + (f" {' '.join(operands)}" if operands else "")
                           + "; run e.g. `perflab run will-it-scale-scaling.yaml` first")
    key_of = {r.id: (r.params["test"], r.params["mode"], int(r.params["nr_task"])) for r in runs}
    return ScalingView(_curves(store, key_of))


def page_section(store, chosen, runs, notes: list[str]) -> ScalingView | None:
    """report html's scaling curves: of the compared runs (chosen), or of every run of the page."""
    if chosen is not None:
        runs = [r for _, rs in chosen for r in rs]
    key_of = {}
    for r in runs:
        p = r.params or {}
        if r.benchmark == BENCHMARK and set(KEYS) <= set(p):
            try:
                key_of[r.id] = (str(p["test"]), str(p["mode"]), int(p["nr_task"]))
            except (TypeError, ValueError):
                continue
    return ScalingView(_curves(store, key_of)) if key_of else None

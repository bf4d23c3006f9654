"""will-it-scale's view hook: scaling curves (ops/s against tasks, processes and threads) for
`perflab report scaling` and the scaling section of `report html`.

The only place of the read side that knows will-it-scale's parameter names (test, mode,
nr_task). Part of the read side (perflab.analysis.views finds it by the family's name);
report.scaling and report.html format it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from perflab.core.errors import PerflabError

PAGE_ORDER = 0           # report html: the first family section
PAGE_SECTION = "scaling"
BENCHMARK = "will-it-scale"
KEYS = ("test", "mode", "nr_task")


@dataclass
class ScalingView:
    """stats.scaling Curves: one per (variant, testcase, mode), points by task count; variants[i]
    is the operand (or tag) of curves[i]: variants are drawn side by side, never pooled."""

    curves: list
    variants: list[str] = field(default_factory=list)


def _by_variant(store, groups: list[tuple[str, dict]]) -> ScalingView:
    """One set of curves per (label, {run id: key}): samples pool only within a variant."""
    view = ScalingView([], [])
    for label, key_of in groups:
        found = _curves(store, key_of) if key_of else []
        view.curves += found
        view.variants += [label] * len(found)
    return view


def _by_tag(runs) -> list[tuple[str, list]]:
    tags: dict[str, list] = {}
    for r in runs:
        tags.setdefault(r.tag or "(untagged)", []).append(r)
    return list(tags.items())


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
    from perflab.analysis.selection import USABLE_STATUSES, select, variants_apart

    runs = [r for r in store.find_runs(benchmark=BENCHMARK, box=box) if r.status in USABLE_STATUSES]
    if tests:
        runs = [r for r in runs if (r.params or {}).get("test") in tests]
    # One variant per operand (per tag without operands): a curve pools only the runs of one.
    groups = variants_apart([(op, select(store, op, runs).runs) for op in operands] if operands else _by_tag(runs))
    if not any(rs for _, rs in groups):
        raise PerflabError("no will-it-scale runs match" + (f" {' '.join(operands)}" if operands else "")
                           + "; run e.g. `perflab run will-it-scale-scaling.yaml` first")
    return _by_variant(store, [(label, {r.id: (r.params["test"], r.params["mode"], int(r.params["nr_task"]))
                                        for r in rs}) for label, rs in groups])


def page_section(store, chosen, runs, notes: list[str]) -> ScalingView | None:
    """report html's scaling curves: of the compared runs (chosen), or of every run of the page."""
    from perflab.analysis.selection import variants_apart

    groups = []
    for label, rs in variants_apart(chosen if chosen is not None else _by_tag(runs)):
        key_of = {}
        for r in rs:
            p = r.params or {}
            if r.benchmark == BENCHMARK and set(KEYS) <= set(p):
                try:
                    key_of[r.id] = (str(p["test"]), str(p["mode"]), int(p["nr_task"]))
                except (TypeError, ValueError):
                    continue
        groups.append((label, key_of))
    view = _by_variant(store, groups)
    return view if view.curves else None

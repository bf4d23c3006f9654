"""The kind of each timed change a comparison calls, from counted runs already in the store.

When both sides of a comparison are one commit each, and the store holds runs of the
same benchmark at those commits that counted instead of timing (`measure: instructions`:
valgrind.instructions; a guest under icount: the metric itself as instruction-time),
each significant change of a timed metric is labelled (perflab.stats.change_kind): *code
path* or *timing only*. Nothing is measured here: `perflab series`, `perflab bisect --kind`
and the robot make those runs (automate.change_kind), or a user runs the job so. The
third label, *not reproduced*, needs the two sides timed again and is theirs to give.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from perflab.analysis import variant
from perflab.analysis.comparison import ComparisonResult
from perflab.core.model import LOWER_IS_BETTER
from perflab.stats.change_kind import ChangeKind, classify
from perflab.stats.compare import IMPROVEMENT, PRIMARY, REGRESSION

VALGRIND = "valgrind.instructions"


@dataclass(frozen=True)
class RowKind:
    head: str           # the head operand's label
    metric: str
    kind: ChangeKind
    runs: tuple[list[int], list[int]]     # the counted runs of base and head


def _commit(runs, benchmark: str) -> str | None:
    commits = {r.commit for r in runs if r.benchmark == benchmark}
    return next(iter(commits)) if len(commits) == 1 and None not in commits else None


def _mode(run) -> tuple[bool, bool]:
    """(counted by valgrind, booted under icount) of a stored run: its job's `measure`, its
    variant's target (analysis.variant: the guest's mode its parameters recorded)."""
    job = run.job if isinstance(run.job, dict) else {}
    return bool(job.get("measure") == "instructions"), variant.of(run).target.icount


def kinds(store, result: ComparisonResult) -> list[RowKind]:
    """The label of every significant change of a timed primary metric both of whose sides have
    counted runs at their commit in the store."""
    if len(result.selections) < 2:
        return []
    out = []
    for i, head_sel in enumerate(result.selections[1:]):
        base_sel = result.selections[0]
        for row in result.rows:
            cmp = row.heads[i] if i < len(row.heads) else None
            if (cmp is None or cmp.exact or row.fdr_group != PRIMARY or row.monitor
                    or cmp.verdict not in (REGRESSION, IMPROVEMENT) or row.metric.startswith("valgrind.")):
                continue
            commits = (_commit(base_sel.runs, row.benchmark), _commit(head_sel.runs, row.benchmark))
            if None in commits:
                continue
            timed_ids = set(base_sel.run_ids) | set(head_sel.run_ids)
            counted = _counted(store, row, commits, timed_ids)
            if counted is None:
                continue
            metric, (base_values, base_ids), (head_values, head_ids), how = counted
            kind = classify(metric=row.metric, direction=row.direction, time_change=cmp.pct_change,
                            counted_metric=metric, base_counts=base_values, head_counts=head_values, how=how,
                            counted_direction=row.direction if metric == row.metric else LOWER_IS_BETTER)
            out.append(RowKind(head_sel.label, row.metric, kind, (base_ids, head_ids)))
    return out


def _counted(store, row, commits: tuple[str, str], timed: set[int]):
    """(metric, (base values, run ids), (head values, run ids), how) of the counted runs at both commits."""
    runs = [r for r in store.find_runs(benchmark=row.benchmark) if r.commit in commits and r.id not in timed
            and r.status in ("finished", "partial")
            and all((r.params or {}).get(k) == v for k, v in row.params.items())]
    for metric, how, which in ((VALGRIND, "valgrind", 0), (row.metric, "QEMU icount", 1)):
        chosen = [r for r in runs if _mode(r)[which]]
        if not chosen:
            continue
        values: dict[str, list[float]] = defaultdict(list)
        ids: dict[str, list[int]] = defaultdict(list)
        by_run = {r.id: r.commit for r in chosen}
        for sample in store.samples(list(by_run)):
            if sample.metric == metric:
                values[by_run[sample.run_id]].append(sample.value)
                if sample.run_id not in ids[by_run[sample.run_id]]:
                    ids[by_run[sample.run_id]].append(sample.run_id)
        if values.get(commits[0]) and values.get(commits[1]):
            return metric, (values[commits[0]], ids[commits[0]]), (values[commits[1]], ids[commits[1]]), how
    return None

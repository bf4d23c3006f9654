"""Scaling curves: ops/s against tasks, with the linear line from the 1-task figure.

Pools each (testcase, mode, tasks) point over its runs' samples (harmonic
mean: these are rates), and measures it against linear scaling of the 1-task
figure, as will-it-scale's runtest.py prints it; also the per-repetition
scalability figure stored with a swept job (will-it-scale.scalability).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from perflab.core.model import HIGHER_IS_BETTER
from perflab.stats.descriptive import Summary, summarize


@dataclass
class Point:
    tasks: int
    summary: Summary              # of the workload (ops/s of all tasks)
    linear: float                 # the 1-task workload x tasks (NaN without a 1-task point)

    @property
    def efficiency(self) -> float:
        """workload / linear: 1.0 is perfect scaling."""
        return self.summary.center / self.linear if self.linear and self.linear == self.linear else math.nan


@dataclass
class Curve:
    testcase: str                 # e.g. "page_fault1"
    mode: str                     # process | thread
    points: list[Point] = field(default_factory=list)


def curves(workloads: dict[tuple[str, str, int], list[float]]) -> list[Curve]:
    """(testcase, mode, tasks) -> workload samples  =>  one curve per (testcase, mode), tasks ascending."""
    out: dict[tuple[str, str], Curve] = {}
    for (test, mode, tasks) in sorted(workloads, key=lambda k: (k[0], k[1], k[2])):
        curve = out.setdefault((test, mode), Curve(test, mode))
        s = summarize(workloads[(test, mode, tasks)], HIGHER_IS_BETTER)
        curve.points.append(Point(tasks, s, math.nan))
    for curve in out.values():
        one = next((p for p in curve.points if p.tasks == 1), None)
        for p in curve.points:
            p.linear = one.summary.center * p.tasks if one is not None else math.nan
    return list(out.values())


def scalability(workloads: list[float], tasks: int, one_task_workloads: list[float]) -> list[float]:
    """Each repetition's workload against `tasks` x the 1-task workload (its harmonic mean)."""
    base = summarize(one_task_workloads, HIGHER_IS_BETTER).center
    if not base > 0:
        return []
    return [w / (tasks * base) for w in workloads]


def pooled_means(sums: dict[tuple[int, str], tuple[float, int]], rows_of: dict[int, list[int]], rows: int) -> list[dict[str, float]]:
    """Per row, each metric's mean over every sample of the row's runs, from per-(run, metric) sums and counts."""
    pooled: list[dict[str, list[float]]] = [{} for _ in range(rows)]
    for (run_id, metric), (total, n) in sums.items():
        for i in rows_of.get(run_id, ()):
            acc = pooled[i].setdefault(metric, [0.0, 0])
            acc[0] += total
            acc[1] += n
    return [{m: t / n for m, (t, n) in acc.items() if n} for acc in pooled]

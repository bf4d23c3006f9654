"""What `perflab run` prints as soon as a run ends: mean ± σ and ratios, as hyperfine's summary.

Plain `statistics` on purpose: importing scipy.stats would cost the run command
a second of start-up for arithmetic this small.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass


@dataclass(frozen=True)
class Spread:
    n: int
    mean: float
    stddev: float   # 0 for one value
    min: float
    max: float

    @property
    def cov(self) -> float:
        return self.stddev / self.mean if self.mean else math.nan


def spread(values: list[float]) -> Spread:
    return Spread(len(values), statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0,
                  min(values), max(values))


def relative_to_fastest(means: list[float]) -> tuple[int, list[float]]:
    """(index of the smallest mean, each mean divided by it)."""
    fastest = min(range(len(means)), key=lambda i: means[i])
    return fastest, [m / means[fastest] if means[fastest] > 0 else float("inf") for m in means]


def better_change(base: float, head: float, direction: int) -> float | None:
    """mmtests' change of a summary row against the base, positive when the head is better."""
    if base == 0 or base != base or head != head:
        return None
    raw = (head - base) / abs(base)
    return raw if direction > 0 else -raw

"""Small value types shared by benchmarks, the runner and the store."""

from __future__ import annotations

from dataclasses import dataclass

LOWER_IS_BETTER = -1
HIGHER_IS_BETTER = 1
INFORMATIONAL = 0


@dataclass(frozen=True, slots=True)
class Sample:
    """One value of one metric in one repetition of a run."""

    metric: str  # LKP style "suite.name", e.g. "time.elapsed_time"
    value: float
    unit: str  # "s", "us", "ns", "MB/s", "KiB", "" ...
    direction: int  # -1 lower is better, +1 higher is better, 0 informational

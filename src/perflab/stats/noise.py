"""The machine's noise, from an A/A measurement: the same job run twice, interleaved.

For one metric, given the values of side A and side B in the order of their rounds
(one value per round: the mean of that round's samples), this says:

- the CoV of all values (standard deviation over mean);
- the lag-1 serial correlation of each side's series around its own mean, averaged over
  both sides: near 0 when the runs are independent, clearly positive when the machine
  wanders (a run is like the one before it);
- whether the level moves in stretches: the level changes found in either side's series
  (stats.stationarity.level_shifts), and the largest of them; and whether all values fall
  in two clusters (stats.stationarity.bimodal: a machine with two speeds);
- the smallest relative change a two-sample comparison detects at 90% power with n runs
  per side (stats.power), from the spread of the logarithms (raw values when some are
  <= 0), widened by the long-run variance factor (1 + rho) / (1 - rho) when the serial
  correlation rho is significant: correlated runs carry less information than their
  number says;
- what the A/A itself "finds": mean(B) / mean(A) - 1, which should be within noise.

docs/noise.md says how to read the figures and which metric to choose.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from perflab.stats import changepoints, power, stationarity

ALPHA = 0.05                 # as compare's false-discovery rate
RUNS_PER_SIDE = (5, 10, 20)  # the detectable change is given for these
MOST_RUNS = 1000             # runs_needed says "more than this" beyond it


@dataclass(frozen=True)
class MetricNoise:
    """One metric's noise, measured by an A/A of `rounds` rounds."""

    metric: str
    unit: str
    rounds: int                   # values per side (the shorter side)
    mean: float
    cov: float                    # standard deviation / mean of both sides' values; NaN at mean 0
    serial_correlation: float     # lag-1, pooled over the sides; NaN with fewer than 3 values a side
    correlated: bool              # serial correlation beyond 2/sqrt(n): the runs are not independent
    shifts: int                   # level changes found in the sides' series (stretches)
    shift_size: float             # the largest of them, relative (0 when none)
    bimodal: bool                 # both sides' values fall in two clusters (a machine with two speeds)
    modes_apart: float            # the upper cluster relative to the lower (NaN when not measured)
    aa_change: float              # mean(B) / mean(A) - 1
    spread: float                 # the standard deviation power is computed from (of logs when `logged`)
    logged: bool
    inflation: float              # (1 + rho) / (1 - rho) when correlated, else 1
    detectable: tuple[tuple[int, float], ...]   # (runs per side, smallest relative change at 90% power)

    @property
    def exact(self) -> bool:
        """Repeated values agree exactly (instruction counts): any change is seen with one run.
        A metric that is always zero (system time of a short command) has no level to change."""
        return self.spread == 0 and bool(self.mean)

    @property
    def stretches(self) -> bool:
        return self.shifts > 0

    def detectable_with(self, n: int, alpha: float = ALPHA) -> float:
        """The smallest relative change detectable at 90% power with n runs per side."""
        return _detectable(n, self.spread, self.inflation, self.logged, self.mean, alpha)

    def runs_needed(self, change: float, alpha: float = ALPHA, most: int = MOST_RUNS) -> int | None:
        """The fewest runs per side that detect a relative `change` at 90% power; None beyond `most`."""
        if self.exact:
            return 1
        if not self.mean:
            return None
        low, high = 2, most
        if not self.detectable_with(high, alpha) <= change:
            return None
        while low < high:       # the detectable change falls as n grows: bisect on n
            mid = (low + high) // 2
            if self.detectable_with(mid, alpha) <= change:
                high = mid
            else:
                low = mid + 1
        return low


def _detectable(n: int, spread: float, inflation: float, logged: bool, mean: float, alpha: float) -> float:
    if not mean or not math.isfinite(mean):
        return math.nan   # a relative change of a zero level means nothing
    if spread == 0:
        return 0.0
    if not math.isfinite(spread):
        return math.inf
    return power.detectable_change(n, n, spread * math.sqrt(inflation), alpha, logged=logged, scale=mean)


def serial_correlation(series: list[np.ndarray]) -> float:
    """Lag-1 autocorrelation (stats.stationarity) of each series, averaged over those long
    enough to have one; NaN when none is."""
    values = [r for r in (stationarity.serial_correlation(x) for x in series) if math.isfinite(r)]
    return sum(values) / len(values) if values else math.nan


def level_shifts(series: list[np.ndarray]) -> tuple[int, float]:
    """The level changes found in the series (stats.stationarity.level_shifts), and the largest, relative."""
    found = [shift for x in series for shift in stationarity.level_shifts(x)]
    return len(found), max((abs(f.change) for f in found), default=0.0)


def measure(metric: str, unit: str, a, b, alpha: float = ALPHA) -> MetricNoise:
    """The noise of one metric from side A's and side B's values, each in round order."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    both = np.concatenate([a, b])
    n = int(min(a.size, b.size))
    mean = float(both.mean()) if both.size else math.nan
    sd = float(both.std(ddof=1)) if both.size > 1 else math.nan
    logged = bool(both.size and (both > 0).all())
    if logged:
        # Each side around its own mean: a difference between the sides is the A/A's finding, not spread.
        logs = [np.log(a), np.log(b)]
        spread = _pooled_sd(logs)
    else:
        spread = _pooled_sd([a, b])
    rho = serial_correlation([a, b])
    correlated = bool(math.isfinite(rho) and rho > 2 / math.sqrt(max(both.size, 1)))
    inflation = (1 + min(rho, changepoints.MAX_RHO)) / (1 - min(rho, changepoints.MAX_RHO)) if correlated else 1.0
    shifts, shift_size = level_shifts([a, b])
    modes = stationarity.bimodal(both)
    aa = float(b.mean() / a.mean() - 1) if a.size and b.size and a.mean() else math.nan
    cov = sd / abs(mean) if mean else math.nan
    detectable = tuple((k, _detectable(k, spread, inflation, logged, mean, alpha)) for k in RUNS_PER_SIDE)
    return MetricNoise(metric, unit, n, mean, cov, rho, correlated, shifts, shift_size, bool(modes),
                       modes.factor, aa, spread, logged, inflation, detectable)


def _pooled_sd(groups: list[np.ndarray]) -> float:
    """The standard deviation within groups (each around its own mean); inf below 2 values a group."""
    groups = [g for g in groups if g.size]
    dof = sum(g.size - 1 for g in groups)
    if dof < 1 or any(g.size < 2 for g in groups):
        return math.inf
    ss = sum(float(((g - g.mean()) ** 2).sum()) for g in groups)
    sd = math.sqrt(ss / dof)
    # Rounding in the mean of identical values is not spread.
    scale = max(float(np.abs(np.concatenate(groups)).max()), 1e-300)
    return 0.0 if sd <= 1e-12 * scale else sd

"""Does a run of samples come from one steady level? Tests for noise that breaks that assumption.

Every test of perflab that spends runs sequentially (bisect's SPRT, the ends'
Welch test) assumes each run's value is the same level plus independent noise.
A shared machine breaks that in three ways, each with a function here:

- `bimodal(x)`: the samples fall in two clusters (a 2-vCPU guest whose CPU runs
  at one of two speeds: 10 ms or 23 ms for the same loop). The best split of
  the sorted samples into two groups (each at least MIN_SHARE of them), and the
  distance of the groups' means in within-group standard deviations; called when
  that distance exceeds the 99.9% quantile it reaches for Gaussian samples of
  that size (BIMODAL_CRITICAL, simulated: 20,000 draws per size).
- `level_shifts(x)`: the level moves in stretches within one series (samples in
  the order they were taken): perflab.stats.changepoints.detect, whose tests
  already allow for spikes and serial correlation.
- `serial_correlation(x)`: lag-1 autocorrelation; independent noise has about
  0 (within 2 / sqrt(n)); a machine that wanders run to run has clearly more.
- `drift(before, after)`: the same thing measured later has another level
  (a re-measured end that disagrees with its first samples).

Each works on logarithms when every value is positive (a speed factor is then
one distance whatever the level), else on raw values. None of them decides what
to do: the caller says so in its result (bisect, `perflab noise`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from perflab.stats import changepoints, student_t
from perflab.stats.sequential import relative_change

MIN_BIMODAL_N = 6           # fewer samples cannot show two clusters of two
MIN_SHARE = 0.2             # the smaller cluster holds at least this share of the samples (and 2)
# 99.9% quantile of the separation statistic (gap of the best split's means over the pooled
# within-cluster sd) for Gaussian samples of size n, by simulation; interpolated on log n.
BIMODAL_CRITICAL = ((6, 17.7), (8, 10.7), (10, 8.3), (14, 6.3), (20, 5.1), (40, 4.1), (60, 3.7), (200, 3.2))
SHIFT_ALPHA = 0.001         # level_shifts' two-sided level (changepoints' own default)
DRIFT_ALPHA = 0.001         # drift's two-sided level


def _scale(x) -> tuple[np.ndarray, bool]:
    a = np.asarray(x, dtype=float).ravel()
    logged = bool(a.size) and bool((a > 0).all())
    return (np.log(a) if logged else a), logged


@dataclass(frozen=True)
class Bimodal:
    bimodal: bool
    separation: float     # gap of the two clusters' means over their pooled within-cluster sd
    low: float            # the clusters' centres (geometric means when on logs)
    high: float
    n_low: int
    n_high: int
    factor: float         # high / low - 1 on logs (the second speed relative to the first), else relative gap
    critical: float       # the separation that calls it at this size

    def __bool__(self) -> bool:
        return self.bimodal


def _critical(n: int) -> float:
    sizes = [math.log(s) for s, _ in BIMODAL_CRITICAL]
    values = [v for _, v in BIMODAL_CRITICAL]
    return float(np.interp(math.log(n), sizes, values))


def bimodal(x) -> Bimodal:
    """Whether the samples `x` fall in two well-separated clusters (see the module's docstring)."""
    z, logged = _scale(x)
    n = z.size
    if n < MIN_BIMODAL_N:
        return Bimodal(False, math.nan, math.nan, math.nan, 0, 0, math.nan, math.inf)
    s = np.sort(z)
    m = max(2, math.ceil(MIN_SHARE * n))
    # Within-cluster sums of squares of every split at k, from prefix sums (O(n)).
    c1, c2 = np.cumsum(s), np.cumsum(s * s)
    k = np.arange(m, n - m + 1)
    left = c2[k - 1] - c1[k - 1] ** 2 / k
    right = (c2[-1] - c2[k - 1]) - (c1[-1] - c1[k - 1]) ** 2 / (n - k)
    best = int(k[np.argmin(left + right)])
    a, b = s[:best], s[best:]
    within = float(((a - a.mean()) ** 2).sum() + ((b - b.mean()) ** 2).sum())
    sd = math.sqrt(max(within, 0.0) / (n - 2))
    gap = float(b.mean() - a.mean())
    separation = gap / sd if sd > 0 else (math.inf if gap > 0 else 0.0)
    critical = _critical(n)
    low, high = (math.exp(a.mean()), math.exp(b.mean())) if logged else (float(a.mean()), float(b.mean()))
    factor = relative_change(gap, logged, float(a.mean()))
    return Bimodal(separation > critical, separation, low, high, a.size, b.size, factor, critical)


@dataclass(frozen=True)
class Shift:
    index: int            # the first sample at the new level
    change: float         # relative change of the level, after / before - 1
    p_value: float


def level_shifts(x, alpha: float = SHIFT_ALPHA, min_effect: float = 0.0) -> list[Shift]:
    """Where the level of `x` (samples in the order taken) moves, as changepoints.detect finds it:
    stretches of at least 3 samples, spikes set aside, tests widened for serial correlation."""
    a = np.asarray(x, dtype=float).ravel()
    if a.size < 2 * changepoints.MIN_SIZE:
        return []
    found = changepoints.detect(a, alpha=alpha, min_effect=min_effect)
    return [Shift(c.index, c.change, c.p_value) for c in found.change_points]


def serial_correlation(x) -> float:
    """Lag-1 autocorrelation of `x` about its mean (NaN below 3 samples, 0 for a constant series)."""
    z, _logged = _scale(x)
    if z.size < 3:
        return math.nan
    r = z - z.mean()
    den = float(r @ r)
    if den <= 0:
        return 0.0
    return float(r[1:] @ r[:-1]) / den


@dataclass(frozen=True)
class Drift:
    drifted: bool
    change: float         # later level relative to the earlier one, a fraction
    p_value: float        # two-sided Welch


def drift(before, after, alpha: float = DRIFT_ALPHA, min_effect: float = 0.0) -> Drift:
    """Whether `after` (the same thing measured later) has another level than `before`:
    Welch's two-sided test at `alpha`, and a change of at least `min_effect`."""
    a, logged = _scale(before)
    b, logged_b = _scale(after)
    if logged != logged_b:
        a, b = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
        logged = False
    if a.size < 2 or b.size < 2:
        return Drift(False, math.nan, math.nan)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    delta = float(b.mean() - a.mean())
    se = math.sqrt(va + vb)
    if se == 0:
        p = 0.0 if delta else 1.0
    else:
        df = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1))
        p = student_t.two_sided_p(df, delta / se)
    change = relative_change(delta, logged, float(a.mean()))
    return Drift(bool(p < alpha and abs(change) >= min_effect), change, p)

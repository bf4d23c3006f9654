"""Descriptive statistics of one group of samples."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import numpy as np
from perflab.core.model import HIGHER_IS_BETTER
from perflab.stats.exact import exact_figure, settled
from perflab.stats.median import median_ci_rows

BAMEAN_PCT = 95  # mmtests' BAmean-95

# The one figure a view prints for a group of samples, by the metric's kind (docs/statistics.md,
# "One figure per run"): every view takes Summary.center and prints the name beside it.
HMEAN, MEAN, MEDIAN, EXACT = "hmean", "mean", "median", "exact"
ESTIMATOR_WORDS = {HMEAN: "harmonic mean", MEAN: "arithmetic mean", MEDIAN: "median",
                   EXACT: "least disturbed sample"}
# The LMbench summary prints the median of each figure's samples, as LMbench prints the median
# of its tries: one row of a table of kernels, a figure a slow try must not move.
LMBENCH_SUMMARY = MEDIAN


def estimator(direction: int, all_positive: bool = True) -> str:
    """The estimator of a metric kind: higher-is-better rates average harmonically (the mean of
    the times behind them, as mmtests' Hmean); every other metric by its arithmetic mean."""
    return HMEAN if direction == HIGHER_IS_BETTER and all_positive else MEAN


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    hmean: float      # harmonic mean; NaN unless every value is > 0
    median: float
    stddev: float     # sample standard deviation (ddof=1); NaN for n < 2
    cov: float        # stddev / mean; NaN when undefined
    min: float
    max: float
    center: float     # the average a report leads with: hmean for higher-is-better rates, else mean
    bamean: float = math.nan        # mmtests' BAmean-95: mean of the best 95% of the samples
    median_low: float = math.nan    # distribution-free 95% interval of the median (±inf below 6 samples)
    median_high: float = math.nan
    median_pm: float = math.nan     # benchstat's "± x%": the interval's larger half-width / |median|
    estimator: str = MEAN           # what `center` is (HMEAN, MEAN or EXACT): the name a view prints beside it

    def as_dict(self) -> dict:
        return asdict(self)


def summarize(values, direction: int = 0, exact: bool = False) -> Summary:
    """The summary of one group; `exact` (an exact metric: counts, icount instruction-time):
    its figure is its least disturbed sample (stats.exact.exact_figure), as detect's points and
    compare's exact ratio take it, and Summary.estimator says EXACT - when the samples settle on
    it (stats.exact.settled); samples that scatter keep the kind's estimator, as compare's."""
    x = np.asarray(values, dtype=float).ravel()
    s = summarize_rows(x.reshape(1, x.size), np.array([direction]))[0]
    if exact and x.size and settled(x.tolist(), direction):
        s = replace(s, center=exact_figure(x.tolist(), direction), estimator=EXACT)
    return s


def harmonic_mean(values) -> float:
    """The harmonic mean of positive values, NaN if any is not positive. Computed against the
    largest value (max / mean(max / v)), so neither the reciprocals of huge values (subnormal)
    nor the sum overflow: equal values give exactly themselves."""
    values = [float(v) for v in values]
    if not values or any(not v > 0 for v in values):
        return math.nan
    top = max(values)
    return top / (math.fsum(top / v for v in values) / len(values))


def summarize_many(groups, directions) -> list[Summary]:
    """Summaries of many groups at once, vectorised over groups of one size."""
    arrays = [np.asarray(g, dtype=float).ravel() for g in groups]
    directions = list(directions)
    out: list = [None] * len(arrays)
    by_size: dict[int, list[int]] = {}
    for i, a in enumerate(arrays):
        by_size.setdefault(a.size, []).append(i)
    for size, idx in by_size.items():
        x = np.array([arrays[i] for i in idx]).reshape(len(idx), size)
        for i, s in zip(idx, summarize_rows(x, np.array([directions[i] for i in idx]))):
            out[i] = s
    return out


def _bamean_rows(x: np.ndarray, directions: np.ndarray, pct: float = BAMEAN_PCT) -> np.ndarray:
    """Mean of the best pct% of each row (at least one sample), the worst dropped by direction."""
    rows, n = x.shape
    keep = max(1, int(n * pct / 100))
    xs = np.sort(x, axis=1)
    low_best = xs[:, :keep].mean(axis=1)
    high_best = xs[:, n - keep:].mean(axis=1)
    return np.where(directions == HIGHER_IS_BETTER, high_best, low_best)


def summarize_rows(x: np.ndarray, directions: np.ndarray) -> list[Summary]:
    """Summary of each row of x (rows are groups, columns samples)."""
    rows, n = x.shape
    if n == 0:
        nan = math.nan
        return [Summary(0, nan, nan, nan, nan, nan, nan, nan, nan) for _ in range(rows)]
    mean = x.mean(axis=1)
    positive = (x > 0).all(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        # Harmonic mean n / sum(1/x), defined only for positive samples.
        hmean = np.where(positive, n / np.sum(1.0 / np.where(positive[:, None], x, 1.0), axis=1), np.nan)
        sd = x.std(axis=1, ddof=1) if n > 1 else np.full(rows, np.nan)
        cov = np.where(mean != 0, sd / mean, np.nan)
    median = np.median(x, axis=1)
    lo, hi = x.min(axis=1), x.max(axis=1)
    # Rates (ops/s, MB/s) average harmonically: the mean of the times behind them (estimator()).
    harmonic = np.array([estimator(int(d), bool(p)) == HMEAN for d, p in zip(directions, positive)], dtype=bool)
    center = np.where(harmonic, hmean, mean)
    ba = _bamean_rows(x, directions)
    mlo, mhi = median_ci_rows(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        pm = np.where(median != 0, np.maximum(median - mlo, mhi - median) / np.abs(median), np.nan)
    return [Summary(n, float(mean[i]), float(hmean[i]), float(median[i]), float(sd[i]), float(cov[i]),
                    float(lo[i]), float(hi[i]), float(center[i]), float(ba[i]), float(mlo[i]), float(mhi[i]),
                    float(pm[i]), HMEAN if harmonic[i] else MEAN) for i in range(rows)]


def bamean(values, direction: int, pct: float = BAMEAN_PCT) -> float:
    """mmtests' BAmean-PCT: the mean of the best PCT% of the samples.

    The worst samples (largest when lower is better, smallest when higher is
    better) are dropped; at least one sample is kept.
    """
    x = np.asarray(values, dtype=float).ravel()
    if x.size == 0:
        return math.nan
    return float(_bamean_rows(x.reshape(1, x.size), np.array([direction]), pct)[0])

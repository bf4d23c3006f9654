"""Descriptive statistics of one group of samples."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

from perflab.model import HIGHER_IS_BETTER


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

    def as_dict(self) -> dict:
        return asdict(self)


def summarize(values, direction: int = 0) -> Summary:
    x = np.asarray(values, dtype=float)
    n = int(x.size)
    if n == 0:
        nan = math.nan
        return Summary(0, nan, nan, nan, nan, nan, nan, nan, nan)
    mean = float(np.mean(x))
    hmean = float(stats.hmean(x)) if bool(np.all(x > 0)) else math.nan
    stddev = float(np.std(x, ddof=1)) if n > 1 else math.nan
    cov = stddev / mean if n > 1 and mean != 0 else math.nan
    # Rates (ops/s, MB/s) average harmonically: the mean of the times behind them.
    center = hmean if direction == HIGHER_IS_BETTER and not math.isnan(hmean) else mean
    return Summary(n, mean, hmean, float(np.median(x)), stddev, cov, float(np.min(x)), float(np.max(x)), center)


def bamean(values, direction: int, pct: float = 95) -> float:
    """mmtests' BAmean-PCT: the mean of the best PCT% of the samples.

    The worst samples (largest when lower is better, smallest when higher is
    better) are dropped; at least one sample is kept.
    """
    x = np.sort(np.asarray(values, dtype=float))
    if x.size == 0:
        return math.nan
    keep = max(1, int(x.size * pct / 100))
    best = x[-keep:] if direction == HIGHER_IS_BETTER else x[:keep]
    return float(np.mean(best))

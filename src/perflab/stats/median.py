"""Distribution-free confidence interval of a median, from order statistics.

For n samples the number below the true median is Binomial(n, 1/2); the
interval [x_(k), x_(n-k+1)] covers the median with probability
1 - 2 P(B <= k-1). We take the largest k whose coverage still reaches the
requested confidence. With fewer than 6 samples no such k exists at 95%
(coverage 1 - 2 * 0.5^n < 0.95): the interval is unbounded, and we say so.
"""

from __future__ import annotations

import math
import statistics
from functools import lru_cache

import numpy as np

CONFIDENCE = 0.95


@lru_cache(maxsize=256)
def median_ci_rank(n: int, confidence: float = CONFIDENCE) -> int | None:
    """The k of the interval [x_(k), x_(n-k+1)] (1-based), or None when n is too small."""
    best = None
    below = 0.0                       # P(B <= k - 1), summed term by term (math only: no scipy import)
    log_total = n * math.log(2.0)
    log_n = math.lgamma(n + 1)
    for k in range(1, n // 2 + 1):
        j = k - 1
        below += math.exp(log_n - math.lgamma(j + 1) - math.lgamma(n - j + 1) - log_total)
        if 1 - 2 * below >= confidence:
            best = k
        else:
            break
    return best


@lru_cache(maxsize=16)
def min_samples_for_median_ci(confidence: float = CONFIDENCE) -> int:
    """The fewest samples whose median interval is bounded (6 at 95%)."""
    n = 1
    while median_ci_rank(n, confidence) is None:
        n += 1
    return n


def median_ci_rows(x: np.ndarray, confidence: float = CONFIDENCE) -> tuple[np.ndarray, np.ndarray]:
    """The interval of each row of x (rows are groups of one size); ±inf when unbounded."""
    rows, n = x.shape
    k = median_ci_rank(n, confidence) if n else None
    if k is None:
        return np.full(rows, -np.inf if n else np.nan), np.full(rows, np.inf if n else np.nan)
    xs = np.sort(x, axis=1)
    return xs[:, k - 1].copy(), xs[:, n - k].copy()


def median_ci(values, confidence: float = CONFIDENCE) -> tuple[float, float]:
    x = np.asarray(values, dtype=float).ravel()
    if x.size == 0:
        return (math.nan, math.nan)
    lo, hi = median_ci_rows(x.reshape(1, x.size), confidence)
    return (float(lo[0]), float(hi[0]))


def pooled_medians(values: dict[tuple[int, str], list[float]], rows_of: dict[int, list[int]],
                   rows: int) -> list[dict[str, float]]:
    """Per row, each metric's median over every sample of the row's runs (values: (run, metric) -> samples)."""
    pooled: list[dict[str, list[float]]] = [{} for _ in range(rows)]
    for (run_id, metric), vs in values.items():
        for i in rows_of.get(run_id, ()):
            pooled[i].setdefault(metric, []).extend(vs)
    # statistics.median, not np.median: a report holds ~100,000 small groups, and numpy's
    # per-call overhead (~10 us) would be most of its time
    return [{m: float(statistics.median(vs)) for m, vs in row.items() if vs} for row in pooled]

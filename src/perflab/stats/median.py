"""Distribution-free confidence interval of a median, from order statistics.

For n samples the number below the true median is Binomial(n, 1/2); the
interval [x_(k), x_(n-k+1)] covers the median with probability
1 - 2 P(B <= k-1). We take the largest k whose coverage still reaches the
requested confidence. With fewer than 6 samples no such k exists at 95%
(coverage 1 - 2 * 0.5^n < 0.95): the interval is unbounded, and we say so.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats


def median_ci(values, confidence: float = 0.95) -> tuple[float, float]:
    x = np.sort(np.asarray(values, dtype=float))
    n = len(x)
    if n == 0:
        return (math.nan, math.nan)
    best = None
    for k in range(1, n // 2 + 1):
        coverage = 1 - 2 * stats.binom.cdf(k - 1, n, 0.5)
        if coverage >= confidence:
            best = k
        else:
            break
    if best is None:
        return (-math.inf, math.inf)
    return (float(x[best - 1]), float(x[n - best]))

"""Power, out loud: the smallest change two groups of samples could have detected.

A "no change" means little unless the samples could have seen a change of the
size that matters. For two groups of n1 and n2 samples with standard
deviation sd, a two-sample t-test at level alpha detects a true difference
of means delta with probability `power` when

    delta >= (t(1 - alpha/2, df) + t(power, df)) * sd * sqrt(1/n1 + 1/n2),  df = n1 + n2 - 2

(the usual normal-approximation formula with t quantiles, which makes it
conservative for small samples). On logarithms of positive samples, delta is
a log-ratio and the detectable relative change is exp(delta) - 1.
"""

from __future__ import annotations

import math

from perflab.stats import student_t

POWER = 0.90


def detectable_delta(n1: int, n2: int, sd: float, alpha: float = 0.05, power: float = POWER,
                     two_sided: bool = True) -> float:
    """The smallest true difference of means the test detects with `power` (same units as sd); inf if none."""
    if n1 < 1 or n2 < 1 or n1 + n2 < 3 or not math.isfinite(sd):
        return math.inf
    df = n1 + n2 - 2
    tail = alpha / 2 if two_sided else alpha
    # perflab.stats.student_t's quantile: scipy.special.stdtrit's figure (to 1e-11) without
    # importing scipy (0.3 s of `perflab detect`), and cached: detect asks for the same few.
    return (student_t.quantile(df, 1 - tail) + student_t.quantile(df, power)) * sd * math.sqrt(1 / n1 + 1 / n2)


def detectable_change(n1: int, n2: int, sd: float, alpha: float = 0.05, power: float = POWER,
                      two_sided: bool = True, logged: bool = True, scale: float = 1.0) -> float:
    """The smallest relative change (a fraction) detectable with `power`.

    `logged`: sd is the standard deviation of the logarithms (the change is
    exp(delta) - 1); otherwise sd is in the samples' units and the change is
    delta / |scale| (scale: the base mean)."""
    delta = detectable_delta(n1, n2, sd, alpha, power, two_sided)
    if not math.isfinite(delta):
        return math.inf
    if logged:
        return math.expm1(delta)
    return delta / abs(scale) if scale else math.inf


def detectable_of(base: list[float], head: list[float], alpha: float = 0.05, power: float = POWER) -> float:
    """The smallest relative change detectable between two groups of samples (pooled spread; logs when positive)."""
    import numpy as np

    a, b = np.asarray(base, dtype=float), np.asarray(head, dtype=float)
    if len(a) < 2 or len(b) < 2:
        return math.inf
    logged = bool((a > 0).all() and (b > 0).all())
    if logged:
        a, b = np.log(a), np.log(b)
    pooled = math.sqrt(((len(a) - 1) * a.var(ddof=1) + (len(b) - 1) * b.var(ddof=1)) / (len(a) + len(b) - 2))
    return detectable_change(len(a), len(b), pooled, alpha, power, logged=logged, scale=float(np.mean(base)))

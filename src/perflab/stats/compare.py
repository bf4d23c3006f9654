"""The comparison test: is the head different from the base, and which way?

Choices (docs/statistics.md has the reasoning and the measured error rates):
- Welch's t-test on the logarithms of the samples. Timings are skewed and
  multiplicative (lognormal-like); on logs the test compares geometric means,
  stays valid with unequal variances and small samples, and its interval is a
  ratio, i.e. a %change. Samples that are not all positive are tested as they are.
- Directional: a regression and an improvement are separate one-sided
  questions, each at level alpha, as a performance engineer asks them ("did it
  get slower?"). Each direction's p-values are adjusted over all metrics of
  the comparison by Benjamini-Hochberg, so the false-discovery rate of
  regression calls is at most alpha.
- The interval reported is two-sided at 1 - 2*alpha: each end is a one-sided
  (1 - alpha) bound, so a call and its interval never disagree.
- Nothing smaller than `threshold` (relative change) is called.
- With fewer than two samples on a side no variance exists and no test can
  reach significance: the verdict is "insufficient samples".

Computation is vectorised over groups of metrics with the same sample counts,
so that 10,000 metrics compare in a fraction of a second.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from perflab.model import HIGHER_IS_BETTER, INFORMATIONAL, LOWER_IS_BETTER
from perflab.stats.descriptive import Summary, summarize_rows as _summaries

REGRESSION, IMPROVEMENT, NO_CHANGE, CHANGED, INSUFFICIENT = (
    "regression", "improvement", "no change", "changed", "insufficient samples")
FEW_SAMPLES = 5       # below this per side, warn that power is low
NOISY_COV = 0.10      # above this CoV, warn that the metric is noisy


@dataclass
class Comparison:
    base: Summary
    head: Summary
    pct_change: float            # head.center / base.center - 1 (a fraction)
    ci: tuple[float, float] | None   # bounds of the relative change (fractions)
    p_value: float               # one-sided, in the direction of the observed change
    p_adjusted: float            # Benjamini-Hochberg over the comparison's metrics
    verdict: str
    test: str                    # "welch-log", "welch" or "none"
    warnings: list[str] = field(default_factory=list)


def _welch(a: np.ndarray, b: np.ndarray, confidence_t: float):
    """Welch statistics per row: difference of means (b - a), its standard error,
    degrees of freedom and the one-sided p-values for 'b > a' and 'b < a'."""
    na, nb = a.shape[1], b.shape[1]
    ma, mb = a.mean(axis=1), b.mean(axis=1)
    va, vb = a.var(axis=1, ddof=1), b.var(axis=1, ddof=1)
    sa, sb = va / na, vb / nb
    diff = mb - ma
    se = np.sqrt(sa + sb)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = (sa + sb) ** 2 / (sa ** 2 / (na - 1) + sb ** 2 / (nb - 1))
        t = diff / se
    degenerate = se == 0  # both sides constant: the difference is exact
    df = np.where(degenerate, 1.0, df)
    t = np.where(degenerate, np.where(diff > 0, np.inf, np.where(diff < 0, -np.inf, 0.0)), t)
    p_up = stats.t.sf(t, df)        # evidence that b > a
    p_down = stats.t.cdf(t, df)     # evidence that b < a
    p_up = np.where(degenerate & (diff == 0), 1.0, p_up)
    p_down = np.where(degenerate & (diff == 0), 1.0, p_down)
    half = stats.t.ppf(confidence_t, df) * se
    half = np.where(degenerate, 0.0, half)
    return ma, diff, half, p_up, p_down


def compare_many(pairs, alpha: float = 0.05, threshold: float = 0.01) -> list[Comparison]:
    """Compare each (base_values, head_values, direction) pair; one FDR family."""
    m = len(pairs)
    arrays = [(np.asarray(a, dtype=float).ravel(), np.asarray(b, dtype=float).ravel(), int(d)) for a, b, d in pairs]
    base_s: list = [None] * m
    head_s: list = [None] * m
    ci: list = [None] * m
    test = ["none"] * m
    p_up = np.full(m, np.nan)
    p_down = np.full(m, np.nan)
    buckets: dict[tuple, list[int]] = defaultdict(list)
    for i, (a, b, _d) in enumerate(arrays):
        positive = bool(a.size and b.size and (a > 0).all() and (b > 0).all())
        buckets[(a.size, b.size, positive)].append(i)

    for (na, nb, positive), idx in buckets.items():
        a = np.array([arrays[i][0] for i in idx]).reshape(len(idx), na)
        b = np.array([arrays[i][1] for i in idx]).reshape(len(idx), nb)
        dirs = np.array([arrays[i][2] for i in idx])
        for j, s in zip(idx, _summaries(a, dirs)):
            base_s[j] = s
        for j, s in zip(idx, _summaries(b, dirs)):
            head_s[j] = s
        if na < 2 or nb < 2:
            continue
        la, lb = (np.log(a), np.log(b)) if positive else (a, b)
        ma, diff, half, up, down = _welch(la, lb, 1 - alpha)
        if positive:
            lo, hi = np.expm1(diff - half), np.expm1(diff + half)
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                scale = np.abs(ma)
                lo, hi = (diff - half) / scale, (diff + half) / scale
        for k, j in enumerate(idx):
            p_up[j], p_down[j] = up[k], down[k]
            ci[j] = (float(lo[k]), float(hi[k]))
            test[j] = "welch-log" if positive else "welch"

    # Which one-sided question is a regression depends on the metric's direction.
    directions = np.array([d for _a, _b, d in arrays]) if m else np.zeros(0, int)
    p_reg = np.where(directions == LOWER_IS_BETTER, p_up, np.where(directions == HIGHER_IS_BETTER, p_down, np.nan))
    p_imp = np.where(directions == LOWER_IS_BETTER, p_down, np.where(directions == HIGHER_IS_BETTER, p_up, np.nan))
    # Informational metrics: two-sided, in a family of their own.
    p_inf = np.where(directions == INFORMATIONAL, np.minimum(1.0, 2 * np.fmin(p_up, p_down)), np.nan)
    adj_reg, adj_imp, adj_inf = (_bh(p) for p in (p_reg, p_imp, p_inf))

    out = []
    for i in range(m):
        b0, h0, d = base_s[i], head_s[i], arrays[i][2]
        pct = h0.center / b0.center - 1 if b0.n and h0.n and b0.center != 0 else math.nan
        warnings = []
        if test[i] == "none":
            out.append(Comparison(b0, h0, pct, None, math.nan, math.nan, INSUFFICIENT, "none",
                                  [f"need at least 2 samples per side to test (n={b0.n} vs {h0.n})"]))
            continue
        if min(b0.n, h0.n) < FEW_SAMPLES:
            warnings.append(f"few samples (n={b0.n} vs {h0.n}): only large changes can be detected")
        worst_cov = max(abs(b0.cov), abs(h0.cov)) if not (math.isnan(b0.cov) or math.isnan(h0.cov)) else math.nan
        if worst_cov > NOISY_COV:
            warnings.append(f"noisy: CoV {worst_cov * 100:.1f}%")
        if test[i] == "welch":
            warnings.append("values not all positive: tested on raw values, not logs")
        if d == INFORMATIONAL:
            p, padj = p_inf[i], adj_inf[i]
            verdict = CHANGED if padj < alpha and abs(pct) >= threshold else NO_CHANGE
        else:
            went_up = p_up[i] <= p_down[i]
            worse = went_up == (d == LOWER_IS_BETTER)
            p, padj = (p_reg[i], adj_reg[i]) if worse else (p_imp[i], adj_imp[i])
            called = padj < alpha and not math.isnan(pct) and abs(pct) >= threshold
            verdict = (REGRESSION if worse else IMPROVEMENT) if called else NO_CHANGE
        out.append(Comparison(b0, h0, pct, ci[i], float(p), float(padj), verdict, test[i], warnings))
    return out


def _bh(p: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values of the finite entries; NaN elsewhere."""
    out = np.full(p.shape, np.nan)
    ok = ~np.isnan(p)
    if ok.any():
        out[ok] = stats.false_discovery_control(p[ok], method="bh")
    return out


def geomean_ratio(comparisons) -> float:
    """Geometric mean of head/base over the comparisons with positive centres."""
    ratios = [c.head.center / c.base.center for c in comparisons
              if c is not None and c.base.center > 0 and c.head.center > 0]
    if not ratios:
        return math.nan
    return float(np.exp(np.mean(np.log(ratios))))

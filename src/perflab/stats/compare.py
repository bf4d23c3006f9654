"""The comparison test: is the head different from the base, and which way?

Choices (docs/statistics.md has the reasoning and the measured error rates):
- Welch's t-test on the logarithms of the samples. Timings are skewed and
  multiplicative (lognormal-like); on logs the test compares geometric means,
  stays valid with unequal variances and small samples, and its interval is a
  ratio, i.e. a %change. Samples that are not all positive are tested as they are.
- Directional: a regression and an improvement are separate one-sided
  questions, each at level alpha, as a performance engineer asks them ("did it
  get slower?"). Each direction's p-values are adjusted over all metrics of
  the FDR group (the metrics whose false-discovery rate is controlled together)
  by Benjamini-Hochberg, so the false-discovery rate of regression calls is at
  most alpha. One call of compare_many is one FDR group; the caller decides
  which metrics form it (primary and secondary metrics are separate groups:
  perflab.analysis.comparison).
- Two intervals per metric, each end a one-sided bound: `ci` at (1 - alpha),
  unadjusted; `ci_adjusted` at the Benjamini-Yekutieli FCR level
  (1 - alpha * R / m, R the calls of the metric's FDR group, m its size), so that
  it excludes zero exactly when the adjusted p-value is below alpha: the
  interval shown beside a verdict never contradicts it.
- Nothing smaller than `threshold` (relative change) is called.
- With fewer than two samples on a side no variance exists and no test can
  reach significance: the verdict is "insufficient samples".
- Power, out loud: beside every verdict, `detectable` is the smallest change
  the samples at hand detect with 90% power (two-sided, at alpha, from the
  Welch standard error and degrees of freedom: (t(1-alpha/2) + t(0.9)) * se,
  on logs a ratio). A "no change" whose samples could not have seen a change
  of BLIND_ABOVE carries a caveat saying so.

- Exact metrics (perflab.stats.exact: instruction counts, icount instruction-time,
  or samples that agree to EXACT_LIMIT) are not t-tested: the change is called when
  it exceeds EXACT_FACTOR times the metric's resolution and the minimum effect, with
  one sample per side when exact by construction (the caller's `assume_exact`).
  Their calls are not p-values: they are left out of the Benjamini-Hochberg
  adjustment of their FDR group (they add neither to its m nor to its R),
  p_adjusted is NaN (p_value is Welch's, unadjusted, for reference where both sides
  have two samples), and the interval shown is the change ± the resolution.

Computation is vectorised over groups of metrics with the same sample counts,
so that 10,000 metrics compare in a fraction of a second.
"""

from __future__ import annotations

import math
import sys
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from perflab.core.model import HIGHER_IS_BETTER, INFORMATIONAL, LOWER_IS_BETTER
from perflab.stats import exact as _exact, student_t
from perflab.stats.descriptive import Summary, summarize, summarize_rows as _summaries
from perflab.stats.verdicts import CHANGED, IMPROVEMENT, INSUFFICIENT, NO_CHANGE, REGRESSION  # noqa: F401 (re-exported)


# Student's t: perflab.stats.student_t (the math module) for the few metrics of an everyday
# comparison, where importing scipy.special would cost `perflab compare` 0.18 s of its 0.4
# (issue 47); scipy's ufuncs from SCIPY_FROM elements on, where a quantile each in Python
# (~40 us) would cost more than the import. The choice depends on the input alone, never on
# what the process has imported: the same comparison prints the same digits in every process
# (the two agree to 1e-13: tests/test_student_t.py, tests/test_startup.py).
SCIPY_FROM = 500


def _special(size: int):
    """scipy.special where it is the cheaper way to `size` elements, else None."""
    if size >= SCIPY_FROM:
        from scipy import special

        return special
    return None


def _elementwise(name: str, pure, df, x) -> np.ndarray:
    """scipy.special's ufunc `name`, or `pure` (perflab.stats.student_t) per element, over df and x."""
    df, x = np.broadcast_arrays(np.asarray(df, dtype=float), np.asarray(x, dtype=float))
    special = _special(df.size)
    if special is not None:
        return getattr(special, name)(df, x)
    return np.array([pure(d, v) for d, v in zip(df.ravel().tolist(), x.ravel().tolist())],
                    dtype=float).reshape(df.shape)


def _stdtr(df, t) -> np.ndarray:
    """P(T <= t) per element (scipy.special.stdtr)."""
    return _elementwise("stdtr", student_t.cdf, df, t)


def _stdtrit(df, p) -> np.ndarray:
    """The t with P(T <= t) = p per element (scipy.special.stdtrit)."""
    return _elementwise("stdtrit", student_t.quantile, df, p)


# FDR groups: a comparison's own metrics (primary, secondary) and its monitors' counters
# (perflab.analysis.comparison decides which metric is in which).
PRIMARY, SECONDARY, MONITOR = "primary", "secondary", "monitor"
MIN_SAMPLES = 2       # per side, for a variance and so a test
FEW_SAMPLES = 5       # below this per side, warn that power is low
NOISY_COV = 0.10      # above this CoV, warn that the metric is noisy

# Kinds of caveat a comparison carries (the layouts group and word them).
TOO_FEW, FEW, NOISY, RAW_VALUES, BELOW_EFFECT, BLIND, EXACT, NOT_EXACT = (
    "too-few-samples", "few-samples", "noisy", "raw-values", "below-minimum-effect", "blind", "exact", "not-exact")
EXACT_TEST = "exact"  # Comparison.test of an exact metric
POWER = 0.90          # the power the detectable change is stated at
BLIND_ABOVE = 0.05    # a "no change" that could not have seen a 5% change says so
# The t-test's minimum effect when none is asked for (exact metrics: perflab.stats.exact.EXACT_MIN_EFFECT).
DEFAULT_MIN_EFFECT = 0.01


def minimum_effects(threshold: float | None) -> tuple[float, float]:
    """The one rule for the minimum effects (statistical, exact) every view calls against: an
    explicit threshold applies to both; none given, DEFAULT_MIN_EFFECT for the t-test and the exact
    rule's EXACT_MIN_EFFECT for exact metrics (docs/statistics.md, "Exact metrics"). compare, the
    mail, the HTML, check, the robot and bisect all resolve their threshold here, so one change gets
    one verdict."""
    if threshold is None:
        return DEFAULT_MIN_EFFECT, _exact.EXACT_MIN_EFFECT
    return float(threshold), float(threshold)


class Caveat(str):
    """A warning that travels with one comparison: its text, and its kind."""

    kind: str

    def __new__(cls, kind: str, text: str) -> "Caveat":
        obj = super().__new__(cls, text)
        obj.kind = kind
        return obj


@dataclass
class Comparison:
    base: Summary
    head: Summary
    pct_change: float            # head.center / base.center - 1 (a fraction)
    ci: tuple[float, float] | None   # bounds of the relative change (fractions), each end one-sided 1 - alpha
    p_value: float               # one-sided, in the direction of the observed change
    p_adjusted: float            # Benjamini-Hochberg over the metric's FDR group
    verdict: str
    test: str                    # "welch-log", "welch" or "none"
    warnings: list[Caveat] = field(default_factory=list)
    median_change: float = math.nan  # head.median / base.median - 1
    # The interval at the FDR group's FCR-adjusted level: excludes zero iff p_adjusted < alpha.
    ci_adjusted: tuple[float, float] | None = None
    ci_level: float = math.nan   # two-sided confidence of ci_adjusted
    fdr_group: str = PRIMARY     # which FDR group the metric was tested in
    fdr_group_size: int = 0      # p-values in the Benjamini-Hochberg adjustment that included this one
    detectable: float = math.inf  # smallest relative change these samples detect with 90% power (at alpha)
    exact: bool = False          # compared by perflab.stats.exact (no t-test; p-values NaN)
    resolution: float = math.nan  # an exact metric's resolution (fraction): the interval is pct_change ± it

    @property
    def magnitude(self) -> float:
        """|pct_change| for ordering rows, to 1e-9: changes that are equal in exact arithmetic
        (a workload and its per-task ops) tie and keep their rows' order, instead of being
        ordered by a last-ulp difference that another numpy release may turn around."""
        return round(abs(self.pct_change), 9)

    # The former names, still read by the renderers and in exports ("family", "family_size").
    @property
    def family(self) -> str:
        return self.fdr_group

    @property
    def family_size(self) -> int:
        return self.fdr_group_size


def _welch(a: np.ndarray, b: np.ndarray):
    """Welch statistics per row: mean of a, difference of means (b - a), its
    standard error, degrees of freedom and the one-sided p-values for 'b > a'
    and 'b < a'."""
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
    p_up = _stdtr(df, -t)    # evidence that b > a (Student's t upper tail)
    p_down = _stdtr(df, t)   # evidence that b < a
    p_up = np.where(degenerate & (diff == 0), 1.0, p_up)
    p_down = np.where(degenerate & (diff == 0), 1.0, p_down)
    return ma, diff, se, df, p_up, p_down


def _interval(diff, se, df, scale, logged, tail):
    """Bounds of the relative change, each end a one-sided (1 - tail) bound."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        half = np.where(se == 0, 0.0, _stdtrit(df, 1 - tail) * se)
        lo = np.where(logged, np.expm1(diff - half), (diff - half) / scale)
        hi = np.where(logged, np.expm1(diff + half), (diff + half) / scale)
    return lo, hi


def _adjusted_tail(adjusted: np.ndarray, alpha: float) -> float:
    """The per-metric level at which Benjamini-Hochberg called R of m: alpha * max(R, 1) / m.

    A p-value below it is exactly a BH call (R = 0: none is), so an interval at
    this level excludes zero exactly for the called metrics."""
    tested = ~np.isnan(adjusted)
    m = int(tested.sum())
    if m == 0:
        return math.nan
    return alpha * max(int((adjusted[tested] < alpha).sum()), 1) / m


def compare_many(pairs, alpha: float = 0.05, threshold: float = 0.01, fdr_group: str = PRIMARY, *,
                 family: str | None = None, assume_exact=None,
                 exact_threshold: float | None = None) -> list[Comparison]:
    """Compare each (base_values, head_values, direction) pair; the pairs form one FDR group.

    `assume_exact`, one bool per pair, says which metrics are exact by construction
    (perflab.stats.exact; the samples' `exact`); without it only measured exactness applies.
    Exact metrics are called against `exact_threshold` (default: `threshold`). `family` is
    the former name of `fdr_group`, still accepted."""
    if family is not None:
        fdr_group = family
    arrays = [(np.asarray(a, dtype=float).ravel(), np.asarray(b, dtype=float).ravel(), int(d)) for a, b, d in pairs]
    assumed = [bool(x) for x in assume_exact] if assume_exact is not None else [False] * len(arrays)
    if len(assumed) != len(arrays):
        raise ValueError(f"assume_exact has {len(assumed)} values for {len(arrays)} pairs")
    exact = np.array([_exact_pair(a, b, x, d) for (a, b, d), x in zip(arrays, assumed)], dtype=bool)
    t = _welch_all(arrays)
    # An exact metric's Welch p-value is kept for reference only: it is no call, so it is
    # left out of the Benjamini-Hochberg adjustment (NaN there, as an untested metric's).
    raw = _raw_p(t, exact, np.array([d for _a, _b, d in arrays], dtype=int))
    t.p_up[exact], t.p_down[exact] = np.nan, np.nan
    directions = np.array([d for _a, _b, d in arrays]) if arrays else np.zeros(0, int)
    adj = _adjust(t, directions, alpha)
    bar = threshold if exact_threshold is None else exact_threshold
    out = [_judge_exact(*arrays[i], bar, fdr_group, raw[i], assumed[i]) if exact[i]
           else _judge(i, t, adj, arrays[i][2], alpha, threshold, fdr_group) for i in range(len(arrays))]
    for i, c in enumerate(out):
        if assumed[i] and not exact[i] and arrays[i][0].size and arrays[i][1].size:
            # Exact by construction (icount instruction-time, a count) whose samples nevertheless
            # disagree: never passed off as exact; every view shows this caveat with the row.
            spread = _exact.resolution(arrays[i][0], arrays[i][1])
            how = f"spread by {spread * 100:.2g}%" if spread is not None else "not all positive"
            c.warnings.append(Caveat(NOT_EXACT, f"not exact: an exact figure whose samples {how} (beyond "
                                                f"{_exact.EXACT_LIMIT * 100:g}%): compared statistically"))
    return out


def _raw_p(t: _Welch, exact: np.ndarray, directions: np.ndarray) -> np.ndarray:
    """The unadjusted p-value of each exact pair in the direction of its observed change (two-sided
    for informational metrics); NaN where a side has fewer than two samples."""
    if not exact.size:
        return np.zeros(0)
    one = np.fmin(t.p_up, t.p_down)
    return np.where(directions == INFORMATIONAL, np.minimum(1.0, 2 * one), one)


def _exact_pair(a: np.ndarray, b: np.ndarray, assume_exact: bool, direction: int = LOWER_IS_BETTER) -> bool:
    """Whether a pair is compared as exact; cheap for the common case of a few noisy samples.
    Exact by construction, a side whose samples settle on its figure (a tick disturbed a few:
    stats.exact.settled) is exact too, as show, log and detect's points take it."""
    if a.size == 0 or b.size == 0:
        return False
    if not assume_exact and min(a.size, b.size) < _exact.MEASURED_MIN:
        return False
    if _exact.is_exact(a, b, assume_exact=assume_exact):
        return True
    return assume_exact and bool((a > 0).all() and (b > 0).all()) and \
        _exact.settled(a.tolist(), direction) and _exact.settled(b.tolist(), direction)


def _judge_exact(a: np.ndarray, b: np.ndarray, d: int, threshold: float, fdr_group: str,
                 p_value: float = math.nan, assumed: bool = False) -> Comparison:
    """An exact metric's verdict: the ratio against its resolution (perflab.stats.exact), no test.
    Exact by construction, the resolution is that of the samples that agree with each side's
    figure: the ticked ones set aside (and counted in the caveat)."""
    res = _exact.resolution(a, b)
    aside = 0
    if assumed and res is not None and res > _exact.EXACT_LIMIT:
        kept = [_exact.settled_samples(a.tolist(), d), _exact.settled_samples(b.tolist(), d)]
        if None not in kept:
            res = _exact.resolution(*kept)
            aside = a.size + b.size - sum(len(k) for k in kept)
    v = _exact.compare_exact(a, b, resolution=res, threshold=threshold, direction=d)
    # Each side's figure is the one the ratio is of: its least disturbed sample (named EXACT).
    b0, h0 = summarize(a, d, exact=True), summarize(b, d, exact=True)
    med = h0.median / b0.median - 1 if b0.median != 0 else math.nan
    r = v.resolution
    shown = f"{r * 100:.2g}%"
    how = "measured" if res is not None else "assumed: no repeated samples"
    if aside:
        how += f"; {aside} disturbed sample{'s' if aside != 1 else ''} set aside"
    warnings = [Caveat(EXACT, f"exact: compared as a ratio with resolution ±{shown} ({how}), no t-test; "
                              f"changes beyond {_exact.EXACT_FACTOR * r * 100:.2g}% are called")]
    if _exact.change_called(v.pct_change, res, 0.0) and not v.called:
        warnings.append(Caveat(BELOW_EFFECT, f"beyond the resolution, but below the {threshold * 100:g}% "
                                             "minimum effect: not called"))
    ci = v.interval if math.isfinite(v.pct_change) else None
    return Comparison(b0, h0, v.pct_change, ci, float(p_value), math.nan, v.verdict, EXACT_TEST, warnings,
                      median_change=med, ci_adjusted=ci, ci_level=math.nan, fdr_group=fdr_group,
                      fdr_group_size=0, detectable=_exact.EXACT_FACTOR * r, exact=True, resolution=r)


@dataclass
class _Welch:
    """Every pair's summaries and Welch statistics (NaN where a side has too few samples)."""

    base: list
    head: list
    test: list[str]              # "welch-log", "welch" or "none"
    p_up: np.ndarray
    p_down: np.ndarray
    diff: np.ndarray
    se: np.ndarray
    df: np.ndarray
    scale: np.ndarray
    logged: np.ndarray


def _welch_all(arrays) -> _Welch:
    """Summaries and Welch statistics of every pair, computed per bucket of equal sample counts."""
    m = len(arrays)
    t = _Welch([None] * m, [None] * m, ["none"] * m, np.full(m, np.nan), np.full(m, np.nan),
               *(np.full(m, np.nan) for _ in range(4)), np.zeros(m, dtype=bool))
    buckets: dict[tuple, list[int]] = defaultdict(list)
    for i, (a, b, _d) in enumerate(arrays):
        positive = bool(a.size and b.size and (a > 0).all() and (b > 0).all())
        buckets[(a.size, b.size, positive)].append(i)

    for (na, nb, positive), idx in buckets.items():
        a = np.array([arrays[i][0] for i in idx]).reshape(len(idx), na)
        b = np.array([arrays[i][1] for i in idx]).reshape(len(idx), nb)
        dirs = np.array([arrays[i][2] for i in idx])
        for j, s in zip(idx, _summaries(a, dirs)):
            t.base[j] = s
        for j, s in zip(idx, _summaries(b, dirs)):
            t.head[j] = s
        if na < MIN_SAMPLES or nb < MIN_SAMPLES:
            continue
        la, lb = (np.log(a), np.log(b)) if positive else (a, b)
        ma, d_, s_, f_, up, down = _welch(la, lb)
        ix = np.array(idx)
        t.p_up[ix], t.p_down[ix], t.diff[ix], t.se[ix], t.df[ix] = up, down, d_, s_, f_
        t.scale[ix] = np.abs(ma)
        t.logged[ix] = positive
        for j in idx:
            t.test[j] = "welch-log" if positive else "welch"
    return t


@dataclass
class _Adjusted:
    """The p-values of the FDR group by question, adjusted, and the intervals at their levels."""

    p_reg: np.ndarray
    p_imp: np.ndarray
    p_inf: np.ndarray
    adj_reg: np.ndarray
    adj_imp: np.ndarray
    adj_inf: np.ndarray
    size_dir: int
    size_inf: int
    worse: np.ndarray            # the observed change goes the harmful way
    tail: np.ndarray             # one-sided level of ci_adjusted's ends
    lo: np.ndarray
    hi: np.ndarray
    lo_adj: np.ndarray
    hi_adj: np.ndarray
    detectable: np.ndarray


def _adjust(t: _Welch, directions: np.ndarray, alpha: float) -> _Adjusted:
    """Benjamini-Hochberg per question over the FDR group, and each metric's intervals."""
    m = directions.size
    # Which one-sided question is a regression depends on the metric's direction.
    p_reg = np.where(directions == LOWER_IS_BETTER, t.p_up, np.where(directions == HIGHER_IS_BETTER, t.p_down, np.nan))
    p_imp = np.where(directions == LOWER_IS_BETTER, t.p_down, np.where(directions == HIGHER_IS_BETTER, t.p_up, np.nan))
    # Informational metrics: two-sided, adjusted among themselves.
    p_inf = np.where(directions == INFORMATIONAL, np.minimum(1.0, 2 * np.fmin(t.p_up, t.p_down)), np.nan)
    adj_reg, adj_imp, adj_inf = (bh_adjusted(p) for p in (p_reg, p_imp, p_inf))
    size_dir, size_inf = int((~np.isnan(p_reg)).sum()), int((~np.isnan(p_inf)).sum())

    # Intervals: unadjusted (each end at 1 - alpha), and at the level of the
    # question the observed change is tested in (two-sided for informational).
    went_up = t.p_up <= t.p_down
    worse = went_up == (directions == LOWER_IS_BETTER)
    tail = np.where(directions == INFORMATIONAL, _adjusted_tail(adj_inf, alpha) / 2,
                    np.where(worse, _adjusted_tail(adj_reg, alpha), _adjusted_tail(adj_imp, alpha)))
    lo, hi = _interval(t.diff, t.se, t.df, t.scale, t.logged, np.full(m, alpha))
    lo_adj, hi_adj = _interval(t.diff, t.se, t.df, t.scale, t.logged, tail)
    detectable = _detectable(t.se, t.df, t.scale, t.logged, alpha)
    return _Adjusted(p_reg, p_imp, p_inf, adj_reg, adj_imp, adj_inf, size_dir, size_inf, worse, tail,
                     lo, hi, lo_adj, hi_adj, detectable)


def _judge(i: int, t: _Welch, adj: _Adjusted, d: int, alpha: float, threshold: float, fdr_group: str) -> Comparison:
    """Metric i's verdict and caveats."""
    b0, h0 = t.base[i], t.head[i]
    pct = h0.center / b0.center - 1 if b0.n and h0.n and b0.center != 0 else math.nan
    med = h0.median / b0.median - 1 if b0.n and h0.n and b0.median != 0 else math.nan
    if t.test[i] == "none":
        return Comparison(b0, h0, pct, None, math.nan, math.nan, INSUFFICIENT, "none",
                          [Caveat(TOO_FEW, f"too few samples to tell: a test needs at least {MIN_SAMPLES} "
                                           f"samples per side (n={b0.n} vs {h0.n})")],
                          median_change=med, fdr_group=fdr_group)
    warnings = []
    if min(b0.n, h0.n) < FEW_SAMPLES:
        warnings.append(Caveat(FEW, f"few samples (n={b0.n} vs {h0.n}): only large changes can be detected"))
    # One caveat per noisy side, saying which (`side`: the layouts name that side's label): a
    # noisy base must not make a quiet head read as noisy (issue 33). A NaN CoV is not noisy.
    for side, summary, text in (("base", b0, "the base's CoV"), ("head", h0, "CoV")):
        if abs(summary.cov) > NOISY_COV:
            caveat = Caveat(NOISY, f"noisy: {text} {abs(summary.cov) * 100:.1f}%")
            caveat.side = side
            warnings.append(caveat)
    if t.test[i] == "welch":
        warnings.append(Caveat(RAW_VALUES, "values not all positive: tested on raw values, not logs"))
    worse = adj.worse[i]
    if d == INFORMATIONAL:
        p, padj, size = adj.p_inf[i], adj.adj_inf[i], adj.size_inf
        big_enough = not math.isnan(pct) and abs(pct) >= threshold
        verdict = CHANGED if padj < alpha and big_enough else NO_CHANGE
    else:
        p, padj, size = (adj.p_reg[i], adj.adj_reg[i], adj.size_dir) if worse else (adj.p_imp[i], adj.adj_imp[i], adj.size_dir)
        big_enough = not math.isnan(pct) and abs(pct) >= threshold
        called = padj < alpha and big_enough
        verdict = (REGRESSION if worse else IMPROVEMENT) if called else NO_CHANGE
    if padj < alpha and not big_enough:
        warnings.append(Caveat(BELOW_EFFECT, f"significant, but the change is below the {threshold * 100:g}% "
                                             "minimum effect: not called"))
    seen = float(adj.detectable[i])
    if verdict == NO_CHANGE and not seen <= BLIND_ABOVE and fdr_group != MONITOR:
        shown = f"{seen * 100:.1f}%" if math.isfinite(seen) else "no finite change"
        warnings.append(Caveat(BLIND, f"could not have seen a {BLIND_ABOVE * 100:g}% change: these samples "
                                      f"detect {shown} with {POWER * 100:g}% power"))
    return Comparison(b0, h0, pct, (float(adj.lo[i]), float(adj.hi[i])), float(p), float(padj), verdict, t.test[i],
                      warnings, median_change=med, ci_adjusted=(float(adj.lo_adj[i]), float(adj.hi_adj[i])),
                      ci_level=float(1 - 2 * adj.tail[i]), fdr_group=fdr_group, fdr_group_size=size, detectable=seen)


def _detectable(se, df, scale, logged, alpha: float) -> np.ndarray:
    """Smallest relative change detected with POWER, two-sided at alpha, per metric (inf where untested)."""
    out = np.full(se.shape, np.inf)
    ok = np.isfinite(se) & np.isfinite(df) & (df > 0)
    if ok.any():
        delta = (_stdtrit(df[ok], 1 - alpha / 2) + _stdtrit(df[ok], POWER)) * se[ok]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            out[ok] = np.where(logged[ok], np.expm1(delta), delta / scale[ok])
    out[~np.isfinite(out)] = np.inf
    return out


def bh_adjusted(p: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values of the finite entries; NaN elsewhere."""
    out = np.full(p.shape, np.nan)
    ok = ~np.isnan(p)
    if ok.any():
        q = p[ok]
        m = q.size
        order = np.argsort(q)
        # p_(i) * m / i, made monotone from the largest down, at most 1
        scaled = q[order] * m / np.arange(1, m + 1)
        adjusted = np.minimum(np.minimum.accumulate(scaled[::-1])[::-1], 1.0)
        back = np.empty(m)
        back[order] = adjusted
        out[ok] = back
    return out


def geomean_ratio(comparisons, of: str = "center") -> float:
    """Geometric mean of head/base over the comparisons with positive figures.

    `of` is the figure compared: "center" (the mean, or hmean for rates) or
    "median" (benchstat's geomean row)."""
    pairs = [(getattr(c.base, of), getattr(c.head, of)) for c in comparisons if c is not None]
    ratios = [h / b for b, h in pairs if b > 0 and h > 0]
    if not ratios:
        return math.nan
    return float(np.exp(np.mean(np.log(ratios))))

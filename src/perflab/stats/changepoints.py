"""Change points: where the level of a series (one value per run, in order) changes.

The method (docs/changepoints.md has the reasoning and the measured figures):

1. Noise, robustly: sigma = 1.4826 * MAD(first differences) / sqrt(2). Steps and
   spikes touch few differences, so they barely move it.
2. Spikes set aside (a Hampel filter): a point farther than SPIKE_SIGMAS * sigma
   from the median of the 2*HALF_WINDOW+1 points around it is an outlier. The
   window is as wide as the shortest level plus two, so that a level of
   `min_size` points keeps its own median and is never taken for a spike,
   while a spike of 1 or 2 points always is.
3. Candidates by seeded binary segmentation (Kovacs, Li, Buhlmann, Munk 2020)
   of the squared error, on the series standardised by sigma with the outliers
   replaced by their local median: segments at least `min_size` points long,
   a split kept when it reduces the squared error by more than
   PENALTY_FACTOR * log(n); each then moved to the best split between its
   neighbours, neighbouring pairs jointly (perflab.stats.changepoint_placement).
4. Validation, weakest first: every change point is tested against the two
   segments between its neighbours (outliers left out) with a two-sample t-test
   (pooled variance) on the logarithms (raw values when some are <= 0),
   Bonferroni-adjusted over the positions the split could have taken; it stays
   only if that p < alpha, the change is at least `min_effect`, and two levels
   explain the two segments better than one straight line (a slow drift is not
   a level change); a level of a few points also against the series' own tails. The
   change point that fails worst is removed and its neighbours are placed and tested
   again, until all pass; then each segment is searched again (SECOND_SCAN).
5. Noise that is not independent and Gaussian-with-spikes: more than
   MAX_SPIKE_SHARE outliers means two modes or heavy tails, so none is set aside
   and sigma is measured without robustness; and when the residuals around the
   levels found keep a significant lag-1 autocorrelation rho (a machine that
   wanders from run to run), steps 3-4 run again with the long-run variance,
   (1 + rho) / (1 - rho) times sigma^2.

Everything is vectorised numpy (the t distribution from perflab.stats.student_t);
20 series of 500 points take ~0.1 s of CPU.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache

import numpy as np

from perflab.stats import changepoint_placement as placement, power, student_t

ALPHA = 0.001          # two-sided level of the validation test
MIN_SIZE = 3           # shortest level, in points; a shorter excursion is a spike
MIN_EFFECT = 0.01      # smallest relative change called (as compare's threshold)
PENALTY_FACTOR = 1.0   # least squared-error reduction of a candidate split, in sigma^2 * log(n)
SPIKE_SIGMAS = 5.0     # Hampel threshold, in sigmas
HALF_WINDOW = MIN_SIZE - 1
# A series without noise (a count, a deterministic figure) still needs a scale:
# this fraction of its level, far below any change worth calling.
ZERO_NOISE_FLOOR = 1e-6
# More outliers than this share of the points are the noise's own shape (two
# modes, heavy tails), not spikes: then the noise is measured without robustness.
MAX_SPIKE_SHARE = 0.03
# Serial correlation of the noise is estimated up to this (AR(1) coefficient).
MAX_RHO = 0.9
# It is taken as real beyond this many standard errors (sqrt(2/n): that of the estimate
# from first differences, the larger of the two estimates' errors).
CORRELATION_Z = 2.5
# An excursion's two sides count as one level unless they differ at this (unadjusted) p.
SAME_LEVEL_P = 0.01
# ... and an excursion and each side are tested as one only over this many points: a sliver
# of a few points between candidates is noise far more often than a level.
PAIR_MIN_POINTS = 15
# After validation each segment is searched again on its own for candidates the first search
# blocked (a split kept only if an interval around it held no stronger one), at this many
# times the first penalty: at 1x the CPU doubled for less recall than at 2x.
SECOND_SCAN = 2.0
# A "no change" is said to be blind when the series could not have seen a change this large.
RELEVANT_CHANGE = 0.05


@dataclass(frozen=True)
class Segment:
    """A run of points at one level (outliers left out of the figures)."""

    start: int        # index of its first point
    stop: int         # one past its last point
    n: int            # points used (outliers excluded)
    mean: float
    stddev: float     # NaN below 2 points


@dataclass(frozen=True)
class ChangePoint:
    index: int                  # the first point at the new level
    before: Segment
    after: Segment
    change: float               # relative change of the level, after / before - 1
    ci: tuple[float, float]     # 95% interval of `change`
    p_value: float              # two-sided t-test (pooled variance) of before against after,
                                # Bonferroni-adjusted over the positions searched; for an edge that
                                # only its excursion as a whole confirms, that test's (_pair_test)
    detectable: float           # smallest relative change these points detect with 90% power (stats.power)
    test: str                   # "t-log" (on logarithms) or "t" (raw values: some were <= 0)

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class Detection:
    n: int
    change_points: list[ChangePoint]
    noise: float                # robust sigma of the points (absolute)
    level: float                # median of the points
    outliers: list[int] = field(default_factory=list)   # indices set aside as spikes
    # Smallest relative change detectable with 90% power at alpha: a step
    # halfway along the series, and a step `min_size` points before its end.
    detectable_mid: float = math.nan
    detectable_end: float = math.nan
    serial_correlation: float = 0.0   # lag-1 autocorrelation of the noise, when significant (tests widened for it)
    # Adjusted p-values of the candidates that were tested and dropped: with the change
    # points' own, the family a cross-series adjustment (across_series) counts.
    dropped_p: list[float] = field(default_factory=list)
    alpha: float = ALPHA
    min_size: int = MIN_SIZE
    # An exact series (perflab.stats.exact_series): levels split against this resolution, no t-test.
    exact: bool = False
    resolution: float = math.nan

    @property
    def blind(self) -> bool:
        """No step of RELEVANT_CHANGE, even halfway along, would be found with 90% power
        (False when that is unknown: a level of zero has no relative change)."""
        return self.detectable_mid > RELEVANT_CHANGE

    @property
    def noise_cov(self) -> float:
        """The robust noise relative to the level."""
        return self.noise / abs(self.level) if self.level else math.nan

    def as_dict(self) -> dict:
        return {**asdict(self), "noise_cov": self.noise_cov, "blind": self.blind, "change_points": [c.as_dict() for c in self.change_points]}


# -- noise and spikes ----------------------------------------------------------

def _median(a: np.ndarray) -> float:
    """np.median of a 1-D array, the same number (NaN when a holds one) at an eighth of
    the cost: detect takes ~12 per series, and np.median's generality costs ~90 us a
    call, plus numpy.ma's import (12 ms) on the first. The partition also places the
    largest element (a NaN if any) last, as np.median's own check does."""
    n = a.size
    if n == 0:
        return math.nan
    h = n // 2
    if n % 2:
        part = np.partition(a, (h, n - 1))
        middle = float(part[h])
    else:
        part = np.partition(a, (h - 1, h, n - 1))
        middle = float(part[h - 1] + part[h]) / 2
    return float(part[-1]) if part[-1] != part[-1] else middle


def robust_sigma(x: np.ndarray) -> float:
    """Noise of a series from the MAD of its first differences (steps and spikes barely count)."""
    if x.size < 3:
        return float(np.std(x, ddof=1)) if x.size == 2 else 0.0
    d = np.diff(x)
    return float(1.4826 * _median(np.abs(d - _median(d))) / math.sqrt(2))


def _rolling_median(x: np.ndarray, half: int) -> np.ndarray:
    """Median of the window [i - half, i + half] around each point. Past the ends the
    window is padded with the median of the first (last) 2*half+1 points: a level
    of half+1 points at an end keeps its median, an excursion of half points does not."""
    n = x.size
    if n == 0:
        return x.copy()
    width = 2 * half + 1
    padded = np.concatenate([np.full(half, _median(x[:width])), x, np.full(half, _median(x[-width:]))])
    windows = np.lib.stride_tricks.sliding_window_view(padded, width)
    # the middle of each (odd) window, as np.median(windows, axis=1) gives it, NaN included
    part = np.partition(windows, (half, width - 1), axis=1)
    return np.where(np.isnan(part[:, -1]), np.nan, part[:, half])


def spikes(x: np.ndarray, sigma: float, half: int = HALF_WINDOW, k: float = SPIKE_SIGMAS):
    """(mask of the points that stand out from their neighbourhood, the local medians)."""
    med = _rolling_median(x, half)
    if x.size < 2 * half + 1:
        return np.zeros(x.size, dtype=bool), med
    return np.abs(x - med) > k * sigma, med


# -- candidates: seeded binary segmentation on the squared error ---------------

@lru_cache(maxsize=64)   # series of one store mostly share a length
def _seeded_intervals(n: int, min_len: int, decay: float = 0.5) -> list[tuple[int, np.ndarray]]:
    """(length, starts) of the seeded intervals of Kovacs, Li, Buhlmann and Munk (2020):
    at each scale, intervals of length n * decay^k overlapping by half, down to min_len.
    Every change point has an interval around it that holds no other, at some scale."""
    out = [(n, np.zeros(1, dtype=np.int64))]
    k = 1
    while True:
        length = int(math.ceil(n * decay ** k))
        if length < min_len:
            return out
        count = 2 * int(math.ceil((1 / decay) ** k)) - 1
        spaced = np.floor(np.linspace(0, n - length, count)).astype(np.int64)
        # ascending already: dropping repeats is np.unique's answer without its cost
        # (it imports numpy.ma, 10 ms of `perflab detect`)
        starts = spaced[np.concatenate(([True], spaced[1:] != spaced[:-1]))]
        out.append((length, starts))
        k += 1


def seeded_binary_segmentation(z: np.ndarray, penalty: float, min_size: int) -> list[int]:
    """Change indices (first point of each new segment), ascending.

    In every seeded interval, the split that most reduces the squared error; then,
    greedily from the largest reduction down to `penalty`, each split whose interval
    holds no split already taken. Segments are at least min_size long. O(n log n)
    array operations: a few milliseconds for 500 points where PELT, which cannot
    prune a series without changes, is quadratic."""
    n = z.size
    if n < 2 * min_size:
        return []
    cs = np.concatenate([[0.0], np.cumsum(z)])
    gains, splits, lefts, rights = [], [], [], []
    for length, starts in _seeded_intervals(n, 2 * min_size):
        offsets = np.arange(min_size, length - min_size + 1)
        ends = starts + length
        tau = starts[:, None] + offsets[None, :]
        left = cs[tau] - cs[starts][:, None]
        total = (cs[ends] - cs[starts])[:, None]
        # SSE reduction of splitting [s, e) at tau (the sums of squares cancel out).
        gain = left * left / offsets + (total - left) ** 2 / (length - offsets) - total * total / length
        best = gain.argmax(axis=1)
        rows = np.arange(starts.size)
        gains.append(gain[rows, best])
        splits.append(tau[rows, best])
        lefts.append(starts)
        rights.append(ends)
    gain, split, left, right = (np.concatenate(a) for a in (gains, splits, lefts, rights))
    taken: list[int] = []
    for i in np.argsort(-gain, kind="stable"):
        if gain[i] <= penalty:
            break
        s, e = left[i], right[i]
        if not any(s < p < e for p in taken):
            taken.append(int(split[i]))
    return sorted(taken)


# -- validation -----------------------------------------------------------------

def _student(a: np.ndarray, b: np.ndarray, inflation: float = 1.0):
    """Two-sample t-test with pooled variance: (difference b - a, its standard error,
    degrees of freedom, two-sided p). Pooled, not Welch: the segments come from one
    series whose noise the method already takes as common (sigma), and Welch's test
    with 3 points on one side has about 2 degrees of freedom, so it could confirm no
    level shorter than ~6 runs at alpha 0.001 however large the change.

    `inflation` > 1 for serially correlated noise: the variance of a mean of n
    points is that many times sigma^2/n, and the points count as n/inflation."""
    na, nb = a.size, b.size
    dof = max(na + nb - 2, 1)
    # sums of squares by hand: ndarray.mean/var cost ~10 us a call in generality, and a
    # validation runs this thousands of times per store
    ma, mb = float(a.sum()) / na, float(b.sum()) / nb
    da, db = a - ma, b - mb
    diff = mb - ma
    pooled = (float(da @ da) + float(db @ db)) / dof
    se = math.sqrt(pooled * inflation * (1 / na + 1 / nb))
    dof = max((na + nb) / inflation - 2, 1.0)
    if se == 0:
        return diff, 0.0, dof, (0.0 if diff != 0 else 1.0), 0.0
    # perflab.stats.student_t, not scipy: importing scipy.special costs `perflab detect` 0.3 s.
    p = student_t.two_sided_p(dof, diff / se)
    return diff, se, dof, p, math.sqrt(pooled * inflation)


def _segment(x: np.ndarray, keep: np.ndarray, start: int, stop: int) -> Segment:
    v = x[start:stop][keep[start:stop]]
    sd = float(v.std(ddof=1)) if v.size > 1 else math.nan
    return Segment(start, stop, int(v.size), float(v.mean()) if v.size else math.nan, sd)


def _line_gain(z: np.ndarray, start: int, index: int, stop: int) -> float:
    """SSE of one straight line over [start, stop) minus SSE of two levels split at
    `index` (both fits have two parameters). Negative: a drift, not a step."""
    y = z[start:stop]
    t = np.arange(y.size, dtype=float)
    t -= t.mean()
    yc = y - y.mean()
    sse_line = float(yc @ yc - (t @ yc) ** 2 / (t @ t)) if y.size > 2 else 0.0
    a, b = y[: index - start], y[index - start:]
    a, b = a - float(a.sum()) / a.size, b - float(b.sum()) / b.size
    sse_step = float(a @ a) + float(b @ b)
    return sse_line - sse_step


@dataclass
class _Tested:
    index: int
    ok: bool
    badness: tuple          # larger is weaker: (failed, p, -|change|)
    point: ChangePoint | None


def positions(start: int, stop: int, min_size: int) -> int:
    """Places a change could have been put in [start, stop): the multiplicity of the search."""
    return max(1, stop - start - 2 * min_size + 1)


def _test(x, logx, keep, z, start, index, stop, alpha, min_effect, min_size, inflation=1.0, describe=False,
          resid=None) -> _Tested:
    """Is there a level change at `index` between the segments [start, index) and
    [index, stop)? With `describe`, also its figures (interval, power, segments).

    The position was chosen as the best of those in [start, stop): the p-value is
    Bonferroni-adjusted over them (a scan statistic), and the detectable change is
    quoted at the same adjusted level, or a search over 500 positions would find a
    "significant" split in pure noise several times in a thousand series."""
    searched = positions(start, stop, min_size)
    values = logx if logx is not None else x
    a = values[start:index][keep[start:index]]
    b = values[index:stop][keep[index:stop]]
    if a.size == 0 or b.size == 0 or a.size + b.size < 3:
        return _Tested(index, False, (1, 1.0, 0.0), None)
    diff, se, dof, p, sd = _student(a, b, inflation)
    p = min(1.0, p * searched)
    scale = 1.0 if logx is not None else (abs(float(a.mean())) or 1.0)
    relative = math.expm1 if logx is not None else (lambda d: d / scale)
    change = relative(diff)
    # Both models have two parameters: a line that fits at least as well means a drift.
    drift = _line_gain(z, start, index, stop) <= 0
    ok = p < alpha and abs(change) >= min_effect and not drift
    if ok and resid is not None and min(a.size, b.size) <= placement.SHORT_LEVEL:
        # a few points: the series' own tails, not normality, say whether they are a level
        short, other = (a, b) if a.size <= b.size else (b, a)
        ok = placement.short_level_p(short, float(other.mean()), resid, searched) < placement.SHORT_LEVEL_P
    point = None
    if describe:
        half = student_t.quantile(dof, 0.975) * se if se > 0 else 0.0
        detectable = power.detectable_change(a.size, b.size, sd, alpha / searched, logged=logx is not None, scale=scale)
        point = ChangePoint(index, _segment(x, keep, start, index), _segment(x, keep, index, stop), change,
                            (relative(diff - half), relative(diff + half)), p, detectable,
                            "t-log" if logx is not None else "t")
    return _Tested(index, ok, (0 if ok else 1, p, -abs(change)), point)


def _pair_test(values, keep, bounds: list[int], j: int, least: float, min_size: int,
               inflation: float) -> tuple[float, float]:
    """(adjusted p, relative change) of the excursion between bounds[j] and bounds[j + 1]:
    its points against those of the segments on both sides, pooled; (1, 0) unless the
    middle level lies above both sides or below both (it went and came back).

    An excursion of 3% over 30 points is plain as a whole while either edge alone, tested
    against a neighbour segment that the noise has made look closer, may miss alpha. The
    p-value is Bonferroni-adjusted over every pair of positions the two edges could take."""
    s, a, b, e = bounds[j - 1], bounds[j], bounds[j + 1], bounds[j + 2]
    left, mid, right = (values[u:v][keep[u:v]] for u, v in ((s, a), (a, b), (b, e)))
    if mid.size < PAIR_MIN_POINTS or not placement.sides_long_enough(left, mid, right, s == 0, e == len(values),
                                                                        PAIR_MIN_POINTS):
        return 1.0, 0.0
    m = mid.mean()
    # The middle beyond both sides, by the least change each, and the sides at one level
    # (else pooling them would test a step beside a sliver, not an excursion).
    near = min(abs(m - left.mean()), abs(m - right.mean()))
    if (m - left.mean()) * (m - right.mean()) <= 0 or near < least or abs(left.mean() - right.mean()) > near / 2:
        return 1.0, 0.0
    if left.size + right.size > 2 and _student(left, right, inflation)[3] < SAME_LEVEL_P:
        return 1.0, 0.0
    diff, _, _, p, _ = _student(np.concatenate([left, right]), mid, inflation)
    return min(1.0, p * positions(s, b, min_size) * positions(a, e, min_size)), diff


def _excursion(values, keep, bounds: list[int], i: int, least: float, min_size: int, inflation: float,
               logged: bool, scale: float) -> tuple[float, float]:
    """(adjusted p, relative change) of the better excursion that change point i is an edge
    of (with the one before it or the one after): (1, 0) when neither is one."""
    best = (1.0, 0.0)
    for j in (i - 1, i):
        if 1 <= j and j + 2 < len(bounds):
            p, diff = _pair_test(values, keep, bounds, j, least, min_size, inflation)
            if p < best[0]:
                best = (p, math.expm1(diff) if logged else diff / scale)
    return best


def _segmentation(z, x, logx, keep, *, alpha, min_effect, min_size, penalty, inflation, resid=None,
                  dropped=None) -> list[int]:
    """Bounds [0, change points..., n]: candidates, then placed and validated weakest first
    (the adjusted p-value of each candidate dropped is appended to `dropped`). A change
    point that fails alone stays when it and a neighbour pass together as one excursion
    (_pair_test)."""
    bounds = [0, *seeded_binary_segmentation(z, penalty, min_size), z.size]
    values = logx if logx is not None else x
    scale = 1.0 if logx is not None else (abs(_median(x)) or 1.0)
    # min_effect in the units of `values` (log1p: the smaller of the two log distances)
    least = math.log1p(min_effect) if logx is not None else min_effect * scale

    def test(i: int) -> _Tested:
        t = _test(x, logx, keep, z, bounds[i - 1], bounds[i], bounds[i + 1], alpha, min_effect, min_size, inflation,
                  resid=resid)
        if not t.ok:
            p, change = _excursion(values, keep, bounds, i, least, min_size, inflation, logx is not None, scale)
            if p < alpha:
                return _Tested(t.index, True, (0, p, -abs(change)), None)
        return t

    def validate() -> None:
        while _validation_round(z, bounds, test, min_size, alpha, dropped):
            pass

    validate()
    if SECOND_SCAN:
        more = {s + c for s, e in zip(bounds, bounds[1:])
                for c in seeded_binary_segmentation(z[s:e], SECOND_SCAN * penalty, min_size)}
        if more - set(bounds):
            bounds[:] = sorted(set(bounds) | more)
            validate()
    return bounds


def _validation_round(z, bounds: list[int], test, min_size: int, alpha: float, dropped) -> bool:
    """One round: every change point placed (placement.refine) and tested; the weakest failure
    dropped, its neighbours placed again and tested, until all pass. True when one was dropped
    (bounds changed in place)."""
    # Each change point at its best position between its neighbours, then
    # validated: the weakest failure is dropped and its neighbours tested again.
    placement.refine(z, bounds, min_size)
    tested = [test(i) for i in range(1, len(bounds) - 1)]
    removed = False
    while tested:
        worst = max(range(len(tested)), key=lambda k: tested[k].badness)
        if tested[worst].ok:
            break
        if dropped is not None:
            # failed on effect size or drift, not on p: no discovery for the cross-series count
            p = tested[worst].badness[1]
            dropped.append(p if p >= alpha else 1.0)
        del tested[worst], bounds[worst + 1]
        removed = True
        # the two that bordered it, placed again in the wider span it leaves
        placement.refine_at(z, bounds, (worst, worst + 1), min_size)
        # a pair test reaches two change points on either side
        for k in range(worst - 2, worst + 2):
            if 0 <= k < len(tested):
                tested[k] = test(k + 1)
    return removed


def residual_correlation(z: np.ndarray, keep: np.ndarray, bounds: list[int]) -> float:
    """Lag-1 autocorrelation of the standardised points around their segment means
    (pairs within one segment, outliers left out), clipped to [0, MAX_RHO]; 0 when
    the residuals are rounding errors (a series without noise)."""
    num = den = 0.0
    for start, stop in zip(bounds, bounds[1:]):
        r = z[start:stop][keep[start:stop]]
        if r.size < 2:
            continue
        r = r - r.mean()
        num += float(r[1:] @ r[:-1])
        den += float(r @ r)
    if den <= 1e-6 * z.size:
        return 0.0
    return min(max(num / den, 0.0), MAX_RHO)


def difference_correlation(z: np.ndarray, keep: np.ndarray, bounds: list[int]) -> float:
    """Lag-1 autocorrelation of the noise from its first differences, clipped to [0, MAX_RHO]:
    for AR(1) noise of coefficient rho the differences correlate by -(1 - rho) / 2. A level
    change touches one difference, so a short excursion that the segmentation missed leaves
    this estimate alone where it makes the residuals look correlated; differences across a
    change point found or touching a spike are left out."""
    d = np.diff(z)
    ok = keep[1:] & keep[:-1]
    for b in bounds[1:-1]:
        ok[b - 1] = False
    pair = ok[1:] & ok[:-1]
    den = float(d[ok] @ d[ok])
    if den <= 1e-6 * z.size or not pair.any():
        return 0.0
    r = float(d[1:][pair] @ d[:-1][pair]) / den * ok.sum() / pair.sum()
    return min(max(1 + 2 * r, 0.0), MAX_RHO)


def detect(values, *, alpha: float = ALPHA, min_size: int = MIN_SIZE, min_effect: float = MIN_EFFECT,
           penalty_factor: float = PENALTY_FACTOR) -> Detection:
    """The level changes of `values` (one number per run, in order)."""
    x = np.asarray(values, dtype=float).ravel()
    n = x.size
    min_size = max(int(min_size), 1)
    if n == 0:
        return Detection(0, [], math.nan, math.nan, min_size=min_size, alpha=alpha)
    level = _median(x)
    sigma = robust_sigma(x)
    floor = ZERO_NOISE_FLOOR * (abs(level) or float(np.max(np.abs(x))) or 1.0)
    half = max(min_size - 1, 1)
    outlier, local = spikes(x, max(sigma, floor), half=half)
    if outlier.sum() > max(MAX_SPIKE_SHARE * n, 2):
        # Too many to be spikes: two modes or heavy tails. Their spread is the noise.
        sigma = max(sigma, float(np.std(np.diff(x), ddof=1)) / math.sqrt(2))
        outlier, local = spikes(x, max(sigma, floor), half=half)
    scale = max(sigma, floor)
    keep = ~outlier
    logx = np.log(x) if (x > 0).all() else None
    result = Detection(n, [], sigma, level, [int(i) for i in np.flatnonzero(outlier)], alpha=alpha, min_size=min_size,
                       detectable_mid=_series_detectable(x, logx, keep, n // 2, alpha / positions(0, n, min_size)),
                       detectable_end=_series_detectable(x, logx, keep, n - min_size, alpha / positions(0, n, min_size)))
    if n < 2 * min_size:
        return result

    # Standardised, with spikes replaced by their local median: the costs stay
    # well-conditioned and a spike costs nothing.
    cleaned = np.where(outlier, local, x)
    values = logx if logx is not None else x
    # the points' deviations from their local median (spikes set aside): the tails a short level is judged against
    resid = (values - _rolling_median(values, half))[keep]
    options = dict(alpha=alpha, min_effect=min_effect, min_size=min_size, penalty=penalty_factor * math.log(n),
                   resid=resid)
    z = (cleaned - level) / scale
    dropped: list[float] = []
    bounds = _segmentation(z, x, logx, keep, inflation=1.0, dropped=dropped, **options)
    # Serially correlated noise (a machine that wanders run to run) makes independent-
    # noise tests call its wander: when the residuals' lag-1 correlation is
    # significant, the long-run variance (1 + rho) / (1 - rho) times sigma^2 is used.
    rho = min(residual_correlation(z, keep, bounds), difference_correlation(z, keep, bounds))
    if rho > CORRELATION_Z * math.sqrt(2 / max(int(keep.sum()), 1)):
        result.serial_correlation = rho
        inflation = (1 + rho) / (1 - rho)
        z = z / math.sqrt(inflation)
        dropped = []
        bounds = _segmentation(z, x, logx, keep, inflation=inflation, dropped=dropped, **options)
    else:
        inflation = 1.0
    result.dropped_p = dropped
    result.change_points = _settled(x, logx, keep, z, bounds, inflation, options)
    return result


def _settled(x, logx, keep, z, bounds: list[int], inflation: float, options: dict) -> list[ChangePoint]:
    """The change points described where placement.settle puts them (the middle of the most
    likely window); where the best split (bounds as validated) if one of them does not hold
    there at alpha and min_effect."""
    settled = list(bounds)
    placement.settle(z, settled, options["min_size"])
    for candidate in (settled, bounds):
        points = [_described(x, logx, keep, z, candidate, i, inflation, options) for i in range(1, len(candidate) - 1)]
        if all(c.p_value < options["alpha"] and abs(c.change) >= options["min_effect"] for c in points):
            break
    return points


def _described(x, logx, keep, z, bounds: list[int], i: int, inflation: float, options: dict) -> ChangePoint:
    """The figures of change point i; its p-value that of its excursion (_pair_test) when
    that, not its own test, is what kept it."""
    alpha, min_effect, min_size = options["alpha"], options["min_effect"], options["min_size"]
    point = _test(x, logx, keep, z, bounds[i - 1], bounds[i], bounds[i + 1], alpha, min_effect, min_size, inflation,
                  describe=True, resid=options["resid"]).point
    if point.p_value < alpha:
        return point
    scale = 1.0 if logx is not None else (abs(_median(x)) or 1.0)
    least = math.log1p(min_effect) if logx is not None else min_effect * scale
    p, _ = _excursion(logx if logx is not None else x, keep, bounds, i, least, min_size, inflation, logx is not None, scale)
    return replace(point, p_value=min(p, point.p_value))


def _series_detectable(x: np.ndarray, logx: np.ndarray | None, keep: np.ndarray, split: int, alpha: float) -> float:
    """Smallest relative step detectable with 90% power had the series changed at `split`,
    from its robust noise (so that a real step in it does not inflate the answer):
    0 for a series without noise, NaN for one whose level is zero, inf for too few points."""
    n1, n2 = int(keep[:split].sum()), int(keep[split:].sum())
    values = (logx if logx is not None else x)[keep]
    sd = robust_sigma(values)
    scale = _median(values) if values.size else 0.0
    if n1 < 1 or n2 < 1 or n1 + n2 < 3:
        return math.inf
    if sd == 0:
        return 0.0
    if logx is None and scale == 0:
        return math.nan
    return power.detectable_change(n1, n2, sd, alpha, logged=logx is not None, scale=scale)


def across_series(detections: list[Detection], alpha: float = ALPHA) -> float:
    """The Benjamini-Hochberg cutoff at `alpha` over every candidate change point of every
    series (those kept and those dropped): a change point whose adjusted p-value exceeds it
    is not called. Exact series (no p-values) are outside the count. alpha when nothing
    was tested."""
    pvalues = sorted([c.p_value for d in detections if not d.exact for c in d.change_points]
                     + [p for d in detections if not d.exact for p in d.dropped_p])
    m = len(pvalues)
    cutoff = 0.0
    for k, p in enumerate(pvalues, start=1):
        if p <= alpha * k / m:
            cutoff = alpha * k / m
    return cutoff if m else alpha

"""Change points of an exact series: levels that agree to a resolution, split where they move.

A series of an exact metric (perflab.stats.exact: instruction counts, icount
instruction-time) is piecewise constant up to its resolution, so no test of means is
needed: a new level starts where a point leaves the current level's median by more
than EXACT_FACTOR resolutions, one point per side is enough, and the resolution is
the largest spread within a level (and within a point's own samples). A series whose
levels spread by more than EXACT_LIMIT is not exact: detect() returns None and the
statistical method (perflab.stats.changepoints) takes it. docs/changepoints.md.
"""

from __future__ import annotations

import math

import numpy as np

from perflab.stats import exact
from perflab.stats.changepoints import ChangePoint, Detection, Segment

EXACT_TEST = "exact"
# Below this many points the consecutive differences are mostly steps, not jitter: the resolution
# starts from the points' own samples (or DEFAULT_RESOLUTION) and grows with the levels found.
GUESS_MIN = 2 * exact.MEASURED_MIN + 1
MAX_ROUNDS = 8   # the resolution only grows between rounds; a few settle it


def detect(values, *, point_resolution: float | None = None, assume_exact: bool = False, min_size: int = 3,
           min_effect: float = exact.EXACT_MIN_EFFECT, alpha: float = math.nan) -> Detection | None:
    """The level changes of an exact series, or None when the series is not exact.

    `point_resolution` is the spread of the points' own samples (exact.resolution of
    them; None without repeated samples); `assume_exact` whether the metric is exact by
    construction (its samples' `exact`; else every level needs exact.MEASURED_MIN points
    to show it); `min_size` the shortest level in the middle of the series (a shorter
    excursion back to the same level is a spike; at either end one point is a level)."""
    x = np.asarray(values, dtype=float).ravel()
    n = x.size
    if n < 2 or not (x > 0).all() or not np.isfinite(x).all():
        return None
    if point_resolution is not None and point_resolution > exact.EXACT_LIMIT:
        return None
    res = point_resolution or 0.0
    # A first guess from the consecutive differences assumes steps are few; a series exact by
    # construction whose points' own samples measured the resolution needs no guess, and a
    # guess would lose its steps when most points step (kernel after kernel, issue 33).
    if n >= GUESS_MIN and not (assume_exact and point_resolution is not None):
        # A first guess from the consecutive differences (steps are few: the median ignores them).
        res = max(2 * float(np.median(np.abs(np.diff(x)) / x[:-1])), res)
        if res > exact.EXACT_LIMIT:
            return None
    for _ in range(MAX_ROUNDS):
        bar = exact.EXACT_FACTOR * exact.effective_resolution(res)
        bounds, outlier = _levels(x, bar, max(int(min_size), 1), min_effect)
        measured = max([_spread(x, outlier, s, e) for s, e in zip(bounds, bounds[1:])] + [point_resolution or 0.0])
        if measured > exact.EXACT_LIMIT:
            return None
        if measured <= res:
            break
        res = measured
    if not assume_exact and any(int((~outlier[s:e]).sum()) < exact.MEASURED_MIN for s, e in zip(bounds, bounds[1:])):
        return None
    return _detection(x, bounds, outlier, exact.effective_resolution(res), min_size, alpha)


def _spread(x: np.ndarray, outlier: np.ndarray, start: int, stop: int) -> float:
    v = x[start:stop][~outlier[start:stop]]
    return exact.spread(v) if v.size > 1 else 0.0


def _levels(x: np.ndarray, bar: float, min_size: int, min_effect: float) -> tuple[list[int], np.ndarray]:
    """Bounds [0, ..., n] of the levels and the mask of the spikes set aside."""
    starts = [0]
    for i in range(1, x.size):
        ref = float(np.median(x[starts[-1]:i]))
        if abs(x[i] / ref - 1) > bar:
            starts.append(i)
    bounds = starts + [x.size]
    outlier = np.zeros(x.size, dtype=bool)
    _drop_spikes(x, bounds, outlier, bar, min_size)
    _drop_small(x, bounds, outlier, bar, min_effect)
    return bounds, outlier


def _level(x: np.ndarray, outlier: np.ndarray, start: int, stop: int) -> float:
    v = x[start:stop][~outlier[start:stop]]
    return float(np.median(v)) if v.size else math.nan


def _drop_spikes(x, bounds: list[int], outlier: np.ndarray, bar: float, min_size: int) -> None:
    """A level shorter than min_size between two levels that agree is a spike: set aside, merged."""
    i = 1
    while i < len(bounds) - 2:
        s, e = bounds[i], bounds[i + 1]
        before = _level(x, outlier, bounds[i - 1], s)
        after = _level(x, outlier, e, bounds[i + 2])
        if e - s < min_size and abs(after / before - 1) <= bar:
            outlier[s:e] = True
            del bounds[i:i + 2]
            i = max(i - 1, 1)
        else:
            i += 1


def _drop_small(x, bounds: list[int], outlier: np.ndarray, bar: float, min_effect: float) -> None:
    """Change points whose step is within the bar or below the minimum effect are merged, smallest first."""
    while len(bounds) > 2:
        steps = [abs(_level(x, outlier, bounds[i], bounds[i + 1]) / _level(x, outlier, bounds[i - 1], bounds[i]) - 1)
                 for i in range(1, len(bounds) - 1)]
        k = int(np.argmin(steps))
        if exact.change_called(steps[k], bar / exact.EXACT_FACTOR, min_effect):
            return
        del bounds[k + 1]


def _segment(x: np.ndarray, outlier: np.ndarray, start: int, stop: int) -> Segment:
    v = x[start:stop][~outlier[start:stop]]
    return Segment(start, stop, int(v.size), float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else math.nan)


def _detection(x, bounds, outlier, res: float, min_size: int, alpha: float) -> Detection:
    bar = exact.EXACT_FACTOR * res
    points = []
    for i in range(1, len(bounds) - 1):
        before = _segment(x, outlier, bounds[i - 1], bounds[i])
        after = _segment(x, outlier, bounds[i], bounds[i + 1])
        change = after.mean / before.mean - 1
        points.append(ChangePoint(bounds[i], before, after, change, (change - res, change + res), math.nan, bar,
                                  EXACT_TEST))
    level = float(np.median(x))
    # The noise: the points' spread around their levels (absolute), spikes left out.
    fitted = np.concatenate([np.full(e - s, _level(x, outlier, s, e)) for s, e in zip(bounds, bounds[1:])])
    resid = (x - fitted)[~outlier]
    noise = float(resid.std(ddof=1)) if resid.size > 1 else 0.0
    out = Detection(int(x.size), points, noise, level, [int(i) for i in np.flatnonzero(outlier)],
                    detectable_mid=bar, detectable_end=bar, min_size=min_size, exact=True, resolution=res)
    if not math.isnan(alpha):
        out.alpha = alpha
    return out

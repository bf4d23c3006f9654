"""Where change points sit, and whether a short level is a level: the parts of the change-point
method (perflab.stats.changepoints) that look at a few points around one change.

- refine: every change point to its best place between its neighbours, then each adjacent
  pair jointly (the three-segment fit over both positions), repeated until nothing moves;
- sides_long_enough: whether the sides of an excursion are long enough to be one level;
- short_level_p: a level of a few points judged against the series' own tails, so that a
  cluster of outliers or of heavy-tailed values is not called (docs/changepoints.md).
"""

from __future__ import annotations

import math

import numpy as np

# Joint placement of two neighbouring change points: each moves at most this far, and the
# placement of all is repeated at most this many times (it converges in two or three).
PAIR_REACH = 15
REFINE_ROUNDS = 6


def refine(z: np.ndarray, bounds: list[int], min_size: int) -> None:
    """Move the inner bounds to their best places (in place): each to the best split between
    its neighbours, then every adjacent pair jointly (refine_pair), over again until nothing
    moves. One pass against neighbours that are themselves misplaced leaves both edges of a
    short excursion off; the joint fit of the three segments does not."""
    cs = np.concatenate([[0.0], np.cumsum(z)])
    for _ in range(REFINE_ROUNDS):
        before = list(bounds)
        for i in range(1, len(bounds) - 1):
            s, e = bounds[i - 1], bounds[i + 1]
            tau = np.arange(s + min_size, e - min_size + 1)
            if tau.size == 0:
                continue
            left = cs[tau] - cs[s]
            total = cs[e] - cs[s]
            gain = left * left / (tau - s) + (total - left) ** 2 / (e - tau)
            bounds[i] = int(tau[gain.argmax()])
        for i in range(1, len(bounds) - 2):
            refine_pair(cs, bounds, i, min_size)
        if bounds == before:
            return


def refine_at(z: np.ndarray, bounds: list[int], which, min_size: int) -> None:
    """Move the inner bounds numbered `which` to the best split between their neighbours."""
    cs = np.concatenate([[0.0], np.cumsum(z)])
    for i in which:
        if not 0 < i < len(bounds) - 1:
            continue
        s, e = bounds[i - 1], bounds[i + 1]
        tau = np.arange(s + min_size, e - min_size + 1)
        if tau.size:
            left = cs[tau] - cs[s]
            total = cs[e] - cs[s]
            bounds[i] = int(tau[(left * left / (tau - s) + (total - left) ** 2 / (e - tau)).argmax()])


def refine_pair(cs: np.ndarray, bounds: list[int], i: int, min_size: int) -> None:
    """Place bounds i and i + 1 together where the three segments between bounds i - 1 and
    i + 2 fit best (least squared error), each within PAIR_REACH points of where it is."""
    s, e = bounds[i - 1], bounds[i + 2]
    a = np.arange(max(s + min_size, bounds[i] - PAIR_REACH), min(e - 2 * min_size, bounds[i] + PAIR_REACH) + 1)
    b = np.arange(max(bounds[i + 1] - PAIR_REACH, s + 2 * min_size), min(e - min_size, bounds[i + 1] + PAIR_REACH) + 1)
    if a.size == 0 or b.size == 0:
        return
    A, B = a[:, None], b[None, :]
    valid = B - A >= min_size
    if not valid.any():
        return
    first, second, third = cs[A] - cs[s], cs[B] - cs[A], cs[e] - cs[B]
    # sum of squares explained by the three means (the total sum of squares is the same for all)
    fit = first * first / (A - s) + second * second / np.maximum(B - A, 1) + third * third / (e - B)
    fit = np.where(valid, fit, -np.inf)
    k = int(fit.argmax())
    bounds[i], bounds[i + 1] = int(a[k // b.size]), int(b[k % b.size])


# A level of at most this many points is judged against the series' tails too: the t-test
# on so few points trusts their normality, and 3 of 500 heavy-tailed or outlying values
# side by side pass it.
SHORT_LEVEL = 7
# ... and is called only when so many of its points beyond the midway line are that unlikely
# in any of the places searched (Bonferroni, as the t-test).
SHORT_LEVEL_P = 0.01


def short_level_p(short: np.ndarray, other_mean: float, resid: np.ndarray, windows: int) -> float:
    """How likely a run of len(short) points somewhere in the series holds as many points
    beyond the line midway between the two levels as `short` does, were the points the
    series' noise: `resid` are all points' deviations from their local median (spikes and
    heavy tails included), r the share of them beyond that distance in that direction, and
    the answer windows * P(Binomial(k, r) >= j), at most 1: `windows` the places the level
    could have been found at (the t-test's multiplicity). A real level of 3 points 6 sigmas
    off scores ~0; three +15% outliers among 5% of them score ~1e-4 per window."""
    k = short.size
    diff = float(short.mean()) - other_mean
    half = abs(diff) / 2
    if k == 0 or half == 0 or resid.size == 0:
        return 1.0
    sign = 1.0 if diff > 0 else -1.0
    j = int(np.count_nonzero(sign * (short - other_mean) > half))
    r = np.count_nonzero(sign * resid > half) / resid.size
    tail = sum(math.comb(k, m) * r ** m * (1 - r) ** (k - m) for m in range(j, k + 1))
    return min(1.0, windows * tail)


# An excursion's side at either end of the series may hold this few points (sides_long_enough).
END_SIDE_POINTS = 6


def sides_long_enough(left: np.ndarray, mid: np.ndarray, right: np.ndarray, at_start: bool, at_end: bool,
                      least: int) -> bool:
    """Both sides of an excursion hold `least` points; or one side is the series' first (last)
    END_SIDE_POINTS or more, the other side holds `least` and is longer than the middle:
    an excursion that came back just before the newest runs. (A long middle between a step and
    a few noisy first points is a step beside a sliver, not an excursion.)"""
    short = [side.size < least for side in (left, right)]
    if not any(short):
        return True
    if all(short):
        return False
    side, other, at_edge = (left, right, at_start) if short[0] else (right, left, at_end)
    return at_edge and side.size >= END_SIDE_POINTS and other.size > mid.size


# The reported place of a change point is the middle of the window of this many points on
# either side that holds the most likelihood (settle).
SETTLE_HALF = 4
SETTLE_TIE = 1e-3   # windows holding this close to the most count as holding the most


def settle(z: np.ndarray, bounds: list[int], min_size: int, half: int = SETTLE_HALF) -> None:
    """Move each inner bound (in place) from the best split between its neighbours to the
    middle of the (2 * half + 1)-point window that holds the most of the split's likelihood,
    exp(gain / 2) with z in units of sigma (flat prior over the positions).

    For a strong step the two are the same point. For a weak one (a 3% edge in 2% noise) the
    likelihood along the positions is a random walk with little drift and its highest point
    is often a narrow spike a few points off the bulk: the window's middle is near the true
    change more often (given the true neighbours, within 5 points for 98.6% against 96.8% of
    the bench's excursion edges), which is what a bisection starting from it needs. A window
    of 3, 4 or 5 points on either side scores within 0.01 of each other on the bench."""
    cs = np.concatenate([[0.0], np.cumsum(z)])
    box = np.ones(2 * half + 1)
    for i in range(1, len(bounds) - 1):
        s, e = bounds[i - 1], bounds[i + 1]
        tau = np.arange(s + min_size, e - min_size + 1)
        if tau.size <= 1:
            continue
        left = cs[tau] - cs[s]
        total = cs[e] - cs[s]
        gain = left * left / (tau - s) + (total - left) ** 2 / (e - tau)
        mass = np.convolve(np.exp((gain - gain.max()) / 2), box, mode="same")
        # of the windows that hold (nearly) the most, the one nearest the best split: for a
        # sharp step every window around it holds it all, and the step itself is the answer
        best = np.flatnonzero(mass >= mass.max() * (1 - SETTLE_TIE))
        bounds[i] = int(tau[best[np.abs(best - int(gain.argmax())).argmin()]])

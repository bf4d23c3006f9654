"""Exact metrics: figures whose repeated samples agree to a resolution, compared without a t-test.

Instruction counts (valgrind's cachegrind) and instruction-time (a QEMU guest under
`-icount shift=0`: 1 ns per guest instruction) do not depend on the machine's speed;
run twice they give the same figure to a few parts per million. For such a metric a
t-test is the wrong tool (no variance to estimate, and one run per side is enough):
the change head/base - 1 is called when it exceeds EXACT_FACTOR times the metric's
resolution, and the minimum effect. docs/statistics.md ("Exact metrics") has the
rule and what instruction counts and instruction-time can and cannot see.

A metric is exact
- by construction: the caller says so (`assume_exact`, as benchmath's AssumeExact: the
  sample's or the metric's `exact`, perflab.core.model.Sample) for instruction counts
  and icount instruction-time; one sample per side is then enough, and
- by measurement: every group of its samples (>= MEASURED_MIN each) spreads by at most
  EXACT_LIMIT of its median.
A metric exact by construction whose samples nevertheless spread by more than
EXACT_LIMIT (a guest program that reads a clock or a random number) is not exact: its
samples go to the statistical test like any other. This module takes the assumption as
a bool and reads no names or units: what a stored sample's unit says is decoded by the
store (perflab.store.exactness).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from perflab.core.model import HIGHER_IS_BETTER, INFORMATIONAL, LOWER_IS_BETTER
from perflab.stats.verdicts import CHANGED, IMPROVEMENT, INSUFFICIENT, NO_CHANGE, REGRESSION

# Largest relative spread (max - min) / |median| of a group of repeated samples for the
# metric to count as exact. Cachegrind counts spread by <= 0.0001%; icount instruction-time
# by 0.003% (same round, different boots) to 0.12% (page faults across rounds and boots,
# issue 20): 0.2% admits both, and wall time almost never (three samples within 0.2% on
# each side of a comparison is a quiet bare-metal machine, where the call is right anyway).
EXACT_LIMIT = 0.002
# The resolution assumed for a metric exact by construction with no repeated samples
# (one run per side), and the floor of any measured resolution: 0.01%, issue 20's figure
# for instruction-time across boots.
DEFAULT_RESOLUTION = 1e-4
# A change is called when it exceeds this multiple of the resolution: the two sides each
# may sit anywhere within their spread, so a change of one resolution can be noise; three
# leaves a margin of one resolution on either side of the widest disagreement.
EXACT_FACTOR = 3.0
# The minimum effect of an exact metric when none is asked for (compare and detect without
# --threshold): 0.1%, the step issue 21 asks detect to find; smaller changes are real but rarely
# worth a verdict (a code change moves instruction counts by hundredths of a percent).
EXACT_MIN_EFFECT = 0.001
# Samples a group needs before its spread says that a metric not exact by construction
# is exact: two samples of a noisy metric agree to 0.2% by chance too often (~10% at a
# CoV of 1%); three on every side, ~1e-4.
MEASURED_MIN = 3


def _groups(groups) -> list[np.ndarray]:
    return [np.asarray(g, dtype=float).ravel() for g in groups]


def spread(values) -> float:
    """Relative spread (max - min) / |median| of one group; NaN if empty, inf if the median is 0."""
    x = np.asarray(values, dtype=float).ravel()
    if x.size == 0:
        return math.nan
    med = float(np.median(x))
    if med == 0:
        return 0.0 if float(x.max() - x.min()) == 0 else math.inf
    return float((x.max() - x.min()) / abs(med))


def resolution(*groups) -> float | None:
    """The measured relative resolution: the largest spread within any group of >= 2 samples.

    None if no group has 2 samples, or if such a group has a sample <= 0 (a relative
    resolution of figures that are not all positive means nothing)."""
    found = None
    for g in _groups(groups):
        if g.size < 2:
            continue
        if not (g > 0).all():
            return None
        s = spread(g)
        found = s if found is None else max(found, s)
    return found


def is_exact(*groups, assume_exact: bool = False) -> bool:
    """Whether these groups of samples of one metric are exact (module docstring).

    `assume_exact`: the metric is exact by construction, so one sample per group is enough."""
    arrays = _groups(groups)
    if not arrays or any(g.size and not (g > 0).all() for g in arrays):
        return False
    # All positive: a group's median is at most its largest sample, so a group whose range is
    # more than EXACT_LIMIT of its largest spreads more than that about its median too: not
    # exact, without the medians (np.median was a third of a noisy comparison's cost). The
    # margin keeps a rounding of the product from deciding what `resolution` would not.
    if any(g.size >= 2 and float(g.max() - g.min()) > EXACT_LIMIT * (1 + 1e-9) * float(g.max()) for g in arrays):
        return False
    res = resolution(*arrays)
    if assume_exact:
        return res is None or res <= EXACT_LIMIT
    if any(g.size < MEASURED_MIN for g in arrays):
        return False
    return res is not None and res <= EXACT_LIMIT


def effective_resolution(res: float | None) -> float:
    """The resolution a call is made against: the measured one, never below DEFAULT_RESOLUTION."""
    if res is None or not math.isfinite(res):
        return DEFAULT_RESOLUTION
    return max(float(res), DEFAULT_RESOLUTION)


def bar(res: float | None, threshold: float = 0.0) -> float:
    """The smallest relative change called: EXACT_FACTOR resolutions, and at least the threshold."""
    return max(EXACT_FACTOR * effective_resolution(res), threshold)


@dataclass(frozen=True)
class ExactVerdict:
    """An exact comparison: the ratio head/base, the resolution it was judged against, the word."""

    ratio: float                 # head center / base center
    pct_change: float            # ratio - 1 (a fraction)
    resolution: float            # the effective resolution (fraction): the interval is pct_change ± it
    bar: float                   # |pct_change| is called above max(EXACT_FACTOR * resolution, threshold)
    verdict: str                 # perflab.stats.verdicts
    direction: int = LOWER_IS_BETTER

    @property
    def interval(self) -> tuple[float, float]:
        return (self.pct_change - self.resolution, self.pct_change + self.resolution)

    @property
    def called(self) -> bool:
        return self.verdict in (REGRESSION, IMPROVEMENT, CHANGED)


def exact_figure(samples, direction: int) -> float:
    """The least disturbed sample of an exact point: the value more of its samples share than
    any other, else the smallest (a time, a count) or, for a higher-is-better rate, the largest:
    a timer tick or a page fault adds instructions to a sample, never removes them."""
    finite = [v for v in samples if math.isfinite(v)]
    if not finite:
        return math.nan
    counts: dict[float, int] = defaultdict(int)
    for v in finite:
        counts[v] += 1
    ranked = sorted(counts.values(), reverse=True)
    if ranked[0] > 1 and (len(ranked) == 1 or ranked[0] > ranked[1]):
        return max(counts, key=counts.__getitem__)
    return max(finite) if direction == HIGHER_IS_BETTER else min(finite)


def settled(samples, direction: int) -> bool:
    """Whether an exact metric's samples have a figure: more than half of them agree with their
    least disturbed sample within EXACT_LIMIT (a tick disturbs one now and then). Samples that
    scatter (fork+exec under icount, ±4%) have none: every view then takes the metric kind's
    estimator, as `compare` does when it finds them not exact (docs/statistics.md)."""
    return settled_samples(samples, direction) is not None


def settled_samples(samples, direction: int) -> list[float] | None:
    """The samples that agree with the least disturbed one (within EXACT_LIMIT) when they are more
    than half (`settled`), else None: the exact figure's own samples, a ticked one set aside."""
    finite = [float(v) for v in samples if math.isfinite(v)]
    if not finite:
        return None
    figure = exact_figure(finite, direction)
    agree = [v for v in finite if v == figure or (figure != 0 and abs(v / figure - 1) <= EXACT_LIMIT)]
    return agree if 2 * len(agree) > len(finite) else None


def _center(values: np.ndarray, direction: int) -> float:
    # The exact figure of a side: its least disturbed sample (detect's point figure too), so a
    # tick in one sample of five moves neither the ratio nor the call.
    return exact_figure(values.tolist(), direction)


def compare_exact(base: Sequence[float] | Iterable[float], head: Sequence[float] | Iterable[float], *,
                  resolution: float | None, threshold: float = 0.0,
                  direction: int = LOWER_IS_BETTER) -> ExactVerdict:
    """Compare two groups of samples of an exact metric (one sample per side is enough).

    `resolution` is the metric's measured resolution (resolution() of both sides, or None:
    DEFAULT_RESOLUTION); `threshold` the minimum effect (a fraction); `direction` the
    metric's (perflab.core.model: LOWER_IS_BETTER for instructions and times)."""
    b, h = np.asarray(list(base), dtype=float).ravel(), np.asarray(list(head), dtype=float).ravel()
    res = effective_resolution(resolution)
    need = bar(resolution, threshold)
    if b.size == 0 or h.size == 0:
        return ExactVerdict(math.nan, math.nan, res, need, INSUFFICIENT, direction)
    cb, ch = _center(b, direction), _center(h, direction)
    if not (cb > 0 and ch > 0):
        return ExactVerdict(math.nan, math.nan, res, need, INSUFFICIENT, direction)
    ratio = ch / cb
    pct = ratio - 1
    return ExactVerdict(ratio, pct, res, need, _word(pct, res, threshold, direction), direction)


def change_called(pct: float, res: float | None, threshold: float = 0.0) -> bool:
    """Whether a relative change is called: beyond EXACT_FACTOR resolutions, and at least the
    threshold (as compare's minimum effect: a change equal to it is called; the tolerance
    keeps a planted +1% that floating point makes 0.99999999999% called)."""
    return abs(pct) > EXACT_FACTOR * effective_resolution(res) and abs(pct) >= threshold * (1 - 1e-9)


def _word(pct: float, res: float, threshold: float, direction: int) -> str:
    if not change_called(pct, res, threshold):
        return NO_CHANGE
    if direction == INFORMATIONAL:
        return CHANGED
    worse = (pct > 0) == (direction == LOWER_IS_BETTER)
    if direction not in (LOWER_IS_BETTER, HIGHER_IS_BETTER):
        return CHANGED
    return REGRESSION if worse else IMPROVEMENT


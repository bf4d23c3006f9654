"""The stopping rule (perflab.stats.stopping): the interval it stops on keeps its coverage
on simulated repetitions, where stopping at the first narrow nominal interval does not;
identical repetitions stop after one confirmation; floor and ceiling hold."""

from __future__ import annotations

import numpy as np
import pytest

from perflab.stats import student_t
from perflab.stats.stopping import StoppingRule

SIMULATIONS = 2000
TOLERANCE = 0.015          # Monte Carlo error of a 95% coverage over 2000 runs: sd 0.005


def lognormal(rng, sigma):
    mean = np.exp(sigma ** 2 / 2)          # of exp(N(0, sigma^2))
    return (lambda n: rng.lognormal(0.0, sigma, n)), mean


def bimodal(rng, low_share, gap=0.06, spread=0.02):
    """Two modes (a process lands in one of two states: page colouring, a CPU's sibling busy or
    not), `gap` apart, each with `spread`.  Modes much further apart than their spread defeat
    any interval from a few repetitions (docs/statistics.md): the rule is no worse there than
    a fixed count, and these cases keep the modes three spreads apart."""
    def draw(n):
        high = rng.random(n) >= low_share
        return np.where(high, 1.0 + gap, 1.0) * rng.normal(1.0, spread, n)
    return draw, low_share + (1 - low_share) * (1 + gap)


def run(rule: StoppingRule, draw) -> tuple[float, float, int]:
    """One sequential measurement: (mean, half-width, repetitions) of the interval it stopped on."""
    values = list(draw(rule.ceiling))
    for n in range(1, rule.ceiling + 1):
        if rule.known(values[:n]):
            mean, half = rule.interval(values[:n])
            return mean, half, n
    raise AssertionError("the rule never stopped")


def coverage(rule: StoppingRule, draw, true_mean) -> tuple[float, float]:
    hits, counts = 0, []
    for _ in range(SIMULATIONS):
        mean, half, n = run(rule, draw)
        hits += abs(mean - true_mean) <= half
        counts.append(n)
    return hits / SIMULATIONS, float(np.mean(counts))


CASES = {
    "lognormal 5%": lambda rng: lognormal(rng, 0.05),
    "lognormal 30%": lambda rng: lognormal(rng, 0.30),
    "bimodal 50/50": lambda rng: bimodal(rng, 0.5),
    "bimodal 70/30": lambda rng: bimodal(rng, 0.7),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("precision,ceiling", [(0.05, 5), (0.02, 10)])
def test_the_interval_it_stops_on_keeps_its_coverage(case, precision, ceiling):
    rng = np.random.default_rng(20261124)
    draw, true_mean = CASES[case](rng)
    rule = StoppingRule(precision, floor=2, ceiling=ceiling)
    cover, mean_n = coverage(rule, draw, true_mean)
    assert cover >= rule.confidence - TOLERANCE, (case, cover, mean_n)


def test_it_stops_early_where_the_figure_is_steady():
    rng = np.random.default_rng(1)
    draw, true_mean = lognormal(rng, 0.005)
    cover, mean_n = coverage(StoppingRule(0.05, floor=2, ceiling=10), draw, true_mean)
    assert mean_n <= 3.5 and cover >= 0.95 - TOLERANCE


def test_stopping_at_the_first_narrow_nominal_interval_undercovers():
    """What the Bonferroni looks are for: the naive rule misses more than 5% of the time."""
    rng = np.random.default_rng(7)
    draw, true_mean = bimodal(rng, 0.5)
    hits = 0
    for _ in range(SIMULATIONS):
        values = draw(10)
        for n in range(2, 11):
            v = values[:n]
            half = student_t.quantile(n - 1, 0.975) * v.std(ddof=1) / np.sqrt(n)
            if half <= 0.05 * v.mean() or n == 10:
                hits += abs(v.mean() - true_mean) <= half
                break
    assert hits / SIMULATIONS < 0.95 - TOLERANCE


def test_identical_repetitions_are_measured_once_and_confirmed_once():
    rule = StoppingRule(0.01, floor=3, ceiling=8)
    assert not rule.known([1234.0])
    assert rule.known([1234.0, 1234.0])                 # below the floor: exact figures need no more
    assert not rule.known([1234.0, 1235.0])


def test_floor_ceiling_and_precision_zero():
    rule = StoppingRule(0.05, floor=3, ceiling=5)
    assert not rule.known([1.0, 1.0001])                # below the floor and not identical
    assert rule.known([1.0, 1.0001, 1.0002])            # narrow at the floor
    assert not rule.known([1.0, 2.0, 3.0, 4.0])         # wide
    assert rule.known([1.0, 2.0, 3.0, 4.0, 5.0])        # the ceiling
    fixed = StoppingRule(0.0, floor=2, ceiling=4)
    assert not fixed.known([1.0, 1.0001, 1.0002]) and fixed.known([1.0, 2.0, 3.0, 4.0])
    assert rule.all_known([[2.0, 2.0], [1.0, 1.0001, 1.0002]])
    assert not rule.all_known([[2.0, 2.0], [1.0, 1.5, 2.0]])


def test_the_looks_share_alpha():
    rule = StoppingRule(0.05, floor=2, ceiling=5)
    assert rule.looks == 4 and rule.alpha_per_look == pytest.approx(0.0125)
    assert rule.t_quantile(2) == pytest.approx(50.92, rel=1e-3)      # t(1) at 1 - 0.0125/2
    mean, half = rule.interval([1.0, 2.0, 3.0])
    assert mean == 2.0 and half == pytest.approx(student_t.quantile(2, 1 - 0.00625) / np.sqrt(3))


@pytest.mark.parametrize("kwargs", [dict(precision=-1), dict(precision=float("nan")), dict(precision=0.1, floor=1),
                                    dict(precision=0.1, floor=4, ceiling=3), dict(precision=0.1, confidence=1.0)])
def test_bad_settings_are_refused(kwargs):
    with pytest.raises(ValueError):
        StoppingRule(**kwargs)


def test_icount_like_repetitions_stop_at_two():
    """Instruction-time under icount differs by a few hundredths of a percent between
    processes, never by nothing: within EXACT_LIMIT it is measured once plus a confirmation."""
    rule = StoppingRule(0.05, floor=3, ceiling=8)
    icount = [81234.0, 81240.5]                          # 0.008% apart
    assert rule.known(icount, assume_exact=True)
    assert not rule.known([81234.0, 81234.0 * 1.01], assume_exact=True)   # 1%: not exact, below the floor
    assert not rule.known(icount, assume_exact=False)    # wall time: two means agreeing prove nothing
    # wall time whose every sample (three per process) sits within 0.2%: exact by measurement
    assert rule.known(icount, assume_exact=False, samples=[81230.0, 81236.0, 81238.0, 81239.0, 81241.0, 81242.0])
    assert not rule.known(icount, assume_exact=False, samples=[80000.0, 81236.0, 82470.0, 81239.0, 81241.0, 81242.0])
    # precision 0 asks for the ceiling: only exact equality ends a figure early
    assert not StoppingRule(0.0, floor=2, ceiling=8).known(icount, assume_exact=True)

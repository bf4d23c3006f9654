"""Short excursions (the level moves by ~3% and comes back 30 points later): both edges
are found even when one alone misses alpha against its neighbour segment (issue 22)."""

from __future__ import annotations

import numpy as np
import pytest

from perflab.stats.changepoints import ALPHA, detect

EDGES = [100, 130, 170, 200]


def two_excursions(seed: int) -> np.ndarray:
    """300 points at 100 (CoV 2%), up 3% over [100, 130) and down 3% over [170, 200)."""
    rng = np.random.default_rng(seed)
    level = np.full(300, 100.0)
    level[100:130] *= 1.03
    level[170:200] *= 0.97
    return level * np.exp(0.02 * rng.standard_normal(300))


# Seeds where validating each edge alone dropped both excursions (or one) entirely.
@pytest.mark.parametrize("seed", [32, 57, 86, 49, 79])
def test_both_edges_of_each_excursion_are_found(seed):
    found = detect(two_excursions(seed))
    assert len(found.change_points) == 4, [c.index for c in found.change_points]
    for c, edge in zip(found.change_points, EDGES):
        assert abs(c.index - edge) <= 5
        # the p-value quoted is the one that kept the edge
        assert c.p_value < ALPHA
        assert 0.015 < abs(c.change) < 0.05


def test_excursions_add_no_false_edges():
    """Over 40 noise draws, never more than the four edges is called, each near one."""
    for seed in range(40):
        found = [c.index for c in detect(two_excursions(seed)).change_points]
        assert len(found) <= 4 and all(min(abs(f - e) for e in EDGES) <= 15 for f in found), (seed, found)


def test_a_step_beside_a_sliver_is_not_an_excursion():
    """A lone 3% step: no pair of edges is made out of it and the noise next to it."""
    rng = np.random.default_rng(5)
    level = np.full(300, 100.0)
    level[150:] *= 1.03
    calls = [c.index for c in detect(level * np.exp(0.02 * rng.standard_normal(300))).change_points]
    assert len(calls) == 1 and abs(calls[0] - 150) <= 5


def one_excursion(seed: int, length: int) -> np.ndarray:
    """300 points at 100 (CoV 2%), 3% higher over [100, 100 + length)."""
    rng = np.random.default_rng(seed)
    level = np.full(300, 100.0)
    level[100:100 + length] *= 1.03
    return level * np.exp(0.02 * rng.standard_normal(300))


# (length, seed) where the edges were missed (the first three: no edge called at all) or one
# was placed 6-9 points off, before neighbours were re-placed after a drop and both edges of a
# pair placed jointly (perflab.stats.changepoint_placement.refine); and, the last six, where an
# edge at the best split was 6-9 points off and the middle of its most likely window is not
# (changepoint_placement.settle).
@pytest.mark.parametrize("length, seed", [(20, 28), (20, 108), (20, 213), (30, 199), (40, 221), (40, 272),
                                          (30, 5), (30, 21), (40, 16), (40, 30), (40, 44), (30, 147)])
def test_a_short_excursion_is_found_with_both_edges_in_place(length, seed):
    found = [c.index for c in detect(one_excursion(seed, length)).change_points]
    assert len(found) == 2, found
    assert abs(found[0] - 100) <= 5 and abs(found[1] - 100 - length) <= 5, found


def heavy_tails(seed: int) -> np.ndarray:
    """500 step-free points of Student t noise (3 degrees of freedom, scale 2%)."""
    return 100 * (1 + 0.02 * np.random.default_rng(seed).standard_t(3, 500))


def clustered_outliers(seed: int) -> np.ndarray:
    """500 step-free points of 2% noise where 5% of the points are +15% outliers."""
    rng = np.random.default_rng(seed)
    return 100 * np.exp(0.02 * rng.standard_normal(500)) * np.where(rng.random(500) < 0.05, 1.15, 1.0)


@pytest.mark.parametrize("seed", [22, 59])
def test_heavy_tailed_noise_without_a_step_gives_no_call(seed):
    """Two extreme values side by side were a 3-4 point 'level' to the t-test."""
    assert detect(heavy_tails(seed)).change_points == []


def test_clusters_of_outliers_are_not_levels():
    """3 of the 25 outliers of a series side by side are as likely as the series' tails make
    them, not a level: 10 of these 40 series had such a call, 1 now (a 19-point stretch)."""
    called = [seed for seed in range(40) if detect(clustered_outliers(seed)).change_points]
    assert len(called) <= 1, called
    assert not {1, 2, 9, 10, 16} & set(called)


def test_a_real_short_level_is_still_called():
    """The tails' test leaves a 4-point level of +12% in 2% noise alone: nothing in the noise
    reaches halfway to it."""
    rng = np.random.default_rng(3)
    level = np.full(300, 100.0)
    level[150:154] *= 1.12
    found = [c.index for c in detect(level * np.exp(0.02 * rng.standard_normal(300))).change_points]
    assert found == [150, 154]


def late_excursion(seed: int) -> np.ndarray:
    """300 points at 100 (CoV 2%), 3% higher over [262, 292): back 8 points before the newest."""
    rng = np.random.default_rng(seed)
    level = np.full(300, 100.0)
    level[262:292] *= 1.03
    return level * np.exp(0.02 * rng.standard_normal(300))


@pytest.mark.parametrize("seed", [7, 8, 12, 15, 16])
def test_an_excursion_that_comes_back_just_before_the_newest_runs(seed):
    """The 8 points after it are a side of the excursion too (69 of 100 such draws missed an
    edge when both sides needed 15 points, 22 now)."""
    found = [c.index for c in detect(late_excursion(seed)).change_points]
    assert len(found) == 2 and abs(found[0] - 262) <= 5 and abs(found[1] - 292) <= 5, found


@pytest.mark.parametrize("seed", [63, 64, 65])
def test_a_lone_late_step_beside_a_few_noisy_first_points_is_not_an_excursion(seed):
    """A 3% step 38 points before the end: the few first points and the step's far side are not
    one level around a 250-point 'excursion' (seed 63 was one with a looser end rule)."""
    rng = np.random.default_rng(seed)
    level = np.full(300, 100.0)
    level[262:] *= 1.03
    found = [c.index for c in detect(level * np.exp(0.02 * rng.standard_normal(300))).change_points]
    assert len(found) == 1 and abs(found[0] - 262) <= 5, found

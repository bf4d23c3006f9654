"""Where change points are put (perflab.stats.changepoint_placement)."""

from __future__ import annotations

import numpy as np

from perflab.stats import changepoint_placement as placement


def test_settle_leaves_a_sharp_step_where_it_is():
    z = np.concatenate([np.zeros(50), np.full(50, 10.0)]) + 0.01 * np.random.default_rng(1).standard_normal(100)
    bounds = [0, 50, 100]
    placement.settle(z, bounds, 3)
    assert bounds == [0, 50, 100]


def test_settle_puts_weak_edges_near_the_truth_more_often_than_the_best_split():
    """A 1.5-sigma step at 50 in 100 points, 300 noise draws: the best split lands more than 4
    points off the step more often than the middle of the most likely window does."""
    near_best = near_settled = 0
    for seed in range(300):
        z = np.concatenate([np.zeros(50), np.full(50, 1.5)]) + np.random.default_rng(seed).standard_normal(100)
        cs = np.concatenate([[0.0], np.cumsum(z)])
        tau = np.arange(3, 98)
        gain = cs[tau] ** 2 / tau + (cs[100] - cs[tau]) ** 2 / (100 - tau)
        bounds = [0, int(tau[gain.argmax()]), 100]
        near_best += abs(bounds[1] - 50) <= 4
        placement.settle(z, bounds, 3)
        near_settled += abs(bounds[1] - 50) <= 4
    assert near_settled > near_best, (near_settled, near_best)


def test_refine_places_both_edges_of_an_excursion_jointly():
    z = np.zeros(200)
    z[80:110] = 1.5
    z += 0.3 * np.random.default_rng(2).standard_normal(200)
    bounds = [0, 70, 120, 200]           # both edges 10 points off, each against the other's error
    placement.refine(z, bounds, 3)
    assert abs(bounds[1] - 80) <= 2 and abs(bounds[2] - 110) <= 2


def test_short_level_p_refuses_a_cluster_of_the_series_own_outliers():
    rng = np.random.default_rng(4)
    resid = np.where(rng.random(500) < 0.05, 0.15, 0.0) + 0.02 * rng.standard_normal(500)
    cluster = np.array([0.15, 0.15, 0.15])
    assert placement.short_level_p(cluster, 0.0, resid, 500) >= placement.SHORT_LEVEL_P
    clean = 0.02 * rng.standard_normal(500)
    assert placement.short_level_p(cluster, 0.0, clean, 500) < placement.SHORT_LEVEL_P

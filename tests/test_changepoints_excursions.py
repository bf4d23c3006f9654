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

"""The points' resolution computed in one array operation (analysis.series._resolution) is
exactly stats.exact.resolution, for equal and unequal sample counts and bad samples."""

from __future__ import annotations

import math

import numpy as np
import pytest

from perflab.analysis.series import Point, _resolution
from perflab.stats import exact


def points(groups):
    return [Point([i], None, None, samples=[float(v) for v in g]) for i, g in enumerate(groups)]


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5])
def test_same_as_the_per_point_loop(k):
    rng = np.random.default_rng(k)
    for _ in range(50):
        groups = rng.lognormal(0, 0.01, (40, k)) * rng.uniform(1, 1e6, (40, 1))
        assert _resolution(points(groups)) == exact.resolution(*groups)


@pytest.mark.parametrize("groups", [
    [[1.0, 2.0, 3.0], [4.0, 5.0]],            # unequal counts
    [[1.0, 2.0], [0.0, 1.0]],                 # a sample <= 0: no relative resolution
    [[1.0, math.nan], [2.0, 2.0]],            # not finite
    [[5.0], [6.0]],                           # no group of two
])
def test_odd_shapes_fall_back_to_the_loop(groups):
    a, b = _resolution(points(groups)), exact.resolution(*groups)
    assert a == b or (a != a and b != b)

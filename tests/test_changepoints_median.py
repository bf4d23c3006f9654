"""perflab.stats.changepoints' medians (a partition instead of np.median, for speed) give
np.median's numbers exactly, NaN included."""

import numpy as np

from perflab.stats import changepoints


def test_median_is_numpys():
    rng = np.random.default_rng(3)
    for trial in range(2000):
        n = int(rng.integers(1, 40))
        a = rng.standard_normal(n) * 10 ** rng.uniform(-6, 6)
        if trial % 5 == 0:
            a = np.round(a)                       # ties
        if trial % 9 == 0:
            a[rng.integers(0, n)] = np.nan
        expected, got = np.median(a), changepoints._median(a)
        assert type(got) is float
        assert got == expected or (np.isnan(got) and np.isnan(expected)), (a, got, expected)
    assert np.isnan(changepoints._median(np.array([])))


def test_rolling_median_is_numpys():
    rng = np.random.default_rng(4)
    for half in (1, 2, 4):
        for n in (1, 2, 2 * half, 2 * half + 1, 40):
            x = rng.standard_normal(n)
            if n > 3:
                x[n // 2] = np.nan
            width = 2 * half + 1
            padded = np.concatenate([np.full(half, np.median(x[:width])), x, np.full(half, np.median(x[-width:]))])
            expected = np.median(np.lib.stride_tricks.sliding_window_view(padded, width), axis=1)
            assert np.array_equal(changepoints._rolling_median(x, half), expected, equal_nan=True), (half, n)

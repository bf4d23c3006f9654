"""Statistics against scipy, and the error rates the verdicts promise."""

import math

import numpy as np
import pytest
from scipy import stats

from perflab.core.model import HIGHER_IS_BETTER, INFORMATIONAL, LOWER_IS_BETTER
from perflab.stats.compare import compare_many, geomean_ratio
from perflab.stats.descriptive import bamean, summarize
from perflab.stats.median import median_ci

RNG = np.random.default_rng(20261123)


def lognormal(n, cov, scale=1.0, rng=RNG):
    sigma = math.sqrt(math.log(1 + cov * cov))
    return scale * rng.lognormal(0.0, sigma, n)


@pytest.mark.parametrize("n", [1, 2, 7, 30])
def test_summary_equals_numpy_and_scipy(n):
    x = lognormal(n, 0.05, 100.0)
    s = summarize(x, HIGHER_IS_BETTER)
    assert s.n == n
    assert s.mean == pytest.approx(np.mean(x), rel=1e-12)
    assert s.hmean == pytest.approx(stats.hmean(x), rel=1e-9)
    assert s.median == pytest.approx(np.median(x), rel=1e-12)
    assert s.min == x.min() and s.max == x.max()
    assert s.center == s.hmean  # rates average harmonically
    if n > 1:
        assert s.stddev == pytest.approx(np.std(x, ddof=1), rel=1e-9)
        assert s.cov == pytest.approx(stats.variation(x, ddof=1), rel=1e-9)
    else:
        assert math.isnan(s.stddev) and math.isnan(s.cov)
    assert summarize(x, LOWER_IS_BETTER).center == s.mean


def test_summary_of_non_positive_values_has_no_hmean():
    s = summarize([0.0, 1.0, 2.0], HIGHER_IS_BETTER)
    assert math.isnan(s.hmean) and s.center == 1.0


def test_bamean_keeps_the_best_95_percent():
    x = list(range(1, 21))  # 20 samples: drop the single worst
    assert bamean(x, LOWER_IS_BETTER, 95) == pytest.approx(np.mean(x[:19]))
    assert bamean(x, HIGHER_IS_BETTER, 95) == pytest.approx(np.mean(x[1:]))
    assert bamean([5.0], LOWER_IS_BETTER, 95) == 5.0


def test_vectorised_statistics_equal_scipy_for_every_pair():
    pairs = []
    for i in range(60):
        na, nb = RNG.integers(2, 12, size=2)
        a = lognormal(na, RNG.uniform(0.01, 0.2), 50)
        b = lognormal(nb, RNG.uniform(0.01, 0.2), 50 * RNG.uniform(0.9, 1.1))
        pairs.append((a, b, [LOWER_IS_BETTER, HIGHER_IS_BETTER][i % 2]))
    results = compare_many(pairs, alpha=0.05, threshold=0.0)
    p_reg = []
    for (a, b, d), c in zip(pairs, results):
        la, lb = np.log(a), np.log(b)
        up = stats.ttest_ind(lb, la, equal_var=False, alternative="greater")
        down = stats.ttest_ind(lb, la, equal_var=False, alternative="less")
        observed_up = up.pvalue <= down.pvalue
        assert c.p_value == pytest.approx(min(up.pvalue, down.pvalue), rel=1e-9, abs=1e-12)
        # The interval: each end a one-sided 95% bound on the ratio of geometric means.
        lo = stats.ttest_ind(lb, la, equal_var=False, alternative="greater").confidence_interval(0.95).low
        hi = stats.ttest_ind(lb, la, equal_var=False, alternative="less").confidence_interval(0.95).high
        assert c.ci[0] == pytest.approx(math.expm1(lo), rel=1e-9, abs=1e-12)
        assert c.ci[1] == pytest.approx(math.expm1(hi), rel=1e-9, abs=1e-12)
        assert c.base.stddev == pytest.approx(np.std(a, ddof=1), rel=1e-9)
        assert c.head.mean == pytest.approx(np.mean(b), rel=1e-12)
        worse = observed_up == (d == LOWER_IS_BETTER)
        if c.verdict != "no change":
            assert c.verdict == ("regression" if worse else "improvement")
        # p in the regression direction, for the BH check below.
        p_reg.append(up.pvalue if d == LOWER_IS_BETTER else down.pvalue)
        assert c.test == "welch-log"
    adjusted = stats.false_discovery_control(p_reg, method="bh")
    for (a, b, d), c, p, padj in zip(pairs, results, p_reg, adjusted):
        if c.verdict == "regression":
            assert c.p_adjusted == pytest.approx(padj, rel=1e-9)


def test_verdict_follows_direction_and_threshold():
    base = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2, 99.8, 100.1]
    slower = [x * 1.10 for x in base]
    tiny = [x * 1.005 + (0.01 if i % 2 else -0.01) for i, x in enumerate(base)]
    r = compare_many([(base, slower, LOWER_IS_BETTER), (base, slower, HIGHER_IS_BETTER),
                      (base, tiny, LOWER_IS_BETTER), (base, slower, INFORMATIONAL)], threshold=0.01)
    assert [c.verdict for c in r] == ["regression", "improvement", "no change", "changed"]
    assert r[0].pct_change == pytest.approx(0.10)
    assert r[0].ci[0] < 0.10 < r[0].ci[1]


def test_too_few_samples_are_said_not_tested():
    (c,) = compare_many([([1.0], [2.0, 2.1, 2.2], LOWER_IS_BETTER)])
    assert c.verdict == "insufficient samples" and c.ci is None and math.isnan(c.p_value)
    assert "at least 2 samples" in c.warnings[0]


def test_constant_samples_and_non_positive_values():
    same, moved = compare_many([([5.0] * 4, [5.0] * 4, LOWER_IS_BETTER), ([5.0] * 4, [6.0] * 4, LOWER_IS_BETTER)])
    assert same.verdict == "no change" and same.p_value == 1.0
    assert moved.verdict == "regression" and moved.p_value == 0.0
    (z,) = compare_many([([0.0, 1.0, 2.0, 1.0], [5.0, 6.0, 7.0, 6.0], LOWER_IS_BETTER)])
    assert z.test == "welch" and z.verdict == "regression"
    assert z.p_value == pytest.approx(stats.ttest_ind([5, 6, 7, 6], [0, 1, 2, 1], equal_var=False,
                                                      alternative="greater").pvalue, rel=1e-9)


def test_geomean_ratio():
    r = compare_many([([1.0, 1.0], [2.0, 2.0], LOWER_IS_BETTER), ([4.0, 4.0], [2.0, 2.0], LOWER_IS_BETTER)])
    assert geomean_ratio(r) == pytest.approx(1.0)


def test_median_ci_covers_and_is_unbounded_for_tiny_samples():
    lo, hi = median_ci(np.arange(1.0, 21.0))
    assert lo < 10.5 < hi
    lo, hi = median_ci([1.0, 2.0, 3.0])
    assert math.isinf(lo) or math.isinf(hi) or math.isnan(lo)


def simulate_aa(comparisons, alpha=0.05, seed=1):
    """Fraction of A/A comparisons with any false regression (and any false call)."""
    rng = np.random.default_rng(seed)
    any_regression = any_call = 0
    for _ in range(comparisons):
        metrics = int(rng.integers(5, 40))
        n = int(rng.integers(5, 31))
        pairs = []
        for _m in range(metrics):
            cov = rng.uniform(0.01, 0.10)
            scale = rng.uniform(1, 1000)
            pairs.append((lognormal(n, cov, scale, rng), lognormal(n, cov, scale, rng),
                          LOWER_IS_BETTER if rng.random() < 0.7 else HIGHER_IS_BETTER))
        verdicts = {c.verdict for c in compare_many(pairs, alpha=alpha, threshold=0.01)}
        any_regression += "regression" in verdicts
        any_call += bool(verdicts & {"regression", "improvement"})
    return any_regression / comparisons, any_call / comparisons


def test_aa_false_regression_rate_at_most_alpha():
    # Five independent batches of 1,000 A/A comparisons (fixed seeds). The
    # expected rate is just under alpha (BH under the global null gives alpha,
    # the 1% minimum effect removes a little); one batch's rate has a standard
    # error of ~0.7 points, so the pooled 5,000 are what is held to alpha.
    rates = [simulate_aa(1000, alpha=0.05, seed=seed) for seed in range(10, 15)]
    regression = sum(r for r, _ in rates) / len(rates)
    assert regression <= 0.05, rates
    assert max(r for r, _ in rates) <= 0.05 + 3 * (0.05 * 0.95 / 1000) ** 0.5, rates
    # Either kind of false call: regressions and improvements are separate
    # one-sided families, so up to 2 * alpha (docs/statistics.md).
    assert sum(c for _, c in rates) / len(rates) <= 0.10, rates


def power(shift, cov, n, trials, seed=2, alpha=0.05):
    rng = np.random.default_rng(seed)
    pairs = [(lognormal(n, cov, 100, rng), lognormal(n, cov, 100 * (1 + shift), rng), LOWER_IS_BETTER)
             for _ in range(trials)]
    # Each trial is its own comparison (one metric): BH over one p-value is the p-value.
    hits = sum(compare_many([p], alpha=alpha, threshold=0.01)[0].verdict == "regression" for p in pairs)
    return hits / trials


def test_power_three_percent_shift_cov_two_percent_n10():
    assert power(0.03, 0.02, 10, 1000) >= 0.90


def test_adjusted_interval_agrees_with_the_verdict_and_scipy():
    """The interval shown beside a verdict is the Benjamini-Yekutieli FCR interval:
    each end one-sided at alpha * R / m (R calls of m in the family), so it excludes
    zero exactly when the BH-adjusted p-value is below alpha (issue 8 item 7)."""
    rng = np.random.default_rng(8)
    alpha = 0.05
    unadjusted_only = 0
    for family in range(40):
        pairs = []
        for i in range(20):
            n = int(rng.integers(3, 12))
            shift = rng.choice([0.0, 0.0, 0.0, 0.02, 0.05, 0.2])
            pairs.append((lognormal(n, 0.03, 10, rng), lognormal(n, 0.03, 10 * (1 + shift), rng),
                          [LOWER_IS_BETTER, HIGHER_IS_BETTER][i % 2]))
        results = compare_many(pairs, alpha=alpha, threshold=0.0)
        p_up = np.array([stats.ttest_ind(np.log(b), np.log(a), equal_var=False, alternative="greater").pvalue
                         for a, b, _d in pairs])
        p_down = 1 - p_up
        p_reg = np.where(np.array([d for *_x, d in pairs]) == LOWER_IS_BETTER, p_up, p_down)
        p_imp = 1 - p_reg
        m = len(pairs)
        level = {name: alpha * max(int((stats.false_discovery_control(p, method="bh") < alpha).sum()), 1) / m
                 for name, p in (("regression", p_reg), ("improvement", p_imp))}
        for (a, b, d), c, reg in zip(pairs, results, p_reg):
            lo, hi = c.ci_adjusted
            assert (lo > 0 or hi < 0) == (c.p_adjusted < alpha), (c, family)
            assert c.family_size == m
            worse = (c.p_value == pytest.approx(reg, rel=1e-9, abs=1e-15))
            tail = level["regression" if worse else "improvement"]
            ci = stats.ttest_ind(np.log(b), np.log(a), equal_var=False).confidence_interval(1 - 2 * tail)
            assert lo == pytest.approx(math.expm1(ci.low), rel=1e-7, abs=1e-12)
            assert hi == pytest.approx(math.expm1(ci.high), rel=1e-7, abs=1e-12)
            assert c.ci_level == pytest.approx(1 - 2 * tail)
            # The confusing case of the issue: unadjusted interval excludes zero, no call.
            if (c.ci[0] > 0 or c.ci[1] < 0) and c.verdict == "no change":
                unadjusted_only += 1
                assert lo <= 0 <= hi
    assert unadjusted_only > 0


def test_summary_carries_median_interval_and_bamean():
    x = lognormal(9, 0.1, 50.0)
    s = summarize(x, HIGHER_IS_BETTER)
    assert (s.median_low, s.median_high) == median_ci(x)
    assert s.bamean == bamean(x, HIGHER_IS_BETTER)
    assert s.median_pm == pytest.approx(max(s.median - s.median_low, s.median_high - s.median) / s.median)
    assert math.isinf(summarize(x[:5]).median_pm)  # below 6 samples the median is unbounded
    (c,) = compare_many([(x, x * 1.1, LOWER_IS_BETTER)])
    assert c.median_change == pytest.approx(0.1)


def test_secondary_family_is_adjusted_apart():
    a, b = lognormal(10, 0.02, 1.0), lognormal(10, 0.02, 1.03)
    nulls = [(lognormal(10, 0.02, 1.0), lognormal(10, 0.02, 1.0), LOWER_IS_BETTER) for _ in range(19)]
    (alone,) = compare_many([(a, b, LOWER_IS_BETTER)])
    crowded = compare_many([(a, b, LOWER_IS_BETTER)] + nulls)[0]
    assert alone.p_adjusted == alone.p_value and alone.family_size == 1
    assert crowded.family_size == 20 and crowded.p_adjusted >= alone.p_adjusted
    assert compare_many(nulls, family="secondary")[0].family == "secondary"

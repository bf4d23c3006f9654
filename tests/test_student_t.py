"""perflab.stats.student_t against scipy.special (stdtr, stdtrit), which it replaces on the
path of `perflab detect` and of the power figures: the same p-values and quantiles."""

import math

import numpy as np
import pytest
from scipy import special

from perflab.stats import power, student_t

DFS = [1, 1.5, 2, 2.7, 3, 4, 5, 7.3, 10, 17, 30, 58, 100, 298, 497, 998, 3000, 1e4, 1e5]


def _rel(a: float, b: float) -> float:
    return abs(a - b) / abs(b) if b else abs(a)


def test_two_sided_p_agrees_with_scipy():
    worst = 0.0
    for df in DFS:
        for t in (1e-3, 0.1, 0.5, 1, 1.5, 1.8, 2, 3, 5, 8, 12, 20, 40, 80, 200, 1e3):
            reference = float(2 * special.stdtr(df, -t))
            if reference < 1e-290:
                continue
            got = student_t.two_sided_p(df, t)
            assert student_t.two_sided_p(df, -t) == got
            worst = max(worst, _rel(got, reference))
            assert _rel(student_t.cdf(df, t), float(special.stdtr(df, t))) < 1e-9, (df, t)
            assert _rel(student_t.cdf(df, -t), float(special.stdtr(df, -t))) < 1e-9, (df, t)
    assert worst < 1e-10, worst


def test_tiny_p_values_keep_their_digits():
    # detect prints p-values like 2.2e-56: relative precision in the far tail
    for df, t in ((498, 20.0), (298, 35.0), (10, 1e4), (3, 1e30)):
        reference = float(2 * special.stdtr(df, -t))
        assert 0 < reference < 1e-20
        assert _rel(student_t.two_sided_p(df, t), reference) < 1e-10, (df, t)


def test_edges():
    assert student_t.two_sided_p(5, 0.0) == 1.0
    assert student_t.two_sided_p(5, math.inf) == 0.0
    assert math.isnan(student_t.two_sided_p(5, math.nan))
    assert student_t.two_sided_p(1, 1e200) > 0          # t^2 overflows; the tail does not vanish yet
    assert _rel(student_t.two_sided_p(1, 1e200), 2 / math.pi / 1e200) < 1e-12   # Cauchy: 2 atan(1/t) / pi
    assert student_t.two_sided_p(1e5, 1e-160) == 1.0   # t^2 / df underflows
    assert math.isnan(student_t.two_sided_p(0, 1.0)) and math.isnan(student_t.two_sided_p(-3, 1.0))
    for t in (0.5, 2.0, 8.0, 30.0):                      # infinite df: the normal distribution
        assert _rel(student_t.two_sided_p(math.inf, t), float(2 * special.ndtr(-t))) < 1e-12
    for p in (1e-300, 1e-7, 0.025, 0.3, 0.9, 1 - 1e-9):
        assert _rel(student_t.quantile(math.inf, p), float(special.ndtri(p))) < 1e-12, p
    assert student_t.quantile(7, 0.5) == 0.0
    assert student_t.quantile(7, 1.0) == math.inf and student_t.quantile(7, 0.0) == -math.inf
    assert math.isnan(student_t.quantile(7, 1.5)) and math.isnan(student_t.quantile(0, 0.9))


def test_cauchy_is_exact():
    # df = 1 has closed forms: both directions, far into the tails (where scipy's stdtrit is not exact)
    for t in (1e-8, 0.3, 1, 7, 1e6, 1e100):
        assert _rel(student_t.two_sided_p(1, t), 1 - 2 * math.atan(t) / math.pi if t < 1 else 2 * math.atan(1 / t) / math.pi) < 1e-13
    for p in (0.6, 0.9, 0.975, 1 - 1e-9, 0.3, 1e-12, 1e-300):
        # t = cot(pi (1 - p)), from the tail so that rounding near pi/2 does not enter
        exact = 1 / math.tan(math.pi * (1 - p)) if p > 0.5 else -1 / math.tan(math.pi * p)
        assert _rel(student_t.quantile(1, p), exact) < 1e-12, p


@pytest.mark.parametrize("df", DFS)
def test_quantile_agrees_with_scipy_and_inverts_the_cdf(df):
    for p in (1e-20, 1e-9, 5e-7, 1e-6, 1e-4, 0.001, 0.01, 0.025, 0.05, 0.1, 0.3, 0.4999,
              0.6, 0.9, 0.975, 0.99, 1 - 1e-6, 1 - 1e-9, 1 - 1e-15):
        got = student_t.quantile.__wrapped__(df, p)   # not the cache
        # the tail at the quantile is the tail asked for
        assert _rel(student_t.tail(df, -got) if p < 0.5 else student_t.tail(df, got), min(p, 1 - p)) < 1e-11, (df, p)
        if abs(p - 0.5) > 0.01:
            # near the median scipy's stdtrit loses digits (1.6e-9 at df 4, p 0.4999;
            # this one is within 1e-13 of a 40-digit mpmath root there)
            assert _rel(got, float(special.stdtrit(df, p))) < 1e-9, (df, p)


def test_power_figures_unchanged():
    # the detectable change as it was computed with scipy.special.stdtrit
    for n1, n2, alpha in ((3, 3, 0.05), (10, 490, 0.001 / 494), (250, 250, 0.001 / 494), (2, 1, 0.05)):
        sd = 0.02
        df = n1 + n2 - 2
        reference = (special.stdtrit(df, 1 - alpha / 2) + special.stdtrit(df, power.POWER)) * sd * math.sqrt(1 / n1 + 1 / n2)
        assert _rel(power.detectable_delta(n1, n2, sd, alpha), float(reference)) < 1e-10


def test_random_arguments_against_scipy():
    rng = np.random.default_rng(12)
    for df, t in zip(np.exp(rng.uniform(0, math.log(5e4), 400)), np.exp(rng.uniform(-6, 4, 400))):
        df, t = float(df), float(t)
        reference = float(2 * special.stdtr(df, -t))
        if reference > 1e-290:
            assert _rel(student_t.two_sided_p(df, t), reference) < 1e-10, (df, t)


def test_the_bisection_ends_tests_agree_with_scipy_stats_without_importing_scipy():
    """bisect's test of its ends (Welch on two groups, or a paired t-test) took scipy.stats' t:
    importing scipy.stats cost every `perflab bisect`, `robot` and `series` about a second. Its
    p-value and interval are scipy.stats' (ttest_ind, ttest_1samp) to 1e-10, from a process
    that never loads scipy."""
    import json
    import subprocess
    import sys

    from scipy import stats

    rng = np.random.default_rng(47)
    good, bad = (100 * np.exp(rng.normal(0, 0.01, 7))).tolist(), (103 * np.exp(rng.normal(0, 0.02, 5))).tolist()
    script = ("import json, sys\n"
              "from perflab.stats import sequential\n"
              "good, bad = json.loads(sys.argv[1])\n"
              "out = [sequential.ends_differ(good, bad, 0.01, 3, 0.01),\n"
              "       sequential.ends_differ_paired(good, bad, 0.01, 3, 0.01)]\n"
              "print(json.dumps([[v.p_value, *v.ci, v.change] for v in out]\n"
              "                 + [sorted(m for m in sys.modules if m.split('.')[0] == 'scipy')]))\n")
    proc = subprocess.run([sys.executable, "-c", script, json.dumps([good, bad])], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    welch, paired, scipy_modules = json.loads(proc.stdout)
    assert scipy_modules == []
    lg, lb = np.log(good), np.log(bad)
    looked = 0.01 / 3
    for (p, lo, hi, change), t in ((welch, stats.ttest_ind(lb, lg, equal_var=False)),
                                  (paired, stats.ttest_1samp(lb[:5] - lg[:5], 0.0))):
        interval = t.confidence_interval(1 - looked)
        assert _rel(p, float(t.pvalue)) < 1e-10
        assert _rel(lo, math.expm1(interval.low)) < 1e-10 and _rel(hi, math.expm1(interval.high)) < 1e-10
        assert lo < change < hi

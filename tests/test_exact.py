"""Exact metrics (perflab.stats.exact): compared as a ratio against their resolution, not t-tested,
in compare (every layout), detect and check; noisy metrics keep the statistical path."""

from __future__ import annotations

import csv
import io
import json
import math
import uuid

import numpy as np
import pytest
from scipy import stats as sps

from perflab.core.model import HIGHER_IS_BETTER, INFORMATIONAL, LOWER_IS_BETTER
from perflab.stats import exact, exact_series
from perflab.stats.changepoints import detect as statistical_detect
from perflab.stats.compare import compare_many
from perflab.store.exactness import exact_as_stored

ICOUNT = " (icount)"


# -- perflab.stats.exact ---------------------------------------------------------

def test_the_store_decodes_instruction_counts_and_icount_time_as_exact():
    # what earlier versions stored (and imported files say): the one decoder, perflab.store.exactness
    assert exact_as_stored("lmbench.null_call", "ns (icount)")
    assert exact_as_stored("will-it-scale.getppid1.per_process_ops", "ops/s (icount)")
    assert exact_as_stored("instructions", "")
    assert exact_as_stored("cmd.instructions", None)
    assert exact_as_stored("valgrind.Ir", "")
    assert exact_as_stored("work", "instructions")
    assert not exact_as_stored("time.elapsed_time", "s")
    assert not exact_as_stored("lmbench.null_call", "ns")
    # perf stat counts every process and interrupt of the machine: not exact
    assert not exact_as_stored("perf-stat.instructions", "")


def test_resolution_and_is_exact():
    assert exact.resolution([5.0]) is None
    assert exact.resolution([100.0, 100.01], [7.0]) == pytest.approx(1e-4, rel=1e-3)
    assert exact.resolution([100.0, 100.01], [200.0, 200.2, 200.1]) == pytest.approx(1e-3, rel=1e-3)
    assert exact.resolution([0.0, 1.0]) is None
    # by unit: one sample is enough, but a spread beyond EXACT_LIMIT is not exact
    assert exact.is_exact([1e6], [1.01e6], assume_exact=True)
    assert not exact.is_exact([1e6, 1.05e6], [1.01e6], assume_exact=True)
    # by measurement: MEASURED_MIN samples per group agreeing to EXACT_LIMIT
    assert exact.is_exact([1e6, 1e6 + 5, 1e6], [1.01e6] * 3)
    assert not exact.is_exact([1e6, 1e6], [1.01e6, 1.01e6])
    assert not exact.is_exact([10.0, 10.5, 9.8], [11.0, 11.2, 10.9])


def test_is_exact_without_medians_decides_as_the_resolution_does():
    """is_exact turns a group away by its range against its largest sample before any median is
    taken (a noisy comparison's cost): the same answer as `resolution` <= EXACT_LIMIT gives, also
    for spreads a hair from the limit on either side and for groups whose median is their largest."""
    rng = np.random.default_rng(47)
    near = 0
    for _ in range(3000):
        groups = []
        for _side in range(2):
            n = int(rng.integers(1, 8))
            u = rng.uniform(0, 1, n)
            if n >= 2:
                u[0], u[1] = 0.0, 1.0
                if rng.random() < 0.3:
                    u[2:] = 1.0                       # the median is the largest sample
            target = exact.EXACT_LIMIT * float(rng.choice([rng.uniform(0.5, 1.5), 1 + rng.normal(0, 1e-9), 0.0]))
            m = float(np.median(u))
            width = target / (1 - target * m)         # (max - min) / median == target
            groups.append((float(np.exp(rng.uniform(-5, 20))) * (1 + width * u)).tolist())
        res = exact.resolution(*groups)
        near += res is not None and abs(res / exact.EXACT_LIMIT - 1) < 1e-6
        for assume in (True, False):
            small = any(len(g) < exact.MEASURED_MIN for g in groups)
            want = (res is None or res <= exact.EXACT_LIMIT) if assume else \
                (not small and res is not None and res <= exact.EXACT_LIMIT)
            assert exact.is_exact(*groups, assume_exact=assume) == want, (groups, assume, res)
    assert near > 100

def test_compare_exact_calls_a_planted_one_percent_and_not_zero():
    one = exact.compare_exact([1_000_000], [1_010_000], resolution=None, threshold=0.01)
    assert one.verdict == "regression" and one.called
    assert one.pct_change == pytest.approx(0.01) and one.resolution == exact.DEFAULT_RESOLUTION
    assert one.interval == pytest.approx((0.01 - 1e-4, 0.01 + 1e-4))
    zero = exact.compare_exact([1_000_000], [1_000_000], resolution=None, threshold=0.0)
    assert zero.verdict == "no change" and not zero.called
    # direction-aware, and informational metrics just change
    assert exact.compare_exact([100.0], [99.0], resolution=None, direction=HIGHER_IS_BETTER).verdict == "regression"
    assert exact.compare_exact([100.0], [99.0], resolution=None, direction=LOWER_IS_BETTER).verdict == "improvement"
    assert exact.compare_exact([100.0], [99.0], resolution=None, direction=INFORMATIONAL).verdict == "changed"


def test_compare_exact_needs_the_change_beyond_three_resolutions():
    res = 0.001   # measured 0.1%
    assert exact.compare_exact([100.0], [100.25], resolution=res).verdict == "no change"
    assert exact.compare_exact([100.0], [100.35], resolution=res).verdict == "regression"
    # never finer than DEFAULT_RESOLUTION, however exact the samples
    assert exact.compare_exact([100.0], [100.02], resolution=0.0).verdict == "no change"
    assert exact.compare_exact([100.0], [100.04], resolution=0.0).verdict == "regression"


# -- compare_many ----------------------------------------------------------------

def test_compare_many_one_sample_per_side_when_assumed_exact():
    (c,) = compare_many([([1_000_000], [1_010_000], LOWER_IS_BETTER)], assume_exact=[True])
    assert c.exact and c.test == "exact" and c.verdict == "regression"
    assert c.resolution == exact.DEFAULT_RESOLUTION and math.isnan(c.p_adjusted)
    assert c.ci == pytest.approx((0.0099, 0.0101)) and any("exact" in w for w in c.warnings)
    # without the assumption, one sample per side is not enough for anything
    (n,) = compare_many([([1_000_000], [1_010_000], LOWER_IS_BETTER)])
    assert not n.exact and n.verdict == "insufficient samples"


def test_exact_metrics_stay_out_of_the_bh_adjustment_and_noisy_ones_keep_the_t_test():
    rng = np.random.default_rng(7)
    base, head = rng.lognormal(0, 0.05, 8), rng.lognormal(0.04, 0.05, 8)
    noisy_alone = compare_many([(base, head, LOWER_IS_BETTER)])[0]
    with_exact = compare_many([(base, head, LOWER_IS_BETTER), ([1e6, 1e6, 1e6], [1.02e6] * 3, LOWER_IS_BETTER)],
                              assume_exact=[False, True])
    noisy, ex = with_exact
    assert noisy.test == "welch-log" and not noisy.exact
    # unchanged by the exact metric beside it: BH over the tested metrics only
    assert (noisy.p_value, noisy.p_adjusted, noisy.verdict, noisy.fdr_group_size) == \
        (noisy_alone.p_value, noisy_alone.p_adjusted, noisy_alone.verdict, noisy_alone.fdr_group_size) and \
        noisy.fdr_group_size == 1
    expected = sps.ttest_ind(np.log(head), np.log(base), equal_var=False, alternative="greater").pvalue
    assert noisy.p_value == pytest.approx(expected, rel=1e-9)
    assert ex.exact and ex.verdict == "regression" and math.isnan(ex.p_adjusted)


def test_minimum_effect_of_exact_metrics_is_its_own():
    pair = [([1e6], [1.002e6], LOWER_IS_BETTER)]
    assumed = [True]
    assert compare_many(pair, threshold=0.01, assume_exact=assumed)[0].verdict == "no change"
    c = compare_many(pair, threshold=0.01, assume_exact=assumed, exact_threshold=0.001)[0]
    assert c.verdict == "regression"
    below = compare_many(pair, threshold=0.01, assume_exact=assumed)[0]
    assert any("below the 1% minimum effect" in w for w in below.warnings)


# -- detection -------------------------------------------------------------------

def test_a_tenth_of_a_percent_step_in_an_exact_series_is_a_change_point():
    series = [1_000_000.0] * 30 + [1_001_000.0] * 30
    d = exact_series.detect(series, assume_exact=True, min_effect=exact.EXACT_MIN_EFFECT)
    assert d.exact and [c.index for c in d.change_points] == [30]
    assert d.change_points[0].change == pytest.approx(0.001) and d.change_points[0].test == "exact"
    # the statistical method at its default minimum effect does not call it
    assert statistical_detect(series).change_points == []
    flat = exact_series.detect([1_000_000.0] * 60, assume_exact=True)
    assert flat.exact and flat.change_points == []


def test_exact_detection_with_jitter_one_point_a_side_and_spikes():
    rng = np.random.default_rng(3)
    x = 1e6 * (1 + rng.uniform(-2e-4, 2e-4, 60))
    x[30:] *= 1.003
    d = exact_series.detect(x, assume_exact=True)
    assert [c.index for c in d.change_points] == [30] and d.resolution <= 5e-4
    # one point a side is enough when exact by construction
    two = exact_series.detect([1e6, 1.01e6], assume_exact=True)
    assert [c.index for c in two.change_points] == [1]
    # a one-point excursion back to the same level is a spike at the default min_size
    spike = exact_series.detect([1e6] * 20 + [1.01e6] + [1e6] * 20, assume_exact=True, min_size=3)
    assert spike.change_points == [] and spike.outliers == [20]


def test_noisy_series_are_not_exact():
    rng = np.random.default_rng(5)
    assert exact_series.detect(1e6 * (1 + rng.normal(0, 0.01, 60))) is None
    assert exact_series.detect(1e6 * (1 + rng.normal(0, 0.01, 60)), assume_exact=True) is None


# -- through the CLI on a store ----------------------------------------------------

def _run(tag, values, started="2026-11-01T10:00:00", commit=None):
    return {
        "uuid": str(uuid.uuid4()), "testbox": "kbox", "benchmark": "lmbench", "name": "lmbench",
        "params": {"vm": "icount"}, "tag": tag, "commit": commit, "dirty": False,
        "started": started, "finished": started, "status": "finished", "comment": None, "error": None,
        "environment": {"testbox": "kbox", "kernel_release": "6.1.0", "arch": "x86_64"}, "failures": [],
        "samples": [[metric, v, u, -1, rep] for metric, (vals, u) in values.items() for rep, v in enumerate(vals)],
    }


def _import(cli, tmp_path, runs):
    path = tmp_path / "runs.json"
    path.write_text(json.dumps({"format": "perflab-export", "version": 1, "runs": runs}))
    cli("import", path)


def test_compare_on_icount_runs_says_exact_in_every_layout(cli, tmp_path):
    # one run per side, one sample each: the syscall path 0.6% slower, the page fault unchanged
    _import(cli, tmp_path, [
        _run("k47", {"lmbench.null_call": ([335.2], "ns" + ICOUNT), "lmbench.page_fault": ([6945.0], "ns" + ICOUNT),
                     "lmbench.wall": ([1.0, 1.3], "s")}),
        _run("k50", {"lmbench.null_call": ([337.2], "ns" + ICOUNT), "lmbench.page_fault": ([6945.0], "ns" + ICOUNT),
                     "lmbench.wall": ([1.1, 1.2], "s")}),
    ])
    doc = json.loads(cli("compare", "k47", "k50", "--style", "json").stdout)
    by = {m["metric"]: m for m in doc["metrics"]}
    assert by["lmbench.null_call"]["exact"] is True and by["lmbench.null_call"]["verdict"] == "regression"
    assert by["lmbench.null_call"]["resolution"] == pytest.approx(1e-4)
    assert by["lmbench.page_fault"]["verdict"] == "no change" and by["lmbench.page_fault"]["test"] == "exact"
    assert "exact" not in by["lmbench.wall"] and by["lmbench.wall"]["test"] == "welch-log"
    assert doc["families"]["k50"][0]["exact"] == 2
    rows = {r["metric"]: r for r in csv.DictReader(io.StringIO(cli("compare", "k47", "k50", "--style", "csv").stdout))}
    assert rows["lmbench.null_call"]["exact"] == "exact" and rows["lmbench.wall"]["exact"] == ""
    for style, needle in (("lkp", "exact: compared as a ratio"), ("mmtests", "exact: compared as a ratio"),
                          ("benchstat", "(exact n=1)"), ("kernbench", "exact ±0.01%")):
        out = cli("compare", "k47", "k50", "--style", style).stdout
        assert needle in out, (style, out)
        assert "2 exact metrics" in out, (style, out)
    # an explicit --threshold applies to exact metrics too
    doc = json.loads(cli("compare", "k47", "k50", "--style", "json", "--threshold", "1").stdout)
    assert {m["metric"]: m["verdict"] for m in doc["metrics"]}["lmbench.null_call"] == "no change"
    # check follows compare: one run per side is enough to fail the gate
    gate = cli("check", "--baseline", "k47", "--run", "k50", check=False)
    assert gate.returncode == 1 and "REGRESSION" in gate.stdout and "n too small" not in gate.stdout


def test_detect_on_an_exact_series_finds_a_tenth_of_a_percent(cli, tmp_path):
    runs = []
    for i in range(12):
        count = 1_000_000.0 if i < 6 else 1_001_000.0
        runs.append(_run(f"r{i}", {"cmd.instructions": ([count], "")}, started=f"2026-11-01T10:{i:02d}:00"))
    _import(cli, tmp_path, runs)
    doc = json.loads(cli("detect", "--style", "json").stdout)
    (series,) = doc["series"]
    assert series["exact"] is True
    assert [(c["index"], c["kind"], c["test"]) for c in series["change_points"]] == [(6, "regression", "exact")]
    assert series["change_points"][0]["p_value"] is None
    text = cli("detect").stdout
    assert "exact ±0.01%" in text and "REGRESSION" in text and "+0.10%" in text


def test_cli_defaults_agree_with_stats():
    from perflab.cli import compare as cli_compare, detect as cli_detect

    assert cli_compare.EXACT_MIN_EFFECT_PCT == cli_detect.EXACT_MIN_EFFECT_PCT == exact.EXACT_MIN_EFFECT * 100


def test_settled_samples_finds_the_agreement_once(monkeypatch):
    """settled_samples asked settled (the figure and the agreeing samples) and then computed them
    again: one computation now, `settled` its answer's test."""
    from perflab.stats import exact

    calls = []
    figure = exact.exact_figure
    monkeypatch.setattr(exact, "exact_figure", lambda xs, d: calls.append(1) or figure(xs, d))
    ticked = [0.323029] * 8 + [0.330093, 0.329977]
    assert exact.settled_samples(ticked, -1) == [0.323029] * 8 and len(calls) == 1, calls
    assert exact.settled(ticked, -1) and not exact.settled([1.0, 1.05, 1.1], -1)
    assert exact.settled_samples([1.0, 1.05, 1.1], -1) is None and exact.settled_samples([math.nan], -1) is None

"""`perflab compare`: operands, verdicts and layouts, against a stored fixture."""

import csv
import io
import json
import re

import numpy as np
import pytest

from conftest import CLI, assert_one_line_error
from fixtures_compare import METRICS, load


@pytest.fixture(scope="module")
def loaded(tmp_path_factory, shared_cache):
    """The fixture's store, imported once for the module: the tests that take it only read it."""
    tmp = tmp_path_factory.mktemp("compare")
    store = CLI(tmp / "perflab.db", tmp, shared_cache)
    load(store, tmp)
    return store


def lkp_line(out, metric):
    """The lkp line of a metric: the name follows the figures (and its caveats may follow it)."""
    return next(l for l in out.splitlines() if re.search(rf"\s{re.escape(metric)}(\s|$)", l) and "only in" not in l)


def test_lkp_layout(loaded):
    out = loaded("compare", "base", "head").stdout
    lines = out.splitlines()
    assert lines[0] == "=" * 89
    assert lines[1].startswith("benchmark/mode/nr_task/") and lines[2].startswith("  bench/process/100%/")
    assert "variant:" in out and "  base" in out and "  head" in out
    assert re.search(r"^\s+%stddev\s+%change\s+%stddev$", out, re.M)
    # Regressions first, then improvements, then the rest.
    reg, imp, rest = out.index("-- regressions --"), out.index("-- improvements --"), out.index("-- not significant")
    assert reg < imp < rest
    lat = lkp_line(out, "bench.latency_us")
    assert reg < out.index(lat) < imp
    fields = lat.split()
    assert fields == ["10.00", "+10.0%", "11.00", "bench.latency_us"]
    ops = lkp_line(out, "bench.ops_per_sec")
    assert imp < out.index(ops) < rest and "+20.0%" in ops
    # ±%stddev only where it exceeds 2%: the noisy metric has ~11% CoV.
    noisy = lkp_line(out, "bench.noisy_us")
    assert re.search(r"±\s*1[0-9]%", noisy) and "±" not in lat
    assert out.index(noisy) > rest
    assert "only in base: bench(mode=process,nr_task=100%) bench.gone_us" in out
    assert "only in head: bench(mode=process,nr_task=100%) bench.new_us" in out


def test_operands_by_commit_prefix_and_run_id(loaded):
    by_commit = loaded("compare", "d55f3441", "0355322b").stdout
    assert "commit:" in by_commit and "+10.0%" in lkp_line(by_commit, "bench.latency_us")
    by_id = loaded("compare", "1", "3").stdout  # one run per side: 4 samples each
    assert "+10.0%" in lkp_line(by_id, "bench.latency_us")
    by_kv = loaded("compare", "tag=base,box=lkp-box", "commit=0355322b").stdout
    assert "+10.0%" in lkp_line(by_kv, "bench.latency_us")


def test_json_carries_every_number(loaded):
    doc = json.loads(loaded("compare", "base", "head", "--style", "json").stdout)
    assert doc["operands"] == ["base", "head"]
    recs = {r["metric"]: r for r in doc["metrics"]}
    lat = recs["bench.latency_us"]
    base_vals = np.array(METRICS["bench.latency_us"][2])
    assert lat["base_stats"]["n"] == 8
    assert lat["base_stats"]["mean"] == pytest.approx(base_vals.mean(), rel=1e-12)
    assert lat["base_stats"]["median"] == pytest.approx(np.median(base_vals), rel=1e-12)
    assert lat["base_stats"]["stddev"] == pytest.approx(base_vals.std(ddof=1), rel=1e-12)
    assert lat["verdict"] == "regression" and recs["bench.ops_per_sec"]["verdict"] == "improvement"
    assert recs["bench.steady_us"]["verdict"] == "no change"
    assert lat["ci_low"] < lat["pct_change"] < lat["ci_high"]
    assert lat["p_adjusted"] >= lat["p_value"]
    for key in ("p_value", "p_adjusted", "test", "warnings", "base_values", "head_values", "head_stats"):
        assert key in lat
    assert {"operand": "base", "group": "bench(mode=process,nr_task=100%) bench.gone_us on lkp-box (absent from head)"} in doc["only_in"]


def test_csv_carries_every_number(loaded):
    text = loaded("compare", "base", "head", "--style", "csv").stdout
    rows = list(csv.DictReader(io.StringIO(text)))
    lat = next(r for r in rows if r["metric"] == "bench.latency_us")
    assert float(lat["base_mean"]) == pytest.approx(10.0, rel=1e-9)
    assert float(lat["pct_change"]) == pytest.approx(0.10, rel=1e-6)
    assert lat["verdict"] == "regression"
    for col in ("base_hmean", "base_cov", "head_min", "head_max", "ci_low", "ci_high", "p_value", "p_adjusted"):
        assert lat[col] != ""


def test_mmtests_layout(loaded):
    out = loaded("compare", "base", "head", "--style", "mmtests").stdout
    names = [l.split()[0] for l in out.splitlines() if re.match(r"^(Min|Amean|Hmean|Stddev|CoeffVar|Max|BAmean-95)\s", l)]
    assert names[:6] == ["Min", "Amean", "Stddev", "CoeffVar", "Max", "BAmean-95"]
    assert "Hmean" in names  # the higher-is-better rate
    amean_lat = next(l for l in out.splitlines() if l.startswith("Amean") and "latency_us" in l)
    # Positive means better: a 10% slower latency shows as -10.00%, significant (*).
    assert re.search(r"10\.0000 \(\s*0\.00%\)\s+11\.0000 \(\s*-10\.00%\)\*", amean_lat), amean_lat
    hmean_ops = next(l for l in out.splitlines() if l.startswith("Hmean") and "ops_per_sec" in l)
    assert re.search(r"\(\s*20\.00%\)\*", hmean_ops), hmean_ops
    assert "6.8.0" in out.splitlines()[1] and "head" in out.splitlines()[2]


def test_kernbench_layout(loaded):
    out = loaded("compare", "base", "head", "--style", "kernbench").stdout
    assert "Average base Run (std deviation):" in out and "Average head Run (std deviation):" in out
    head_block = out[out.index("Average head Run"):]
    assert re.search(r"bench\.latency_us\s+11\.00 \(0\.\d+\)\s+\[\+10\.00% regression, p=", head_block)


def test_benchstat_layout(loaded):
    out = loaded("compare", "base", "head", "--style", "benchstat").stdout
    assert "vs base" in out and "geomean" in out
    lat = next(l for l in out.splitlines() if "bench.latency_us" in l)
    assert "+10.00%" in lat and "n=8" in lat and "±" in lat
    steady = next(l for l in out.splitlines() if "bench.steady_us" in l)
    assert " ~ " in steady


def test_fail_on_regression(loaded):
    proc = loaded("compare", "base", "head", "--fail-on-regression", check=False)
    assert proc.returncode == 1 and "-- regressions --" in proc.stdout
    # The reverse direction: the head (old base) is faster everywhere it changed... except ops.
    proc = loaded("compare", "base", "base", "--fail-on-regression", check=False)
    assert proc.returncode == 0


def test_unknown_operand_offers_near_matches(loaded):
    proc = loaded("compare", "base", "haed", check=False)
    assert_one_line_error(proc, "'haed'", "head")


def test_cross_box_refused_then_explained(cli, tmp_path):
    load(cli, tmp_path, box_head="other-box")
    assert_one_line_error(cli("compare", "base", "head", check=False), "different testboxes", "--cross-box")
    out = cli("compare", "base", "head", "--cross-box").stdout
    assert "environment differences" in out and "testbox: lkp-box -> other-box" in out
    assert "+10.0%" in lkp_line(out, "bench.latency_us")


def test_too_few_samples_is_said(cli, tmp_path):
    cli("run", "cmd", "--runs", "1", "--tag", "a", "--", "sleep", "0.01")
    cli("run", "cmd", "--runs", "1", "--tag", "b", "--", "sleep", "0.05")
    out = cli("compare", "a", "b").stdout
    assert "too few samples" in out


def test_cross_box_differences_above_every_text_layout(cli, tmp_path):
    load(cli, tmp_path, box_head="other-box")
    for style in ("mmtests", "kernbench", "benchstat"):
        out = cli("compare", "base", "head", "--cross-box", "--style", style).stdout
        assert out.startswith("environment differences (--cross-box):\n  testbox: lkp-box -> other-box"), style


def test_the_noisy_caveat_says_which_side_is_noisy():
    """issue 33: a noisy base made every head "noisy: CoV above 10%", one at 1.8% too."""
    from perflab.report.notes import caveat_text
    from perflab.stats.compare import NOISY, compare_many

    base = [2506481.0, 3036927.0, 2520000.0, 3030000.0, 2540000.0, 3040000.0]   # CoV ~10.5%
    quiet = [3000000.0, 3040000.0, 3080000.0, 2950000.0, 3100000.0, 3010000.0]   # CoV ~1.8%
    loud = [2600000.0, 3400000.0, 2700000.0, 3300000.0, 2650000.0, 3350000.0]    # CoV ~12%
    both, base_only, head_only, neither = compare_many(
        [(base, loud, 1), (base, quiet, 1), (quiet, loud, 1), (quiet, quiet[::-1], 1)])

    def noisy(c):
        return [(w, w.side, caveat_text(w, c)) for w in c.warnings if w.kind == NOISY]

    b, q, lo = (f"{c * 100:.1f}%" for c in (base_only.base.cov, base_only.head.cov, both.head.cov))
    assert base_only.head.cov < 0.02 and q == "1.8%"
    assert noisy(base_only) == [(f"noisy: the base's CoV {b}", "base", "noisy: the base's CoV above 10%")]
    assert noisy(head_only) == [(f"noisy: CoV {lo}", "head", "noisy: CoV above 10%")]
    assert noisy(both) == noisy(base_only) + noisy(head_only)
    assert noisy(neither) == []

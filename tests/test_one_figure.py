"""One figure per run in every view (issue 44, finding 7): a rate's figure is its harmonic mean in
`show`, in compare's lkp table and in the mail, each naming it; benchstat names its medians and
the LMbench summary its median."""

from __future__ import annotations

import json
import re
import uuid

RATES = {"a": [100.0, 300.0, 200.0], "b": [110.0, 310.0, 210.0]}   # MB/s: higher is better
HMEAN_A = 3 / (1 / 100 + 1 / 300 + 1 / 200)                         # 163.6; the mean is 200


def _store(cli, tmp_path) -> None:
    runs = []
    for tag, values in RATES.items():
        runs.append({
            "uuid": str(uuid.uuid4()), "testbox": "box", "benchmark": "fio", "name": "fio", "params": {},
            "tag": tag, "commit": None, "dirty": None, "started": "2026-01-01T10:00:00",
            "finished": "2026-01-01T10:01:00", "status": "finished", "comment": None, "error": None,
            "environment": {"testbox": "box", "kernel_release": "6.1.0-56-amd64"}, "failures": [],
            "samples": [["fio.read_bw_MBps", v, "MB/s", 1, rep] for rep, v in enumerate(values)]
                       + [["fio.read_clat_mean_us", 1000.0 / v, "us", -1, rep] for rep, v in enumerate(values)]})
    path = tmp_path / "fio.json"
    path.write_text(json.dumps({"format": "perflab-export", "version": 1, "runs": runs}))
    cli("import", path)


def test_a_rates_figure_is_its_harmonic_mean_in_show_and_compare_and_named_there(cli, tmp_path):
    _store(cli, tmp_path)
    (run_id,), = cli.sql("select id from run where tag = 'a'")
    shown = cli("show", run_id).stdout
    row = next(l for l in shown.splitlines() if l.strip().startswith("fio.read_bw_MBps "))
    fields = row.split()
    assert fields[4] == "hmean" and abs(float(fields[3]) - HMEAN_A) < 0.1, row
    latency = next(l for l in shown.splitlines() if l.strip().startswith("fio.read_clat_mean_us ")).split()
    assert latency[4] == "mean", latency
    lkp = cli("compare", "a", "b", "--style", "lkp").stdout
    line = next(l for l in lkp.splitlines() if "fio.read_bw_MBps" in l and "%" in l)
    assert f"{HMEAN_A:.1f}" in line.replace(",", "") or f"{HMEAN_A:.4g}" in line, (line, HMEAN_A)
    assert "figures: harmonic mean of the samples for higher-is-better rates, arithmetic mean otherwise" in lkp, lkp
    mm = cli("compare", "a", "b", "--style", "mmtests").stdout
    assert re.search(r"Hmean\S*\s+.*163\.6", mm), mm
    bench = cli("compare", "a", "b", "--style", "benchstat").stdout
    assert "figures: median of the samples (benchstat's" in bench, bench


def test_the_lmbench_summary_names_its_median(cli, tmp_path):
    from fixtures_lmbench import load

    load(cli, tmp_path)
    out = cli("report", "lmbench", "--box", "k6-2").stdout
    assert out.rstrip().splitlines()[-1] == "figures: median of every sample of each row's runs", out
    assert "median" in cli("report", "lmbench", "--help").stdout and "averaged" not in cli(
        "report", "lmbench", "--help").stdout


def test_an_exact_figure_is_its_least_disturbed_sample_in_show_and_compare(cli, tmp_path):
    """Under icount a rate is exact: its figure is the least disturbed sample (as detect's points
    and the HTML trends take it), the same in show and compare, and named so."""
    runs = []
    for tag, values in (("a", [200.0, 200.0, 199.99]), ("b", [220.0, 220.0, 219.99])):
        runs.append({
            "uuid": str(uuid.uuid4()), "testbox": "box", "benchmark": "fio", "name": "fio", "params": {},
            "tag": tag, "commit": None, "dirty": None, "started": "2026-01-01T10:00:00",
            "finished": "2026-01-01T10:01:00", "status": "finished", "comment": None, "error": None,
            "environment": {"testbox": "box"}, "failures": [],
            "samples": [["fio.read_bw_MBps", v, "MB/s (icount)", 1, rep] for rep, v in enumerate(values)]})
    path = tmp_path / "fio.json"
    path.write_text(json.dumps({"format": "perflab-export", "version": 1, "runs": runs}))
    cli("import", path)
    (run_id,), = cli.sql("select id from run where tag = 'a'")
    row = next(l for l in cli("show", run_id).stdout.splitlines() if l.strip().startswith("fio.read_bw_MBps "))
    assert row.split()[4:6] == ["200", "exact"], row     # the unit is two words
    lkp = cli("compare", "a", "b", "--style", "lkp").stdout
    line = next(l for l in lkp.splitlines() if "fio.read_bw_MBps" in l and "%" in l)
    assert float(line.split()[0]) == 200 and "+10.0%" in line and "220" in line, line
    assert "figures: least disturbed sample of the samples" in lkp, lkp
    mm = cli("compare", "a", "b", "--style", "mmtests").stdout
    assert re.search(r"Exact\S*\s+.*200", mm), mm


def test_log_shows_a_rates_figure_as_show_does(cli, tmp_path):
    _store(cli, tmp_path)
    out = cli("log", "fio").stdout
    row = next(l for l in out.splitlines() if " a " in f" {l} " and "fio.read_bw_MBps" in l)
    assert "163.6" in row and "200" not in row.split("fio.read_bw_MBps")[0], out

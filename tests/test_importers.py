"""`perflab import` of other tools' files: hyperfine, pyperf, Go, Google Benchmark, pytest-benchmark.

The fixtures in tests/data/importers/ are genuine outputs of the tools (see its README);
every assertion is on what the store holds afterwards, read back with `perflab export`.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import os
import shutil
import signal
import socket
import sqlite3
from pathlib import Path

import pytest

from conftest import CLI, assert_one_line_error
from services import until

DATA = Path(__file__).parent / "data" / "importers"
UTC = {"TZ": "UTC"}
TRIED = "not a recognised benchmark file (tried: perflab, hyperfine, pyperf, gotest, gbench, pytest-benchmark)"


def fixture(name: str):
    return json.loads((DATA / name).read_text())


def stored(cli, *args) -> list[dict]:
    return json.loads(cli("export", *args).stdout)["runs"]


def by_name(runs: list[dict]) -> dict[str, dict]:
    return {r["name"]: r for r in runs}


def series(run: dict, metric: str) -> list[float]:
    rows = sorted((s for s in run["samples"] if s[0] == metric), key=lambda s: s[4])
    return [s[1] for s in rows]


def unit_direction(run: dict, metric: str) -> tuple[str, int]:
    found = {(s[2], s[3]) for s in run["samples"] if s[0] == metric}
    assert len(found) == 1, (metric, found)
    return found.pop()


def run_count(cli) -> int:
    return cli.sql("SELECT count(*) FROM run")[0][0]


# -- hyperfine ---------------------------------------------------------------

def test_hyperfine(cli):
    out = cli("import", "--tag", "hf", DATA / "hyperfine.json").stdout
    assert "imported 2 runs (hyperfine JSON, 32 samples)" in out
    doc = fixture("hyperfine.json")
    runs = by_name(stored(cli))
    assert sorted(runs) == ["sleep 0.01", "true"]
    for result in doc["results"]:
        run = runs[result["command"]]
        assert run["benchmark"] == "cmd" and run["tag"] == "hf" and run["status"] == "finished"
        assert run["testbox"] == "imported"
        # The keys of a native `perflab run cmd` run, so both are matched by compare.
        assert run["params"] == {"command": result["command"], "shell": False, "runs": 8, "metrics": []}
        assert series(run, "time.elapsed_time") == result["times"]
        assert unit_direction(run, "time.elapsed_time") == ("s", -1)
        assert series(run, "time.exit_status") == [0.0] * 8
        assert unit_direction(run, "time.exit_status") == ("", 0)
        assert {s[0] for s in run["samples"]} == {"time.elapsed_time", "time.exit_status"}
        env = run["environment"]
        assert env["imported_from"] == "hyperfine" and env["source_file"] == "hyperfine.json"
        assert env["testbox"] == "imported"


def test_hyperfine_parameters_and_box(cli):
    cli("import", "--box", "lab7", DATA / "hyperfine-params.json")
    runs = by_name(stored(cli))
    assert [runs[c]["params"]["n"] for c in ("sleep 0.001", "sleep 0.002", "sleep 0.003")] == ["1", "2", "3"]
    assert {r["testbox"] for r in runs.values()} == {"lab7"}
    assert {r["environment"]["testbox"] for r in runs.values()} == {"lab7"}
    assert all(len(series(r, "time.elapsed_time")) == 5 for r in runs.values())


def test_compare_two_imported_hyperfine_files(cli):
    cli("import", "--tag", "base", DATA / "hyperfine-base.json")
    cli("import", "--tag", "head", DATA / "hyperfine-head.json")
    doc = json.loads(cli("compare", "base", "head", "--style", "json").stdout)
    rows = [m for m in doc["metrics"] if m["metric"] == "time.elapsed_time"]
    assert len(rows) == 1
    row = rows[0]
    assert row["base_values"] == fixture("hyperfine-base.json")["results"][0]["times"]
    assert row["base_stats"]["n"] == row["head_stats"]["n"] == 10
    assert row["verdict"] == "regression"  # sleep 0.012 against sleep 0.010
    assert 0.10 < row["pct_change"] < 0.25
    lkp = cli("compare", "base", "head", "--fail-on-regression", check=False)
    assert lkp.returncode == 1
    assert "time.elapsed_time" in lkp.stdout and "regressions" in lkp.stdout


def test_hyperfine_matches_native_cmd_runs(cli):
    cli("run", "cmd", "--runs", "3", "--tag", "native", "--", "true")
    cli("import", "--tag", "hf", "--box", socket.gethostname(), DATA / "hyperfine.json")
    doc = json.loads(cli("compare", "native", "hf", "--style", "json").stdout)
    rows = [m for m in doc["metrics"] if m["metric"] == "time.elapsed_time"]
    assert len(rows) == 1 and rows[0]["params"]["command"] == "true"
    assert rows[0]["head_stats"]["n"] == 8 and rows[0]["base_stats"]["n"] == 3
    # The command hyperfine timed that perflab did not is listed, not dropped.
    assert any("sleep 0.01" in json.dumps(o) for o in doc["only_in"])


# -- pyperf ------------------------------------------------------------------

def pyperf_values(bench: dict) -> list[float]:
    return [v for run in bench["runs"] for v in run.get("values", [])]


def test_pyperf_suite(cli):
    cli("import", "--tag", "py", DATA / "pyperf-suite.json", env=UTC)
    doc = fixture("pyperf-suite.json")
    runs = by_name(stored(cli))
    assert sorted(runs) == ["dict_lookup", "sort_1000"]
    for bench in doc["benchmarks"]:
        run = runs[bench["metadata"]["name"]]
        values = pyperf_values(bench)
        assert len(values) == 20  # 10 worker processes x 2 values; calibration run and warmups left out
        assert series(run, "pyperf.time") == values
        assert unit_direction(run, "pyperf.time") == ("s", -1)
        assert run["benchmark"] == "pyperf" and run["params"] == {"name": bench["metadata"]["name"]}
        assert run["tag"] == "py" and run["testbox"] == "vm"
        env = run["environment"]
        assert env["hostname"] == "vm" and env["python"] == "3.11.7"
        assert env["cpu_model"] == doc["metadata"]["cpu_model_name"]
        assert env["pyperf.perf_version"] == "2.10.0" and env["imported_from"] == "pyperf"
        dates = [r["metadata"]["date"] for r in bench["runs"]]
        assert run["started"] == min(dates).replace(" ", "T")  # pyperf's local time; TZ=UTC here
    assert runs["dict_lookup"]["environment"]["pyperf.timeit_stmt"] == "'d[500]'"


def test_pyperf_single_benchmark_gzip_and_box(cli, tmp_path):
    # pyperf compresses FILE.json.gz; the format is found from the content, not the name.
    packed = tmp_path / "results.bin"
    packed.write_bytes(gzip.compress((DATA / "pyperf-timeit.json").read_bytes()))
    cli("import", "--box", "py-box", packed)
    (run,) = stored(cli)
    doc = fixture("pyperf-timeit.json")
    assert run["name"] == "timeit"  # a one-benchmark file keeps its name in the suite metadata
    assert run["testbox"] == "py-box"
    assert series(run, "pyperf.time") == pyperf_values(doc["benchmarks"][0])


# -- Go ----------------------------------------------------------------------

def go_lines(name: str, text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.split()[:1] == [name] and len(line.split()) > 2]


def test_gotest(cli):
    text = (DATA / "gotest.txt").read_text()
    out = cli("import", "--tag", "go", DATA / "gotest.txt").stdout
    assert "imported 8 runs (Go benchmark output, 150 samples)" in out
    runs = stored(cli)
    assert len(runs) == 8  # 4 benchmarks x GOMAXPROCS 1 and 2
    key = {(r["params"]["name"], r["params"]["gomaxprocs"]): r for r in runs}
    builder = key[("BenchmarkBuilder/size=16", 1)]
    lines = go_lines("BenchmarkBuilder/size=16", text)
    assert len(lines) == 5
    assert series(builder, "gotest.ns/op") == [float(f[2]) for f in lines]
    assert series(builder, "gotest.MB/s") == [float(f[4]) for f in lines]
    assert unit_direction(builder, "gotest.ns/op") == ("ns/op", -1)
    assert unit_direction(builder, "gotest.MB/s") == ("MB/s", 1)
    assert unit_direction(builder, "gotest.B/op") == ("B/op", -1)
    assert unit_direction(builder, "gotest.allocs/op") == ("allocs/op", -1)
    assert builder["params"] == {"pkg": "example.com/strjoin", "name": "BenchmarkBuilder/size=16", "gomaxprocs": 1}
    assert builder["name"] == "BenchmarkBuilder/size=16" and builder["tag"] == "go"
    procs2 = key[("BenchmarkBuilder/size=16", 2)]
    assert procs2["name"] == "BenchmarkBuilder/size=16-2"
    assert series(procs2, "gotest.ns/op") == [float(f[2]) for f in go_lines("BenchmarkBuilder/size=16-2", text)]
    split = key[("BenchmarkSplit", 1)]
    assert unit_direction(split, "gotest.fields/op") == ("fields/op", 0)  # a custom unit: informational
    env = split["environment"]
    assert env["gotest.goos"] == "linux" and env["gotest.goarch"] == "amd64"
    assert env["cpu_model"] == "Intel(R) Xeon(R) Processor" and env["imported_from"] == "gotest"
    assert split["testbox"] == "imported"


def test_gotest_verbose_output_of_several_packages(cli):
    cli("import", DATA / "gotest-v.txt")
    runs = {r["params"]["name"]: r for r in stored(cli)}
    assert sorted(runs) == ["BenchmarkBuilder/size=16", "BenchmarkBuilder/size=256", "BenchmarkJoin",
                            "BenchmarkSort", "BenchmarkSplit"]
    assert runs["BenchmarkSort"]["params"]["pkg"] == "example.com/strjoin/sub"
    assert runs["BenchmarkJoin"]["params"]["pkg"] == "example.com/strjoin"
    assert series(runs["BenchmarkSort"], "gotest.ns/op") == [1847, 2339, 1492]
    assert {s[0] for s in runs["BenchmarkSort"]["samples"]} == {"gotest.ns/op"}


def test_format_choices_agree():
    from perflab.cli.transfer import IMPORT_FORMATS
    from perflab.exchange.importers import FORMATS

    assert IMPORT_FORMATS == FORMATS


def test_go_unit_directions():
    from perflab.exchange.importers.gotest import direction

    assert [direction(u) for u in ("ns/op", "sec/op", "B/op", "allocs/op", "ns/insert")] == [-1] * 5
    assert [direction(u) for u in ("MB/s", "ops/s", "B/s")] == [1] * 3
    assert [direction(u) for u in ("fields/op", "widgets", "%")] == [0] * 3


# -- Google Benchmark --------------------------------------------------------

def test_gbench(cli):
    out = cli("import", "--tag", "gb", DATA / "gbench.json").stdout
    assert "imported 4 runs (Google Benchmark JSON, 52 samples)" in out
    doc = fixture("gbench.json")
    runs = by_name(stored(cli))
    assert sorted(runs) == ["BM_Memcpy/4096", "BM_Memcpy/64", "BM_Sort/1000", "BM_Threaded/threads:2"]
    sort = runs["BM_Sort/1000"]
    iterations = [b for b in doc["benchmarks"] if b["run_name"] == "BM_Sort/1000" and b["run_type"] == "iteration"]
    assert len(iterations) == 4  # the mean/median/stddev/cv aggregates are left out
    assert series(sort, "gbench.real_time") == [b["real_time"] for b in iterations]
    assert series(sort, "gbench.cpu_time") == [b["cpu_time"] for b in iterations]
    assert unit_direction(sort, "gbench.real_time") == ("us", -1)
    assert unit_direction(sort, "gbench.items_per_second") == ("items/s", 1)
    assert unit_direction(sort, "gbench.elements") == ("", 0)  # user counters carry no direction
    assert series(sort, "gbench.swaps_rate") == [b["swaps_rate"] for b in iterations]
    memcpy = runs["BM_Memcpy/64"]
    assert unit_direction(memcpy, "gbench.real_time") == ("ns", -1)
    assert unit_direction(memcpy, "gbench.bytes_per_second") == ("B/s", 1)
    assert sort["benchmark"] == "gbench" and sort["params"] == {"name": "BM_Sort/1000"}
    assert sort["testbox"] == "vm" and sort["tag"] == "gb"
    assert sort["started"] == "2026-11-23T07:30:01"
    env = sort["environment"]
    assert env["hostname"] == "vm" and env["cpu_threads"] == 2
    assert env["gbench.library_build_type"] == "debug" and env["gbench.mhz_per_cpu"] == 2300
    assert env["imported_from"] == "gbench" and env["source_file"] == "gbench.json"


def test_gbench_errors_and_single_iterations(cli, tmp_path):
    doc = fixture("gbench.json")
    one = dict(doc["benchmarks"][0], repetitions=1, repetition_index=0)
    broken = {"name": "BM_Broken", "family_index": 3, "per_family_instance_index": 0, "run_name": "BM_Broken",
              "run_type": "iteration", "repetitions": 1, "repetition_index": 0, "threads": 1, "iterations": 0,
              "real_time": 0, "cpu_time": 0, "time_unit": "ns", "error_occurred": True, "error_message": "no device"}
    path = tmp_path / "gb.json"
    path.write_text(json.dumps({"context": doc["context"], "benchmarks": [one, broken]}))
    proc = cli("import", path)
    assert "n=1" in proc.stderr and "--benchmark_repetitions" in proc.stderr
    runs = by_name(stored(cli))
    assert runs["BM_Broken"]["status"] == "failed" and "no device" in runs["BM_Broken"]["error"]
    assert runs["BM_Broken"]["samples"] == []
    assert len(series(runs["BM_Memcpy/64"], "gbench.real_time")) == 1


# -- pytest-benchmark --------------------------------------------------------

def test_pytest_benchmark_with_raw_data(cli):
    proc = cli("import", "--tag", "pt", DATA / "pytest-benchmark.json")
    assert proc.stderr == ""
    doc = fixture("pytest-benchmark.json")
    runs = by_name(stored(cli))
    assert len(runs) == 3
    for bench in doc["benchmarks"]:
        run = runs[bench["fullname"]]
        assert series(run, "pytest-benchmark.time") == bench["stats"]["data"]
        assert len(bench["stats"]["data"]) == bench["stats"]["rounds"] == 12
        assert unit_direction(run, "pytest-benchmark.time") == ("s", -1)
        assert run["commit"] == doc["commit_info"]["id"] and run["dirty"] is False
        assert run["params"]["test"] == bench["fullname"] and run["tag"] == "pt"
        assert run["comment"] is None
    assert runs["test_sorting.py::test_sorted[100]"]["params"]["n"] == 100
    env = runs["test_sorting.py::test_join"]["environment"]
    assert env["kernel_release"] == doc["machine_info"]["release"] and env["hostname"] == "vm"
    assert env["cpu_model"] == doc["machine_info"]["cpu"]["brand_raw"]
    assert env["pytest-benchmark.commit_info.branch"] == "master"
    assert "pytest-benchmark.cpu.flags" not in env  # a list of 100 flags would swamp every diff
    assert env["imported_from"] == "pytest-benchmark"
    # The commit selects the runs, as for native runs recorded with --repo.
    assert "test_join" in cli("runs").stdout
    assert cli("compare", doc["commit_info"]["id"][:10], "pt", "--style", "json").returncode == 0


def test_pytest_benchmark_without_raw_data_says_n_is_1(cli):
    proc = cli("import", DATA / "pytest-benchmark-nodata.json")
    assert "perflab: warning:" in proc.stderr and "n=1" in proc.stderr and "stats.data" in proc.stderr
    doc = fixture("pytest-benchmark-nodata.json")
    runs = by_name(stored(cli))
    for bench in doc["benchmarks"]:
        run = runs[bench["fullname"]]
        assert series(run, "pytest-benchmark.time") == [bench["stats"]["mean"]]
        assert "summary only" in run["comment"] and "rounds=12" in run["comment"]


# -- all formats -------------------------------------------------------------

def test_tag_applies_to_perflab_exports_too(cli, tmp_path):
    cli("run", "cmd", "--runs", "2", "--tag", "old", "--", "true")
    cli("export", "-o", tmp_path / "native.json")
    second = CLI(tmp_path / "second.db", tmp_path)
    second("import", "--tag", "relabelled", tmp_path / "native.json")
    (run,) = stored(second)
    assert run["tag"] == "relabelled"
    assert len(run["samples"]) == 2 * 5


def test_detection_is_by_content_and_reimport_skips(cli, tmp_path):
    shutil.copy(DATA / "gbench.json", tmp_path / "results.txt")
    shutil.copy(DATA / "gotest.txt", tmp_path / "bench.json")
    shutil.copy(DATA / "pytest-benchmark.json", tmp_path / "data")
    cli("import", tmp_path / "results.txt", tmp_path / "bench.json", tmp_path / "data")
    formats = {r["environment"]["imported_from"] for r in stored(cli)}
    assert formats == {"gbench", "gotest", "pytest-benchmark"}
    assert run_count(cli) == 4 + 8 + 3
    again = cli("import", tmp_path / "bench.json").stdout
    assert "imported 0 runs" in again and "skipped 8 already present" in again
    assert run_count(cli) == 15
    # Another tag is another set of runs.
    cli("import", "--tag", "second", tmp_path / "bench.json")
    assert run_count(cli) == 23
    # An explicit --format reads the same.
    cli("import", "--format", "hyperfine", "--tag", "fmt", DATA / "hyperfine.json")
    assert run_count(cli) == 25


# -- bad input ---------------------------------------------------------------

def _hyperfine_without_times():
    doc = fixture("hyperfine.json")
    del doc["results"][0]["times"]
    return json.dumps(doc)


def _hyperfine_nan():
    doc = fixture("hyperfine.json")
    doc["results"][1]["times"][3] = float("nan")
    return json.dumps(doc)


def _pyperf_string_value():
    doc = fixture("pyperf-suite.json")
    doc["benchmarks"][1]["runs"][2]["values"][1] = "fast"
    return json.dumps(doc)


def _pyperf_warmups_only():
    doc = fixture("pyperf-suite.json")
    doc["benchmarks"][0]["runs"] = [{k: v for k, v in r.items() if k != "values"} for r in doc["benchmarks"][0]["runs"]]
    return json.dumps(doc)


def _gbench_without_real_time():
    doc = fixture("gbench.json")
    del doc["benchmarks"][3]["real_time"]
    return json.dumps(doc)


def _pytest_without_stats():
    doc = fixture("pytest-benchmark.json")
    del doc["benchmarks"][1]["stats"]
    return json.dumps(doc)


def _go_line(number: int, replace: tuple[str, str]) -> str:
    lines = (DATA / "gotest.txt").read_text().splitlines()
    lines[number - 1] = lines[number - 1].replace(*replace)
    return "\n".join(lines) + "\n"


def _hyperfine_with(result: int, key: str, index: int, value):
    doc = fixture("hyperfine.json")
    doc["results"][result].setdefault(key, [1000] * len(doc["results"][result]["times"]))[index] = value
    return json.dumps(doc)


def _pyperf_value(value):
    doc = fixture("pyperf-suite.json")
    doc["benchmarks"][1]["runs"][2]["values"][0] = value
    return json.dumps(doc)


def _gbench_entry(index: int, key: str, value):
    doc = fixture("gbench.json")
    doc["benchmarks"][index][key] = value
    return json.dumps(doc)


def _pytest_data(value, summary: bool = False):
    doc = fixture("pytest-benchmark-nodata.json" if summary else "pytest-benchmark.json")
    if summary:
        doc["benchmarks"][0]["stats"]["mean"] = value
    else:
        doc["benchmarks"][2]["stats"]["data"][5] = value
    return json.dumps(doc)


# Item 15 of issue 8: durations that are 0 or negative, and values that are not finite.
BAD_VALUES = {
    "hf-negative.json": (lambda: _hyperfine_with(0, "times", 1, -0.5),
                         ["hf-negative.json: looks like hyperfine JSON but key 'results[0].times[1]': -0.5 is not a positive duration"]),
    "hf-zero.json": (lambda: _hyperfine_with(1, "times", 7, 0), ["'results[1].times[7]': 0 is not a positive duration"]),
    "hf-memory.json": (lambda: _hyperfine_with(0, "memory_usage_byte", 2, -4096),
                       ["'results[0].memory_usage_byte[2]': -4096 is not a size (>= 0)"]),
    "hf-exit.json": (lambda: _hyperfine_with(0, "exit_codes", 3, 0.5), ["'results[0].exit_codes[3]': 0.5 is not an exit status"]),
    "hf-inf.json": (lambda: _hyperfine_with(0, "times", 0, float("inf")), ["'results[0].times[0]': inf is not a finite number"]),
    "pyperf-negative.json": (lambda: _pyperf_value(-1e-06),
                             ["looks like pyperf JSON but key 'benchmarks[1].runs[2].values[0]': -1e-06 is not a positive duration"]),
    "gb-real-zero.json": (lambda: _gbench_entry(0, "real_time", 0),
                          ["looks like Google Benchmark JSON but key 'benchmarks[0].real_time': 0 is not a positive duration"]),
    "gb-cpu-negative.json": (lambda: _gbench_entry(1, "cpu_time", -2.5), ["'benchmarks[1].cpu_time': -2.5 is not a CPU time"]),
    "gb-rate.json": (lambda: _gbench_entry(0, "items_per_second", -1.0), ["'benchmarks[0].items_per_second': -1.0 is not a rate"]),
    "pt-zero.json": (lambda: _pytest_data(0.0), ["pytest-benchmark JSON but key 'benchmarks[2].stats.data[5]': 0.0 is not a positive duration"]),
    "pt-mean.json": (lambda: _pytest_data(-0.001, summary=True), ["'benchmarks[0].stats.mean': -0.001 is not a positive duration"]),
    "go-negative.txt": (lambda: _go_line(8, ("47.51 ns/op", "-47.51 ns/op")),
                        ["go-negative.txt:8: looks like Go benchmark output but line 8", "-47.51 ns/op is not a positive duration"]),
    "go-rate.txt": (lambda: _go_rate(), ["looks like Go benchmark output", "-1.5 MB/s is not a rate"]),
}


def _go_rate() -> str:
    lines = (DATA / "gotest.txt").read_text().splitlines()
    number = next(i for i, line in enumerate(lines) if "MB/s" in line)
    fields = lines[number].split()
    fields[fields.index("MB/s") - 1] = "-1.5"
    lines[number] = " ".join(fields)
    return "\n".join(lines) + "\n"


BAD = {
    "hf-notimes.json": (_hyperfine_without_times, ["hf-notimes.json: looks like hyperfine JSON but key 'results[0].times' is missing"]),
    "hf-nan.json": (_hyperfine_nan, ["looks like hyperfine JSON", "'results[1].times[3]'", "finite"]),
    "hf-empty.json": (lambda: '{"results": []}', ["looks like hyperfine JSON", "empty"]),
    "hf-cut.json": (lambda: (DATA / "hyperfine.json").read_text()[:300], ["hf-cut.json:13: looks like hyperfine JSON but is not valid JSON"]),
    "pyperf-str.json": (_pyperf_string_value, ["looks like pyperf JSON but key 'benchmarks[1].runs[2].values[1]' is the string 'fast', expected a number"]),
    "pyperf-warmups.json": (_pyperf_warmups_only, ["looks like pyperf JSON", "dict_lookup", "only warmups"]),
    "gb-noreal.json": (_gbench_without_real_time, ["looks like Google Benchmark JSON but key 'benchmarks[3].real_time' is missing"]),
    "gb-aggregates.json": (lambda: (DATA / "gbench-aggregates.json").read_text(),
                           ["looks like Google Benchmark JSON but it holds only aggregates", "--benchmark_report_aggregates_only"]),
    "pt-nostats.json": (_pytest_without_stats, ["looks like pytest-benchmark JSON but key 'benchmarks[1].stats' is missing"]),
    "go-unit.txt": (lambda: _go_line(8, ("ns/op", "")), ["go-unit.txt:8: looks like Go benchmark output but line 8", "value without a unit"]),
    "go-iter.txt": (lambda: _go_line(7, ("20000", "lots")), ["go-iter.txt:7:", "'lots' where the iteration count should be"]),
    "go-value.txt": (lambda: _go_line(15, ("61.06", "6l.06")), ["go-value.txt:15:", "'6l.06'"]),
    "go-empty.txt": (lambda: "goos: linux\ngoarch: amd64\npkg: example.com/x\nPASS\n", ["looks like Go benchmark output but it has no benchmark result line"]),
    "ambiguous.json": (lambda: '{"benchmarks": []}', [TRIED, "not a perflab export", "--format"]),
    "other.json": (lambda: '{"name": "x", "values": [1, 2]}', [TRIED, "not a perflab export"]),
    "hello.txt": (lambda: "hello\n", [TRIED, "hello.txt"]),
    "empty.txt": (lambda: "", [TRIED]),
    **BAD_VALUES,
}


@pytest.fixture(scope="module")
def empty_store(tmp_path_factory, shared_cache) -> Path:
    """A store with no runs, as `perflab log` makes it: made once, copied by each test below (30
    of them: one `perflab` start-up each, not two)."""
    tmp = tmp_path_factory.mktemp("empty-store")
    CLI(tmp / "perflab.db", tmp, shared_cache)("log")
    return tmp / "perflab.db"


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_is_one_line_and_writes_nothing(cli, tmp_path, name, empty_store):
    make, needles = BAD[name]
    path = tmp_path / name
    path.write_text(make())
    shutil.copyfile(empty_store, cli.db)
    proc = cli("import", path, check=False)
    assert_one_line_error(proc, *needles)
    assert proc.stderr.startswith("perflab: error: ")
    assert run_count(cli) == 0


def test_bad_files_of_other_kinds(cli, tmp_path):
    cli("log")
    (tmp_path / "bin.dat").write_bytes(b"\x00\x01\xff\xfe")
    assert_one_line_error(cli("import", tmp_path / "bin.dat", check=False), "bin.dat: not a text file")
    (tmp_path / "bad.gz").write_bytes(b"\x1f\x8b\x08\x00garbage")
    assert_one_line_error(cli("import", tmp_path / "bad.gz", check=False), "bad.gz", "gzip")
    assert_one_line_error(cli("import", tmp_path / "missing.json", check=False), "missing.json")
    # An explicit format that the file is not: says what it looks like.
    assert_one_line_error(cli("import", "--format", "pyperf", DATA / "hyperfine.json", check=False),
                          "--format pyperf: key 'benchmarks' is missing (the file looks like hyperfine JSON)")
    assert_one_line_error(cli("import", "--format", "gotest", DATA / "gbench.json", check=False),
                          "--format gotest", "looks like Google Benchmark JSON")
    assert_one_line_error(cli("import", "--format", "hyperfine", DATA / "gotest.txt", check=False),
                          "--format hyperfine", "looks like Go benchmark output")
    assert_one_line_error(cli("import", "--format", "perflab", DATA / "pyperf-suite.json", check=False),
                          "not a perflab export", "looks like pyperf JSON")
    assert_one_line_error(cli("import", "--format", "nonsense", DATA / "gbench.json", check=False), "--format")
    assert run_count(cli) == 0


def test_one_bad_file_among_several_imports_nothing(cli, tmp_path):
    cli("log")
    (tmp_path / "bad.txt").write_text(_go_line(8, ("ns/op", "")))
    proc = cli("import", DATA / "hyperfine.json", DATA / "gbench.json", tmp_path / "bad.txt", check=False)
    assert_one_line_error(proc, "bad.txt:8:")
    assert proc.stdout == ""
    assert run_count(cli) == 0


# -- values that can be 0 or negative (issue 8, item 15) ---------------------

def test_values_that_can_be_zero_or_negative_are_kept(cli, tmp_path):
    # hyperfine: a non-zero or negative exit status (Windows), null (killed by a signal), 0 bytes.
    doc = fixture("hyperfine.json")
    doc["results"][0]["exit_codes"][:3] = [1, -1073741819, None]
    doc["results"][0]["memory_usage_byte"] = [0] * 8
    (tmp_path / "hf.json").write_text(json.dumps(doc))
    # Google Benchmark: a CPU time of 0 (a benchmark that waits), a negative user counter.
    gb = fixture("gbench.json")
    gb["benchmarks"][0]["cpu_time"] = 0
    gb["benchmarks"][0]["delta"] = -3.5
    (tmp_path / "gb.json").write_text(json.dumps(gb))
    # Go: 0 B/op and 0 allocs/op are common; a custom unit keeps its sign.
    go = (DATA / "gotest.txt").read_text().replace("24 B/op", "0 B/op", 1).replace("1 allocs/op", "0 allocs/op", 1)
    go = go.replace("BenchmarkJoin        \t   20000\t       100.5 ns/op",
                    "BenchmarkJoin        \t   20000\t       100.5 ns/op\t  -2 delta/op", 1)
    (tmp_path / "go.txt").write_text(go)
    cli("import", tmp_path / "hf.json", tmp_path / "gb.json", tmp_path / "go.txt")
    runs = stored(cli)
    hf = next(r for r in runs if r["name"] == "sleep 0.01")
    assert series(hf, "time.exit_status") == [1.0, -1073741819.0] + [0.0] * 5  # the null one is left out
    assert set(series(hf, "time.maximum_resident_set_size")) == {0.0}
    sort = next(r for r in runs if r["name"] == "BM_Memcpy/64")
    assert series(sort, "gbench.cpu_time")[0] == 0.0 and series(sort, "gbench.delta") == [-3.5]
    join = next(r for r in runs if r["name"] == "BenchmarkJoin")
    assert series(join, "gotest.B/op")[0] == 0.0 and series(join, "gotest.delta/op") == [-2.0]


def test_perflab_export_values_are_checked_by_meaning(cli, tmp_path):
    cli("run", "cmd", "--runs", "2", "--", "true")
    doc = json.loads(cli("export").stdout)
    second = CLI(tmp_path / "second.db", tmp_path)
    second("log")

    def with_sample(metric, value, unit="s"):
        run = dict(doc["runs"][0], samples=doc["runs"][0]["samples"] + [[metric, value, unit, -1, 9]])
        return json.dumps({**doc, "runs": [run]})

    for name, text, needle in (
        ("wall.json", with_sample("time.elapsed_time", -0.5), "run 0, sample 10 (time.elapsed_time): -0.5 is not a positive duration"),
        ("rss.json", with_sample("time.maximum_resident_set_size", -1.0, "KiB"), "-1.0 is not a size"),
        ("inf.json", with_sample("lmbench.signal.handle", 1e400, "us"), "inf is not a finite number"),
    ):
        (tmp_path / name).write_text(text)
        assert_one_line_error(second("import", tmp_path / name, check=False), name, needle)
    assert second.sql("SELECT count(*) FROM run") == [(0,)]
    # A CPU time of 0 is a measurement; so is a difference of two measurements below 0
    # (LMbench's signal handler cost is the handler minus the baseline).
    run = dict(doc["runs"][0], samples=doc["runs"][0]["samples"] + [["time.user_time", 0.0, "s", -1, 9],
                                                                     ["lmbench.signal.handle", -0.02, "us", -1, 0]])
    (tmp_path / "ok.json").write_text(json.dumps({**doc, "runs": [run]}))
    second("import", tmp_path / "ok.json")
    assert second.sql("SELECT value FROM sample WHERE metric='lmbench.signal.handle'") == [(-0.02,)]


# -- big imports: batches, all or nothing (issue 8, items 17 and 18) ---------

def _big_hyperfine(path: Path, times: int, commands: int = 1, bad_last: bool = False) -> int:
    results = [{"command": f"cmd {c}", "times": [0.001 + (i % 97) * 1e-6 for i in range(times)],
                "exit_codes": [0] * times} for c in range(commands)]
    if bad_last:
        results[-1]["times"][-1] = -0.5
    path.write_text(json.dumps({"results": results}, indent=2))
    return 2 * times * commands


def _wait_for_importing_runs(cli, proc, timeout: float = 60) -> None:
    def importing() -> bool:
        try:
            if cli.sql("SELECT count(*) FROM run WHERE status='importing'")[0][0]:
                return True
        except sqlite3.OperationalError:  # the schema is not there yet
            pass
        assert proc.poll() is None, proc.communicate()
        return False

    until("a run shown as 'importing'", importing, timeout, step=0.005)


def test_an_error_after_several_batches_leaves_nothing(cli, tmp_path):
    from perflab.store.importing import BATCH_ROWS

    # 3 commands of 3 batches' worth of samples each; the very last time is negative.
    _big_hyperfine(tmp_path / "big.json", 3 * BATCH_ROWS // 2, commands=3, bad_last=True)
    cli("log")
    proc = cli("import", tmp_path / "big.json", check=False)
    assert_one_line_error(proc, "big.json: looks like hyperfine JSON but key 'results[2].times[14999]': -0.5 is not a positive duration")
    assert cli.sql("SELECT count(*) FROM run") == [(0,)]
    assert cli.sql("SELECT count(*) FROM sample") == [(0,)]


def test_runs_being_imported_are_invisible_until_the_import_ends(cli, tmp_path):
    from perflab.store import open_store
    from perflab.store.importing import BATCH_ROWS

    cli("run", "cmd", "--runs", "1", "--tag", "native", "--", "true")
    store = open_store(str(cli.db))
    writer = store.begin_import()
    writer.begin_file()
    run = {"uuid": "7d9a1b90-0000-4000-8000-000000000001", "testbox": "box", "benchmark": "cmd", "name": "half",
           "params": {"command": "half"}, "tag": "half", "commit": None, "dirty": None,
           "started": dt.datetime(2026, 1, 2), "finished": None, "status": "finished", "comment": None,
           "error": None, "environment": {"testbox": "box"}, "failures": []}
    handle = writer.add_run(run)
    writer.add_samples(handle, [("time.elapsed_time", 0.5, "s", -1, i) for i in range(BATCH_ROWS + 5)])
    # One batch is committed, the rest waits: the run is in the database, as 'importing'.
    assert cli.sql("SELECT status FROM run WHERE name='half'") == [("importing",)]
    assert cli.sql("SELECT count(*) FROM sample s JOIN run r ON r.id=s.run_id WHERE r.name='half'") == [(BATCH_ROWS,)]
    (half_id,) = cli.sql("SELECT id FROM run WHERE name='half'")[0]
    assert "half" not in cli("runs").stdout and "half" not in cli("log").stdout
    assert [r["name"] for r in stored(cli)] == ["true"]
    assert_one_line_error(cli("show", str(half_id), check=False), f"no run with id {half_id}")
    assert cli("compare", "half", "native", check=False).returncode != 0
    # A later command does not take it for a dead import: its writer (this process) is alive.
    assert cli.sql("SELECT count(*) FROM run WHERE name='half'") == [(1,)]
    (counts,) = writer.commit()
    assert (counts.runs, counts.skipped, counts.samples) == (1, 0, BATCH_ROWS + 5)
    (half,) = [r for r in stored(cli) if r["name"] == "half"]
    assert half["status"] == "finished" and len(half["samples"]) == BATCH_ROWS + 5


def test_a_killed_import_is_removed_by_the_next_command(cli, tmp_path):
    _big_hyperfine(tmp_path / "big.json", 100_000)
    cli("run", "cmd", "--runs", "1", "--", "true")
    proc = cli.popen("import", tmp_path / "big.json")
    _wait_for_importing_runs(cli, proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert cli.sql("SELECT count(*) FROM run WHERE status='importing'")[0][0] == 1
    assert cli.sql("SELECT count(*) FROM sample")[0][0] > 5
    assert "cmd 0" not in cli("runs").stdout
    assert cli.sql("SELECT status, count(*) FROM run GROUP BY status") == [("finished", 1)]
    assert cli.sql("SELECT count(*) FROM sample")[0][0] == 5  # the native run's


@pytest.mark.parametrize("sig, code, name", [(signal.SIGINT, 130, "Ctrl-C (SIGINT)"), (signal.SIGTERM, 143, "SIGTERM")])
def test_an_interrupted_import_says_nothing_was_imported(cli, tmp_path, sig, code, name):
    _big_hyperfine(tmp_path / "big.json", 100_000)
    cli("log")
    proc = cli.popen("import", tmp_path / "big.json")
    _wait_for_importing_runs(cli, proc)
    os.kill(proc.pid, sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == code, (out, err)
    assert err.strip() == (f"perflab: error: interrupted by {name}: nothing was imported "
                           "(the runs written so far were removed)"), err
    assert "kept" not in err and out == ""
    assert cli.sql("SELECT count(*) FROM run") == [(0,)]
    assert cli.sql("SELECT count(*) FROM sample") == [(0,)]


def test_other_writers_get_in_while_a_big_import_runs(cli, tmp_path):
    samples = _big_hyperfine(tmp_path / "big.json", 150_000)
    cli("log")
    proc = cli.popen("import", tmp_path / "big.json")
    _wait_for_importing_runs(cli, proc)
    # Another writer (the way `perflab run` commits a repetition) gets the lock while the
    # import is still going: its transactions are short, and it leaves gaps between them.
    con = sqlite3.connect(cli.db, timeout=10)
    try:
        con.execute("INSERT INTO testbox (name) VALUES ('other writer')")
        con.commit()
    finally:
        con.close()
    assert cli.sql("SELECT count(*) FROM run WHERE status='importing'") == [(1,)]
    assert proc.poll() is None  # the import had not finished when the other writer got in
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert f"imported 1 runs (hyperfine JSON, {samples} samples)" in out
    assert cli.sql("SELECT status, count(*) FROM run GROUP BY status") == [("finished", 1)]
    assert cli.sql("SELECT count(*) FROM sample") == [(samples,)]


def test_a_pipe_and_a_file_named_twice(cli, tmp_path):
    text = (DATA / "hyperfine.json").read_text()
    proc = cli("import", "/dev/stdin", DATA / "hyperfine.json", input=text)
    assert "/dev/stdin: imported 2 runs (hyperfine JSON, 32 samples)" in proc.stdout
    # The same bytes, so the same run uuids: the second file adds nothing.
    assert "hyperfine.json: imported 0 runs (hyperfine JSON, 0 samples), skipped 2 already present" in proc.stdout
    assert run_count(cli) == 2

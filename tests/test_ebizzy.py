"""The ebizzy family through the CLI at its smallest size: its metrics exist with sane
magnitudes for malloc, mmap and touch runs; bad options are one-line errors before
anything runs; the C program and the parser refuse what they cannot use."""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import assert_one_line_error
from perflab.core import cbuild
from perflab.benchmarks.base import ItemFailed, JobError
from perflab.benchmarks.ebizzy import BUILD_FLAGS, BUILD_LIBS, FAMILY, SOURCE_DIR, parse_output

METRICS = {"ebizzy.throughput", "ebizzy.throughput.per_thread.min", "ebizzy.throughput.per_thread.max",
           "ebizzy.throughput.per_thread.stddev_percent", "ebizzy.time.real", "ebizzy.time.user", "ebizzy.time.sys"}
SMALL = ("--chunks", "2", "--chunk-size", "64k", "--duration", "0.3")


def samples(cli, run_id: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for metric, value in cli.sql("SELECT metric, value FROM sample WHERE run_id = ? ORDER BY repetition", (run_id,)):
        out.setdefault(metric, []).append(value)
    return out


def test_three_allocation_styles_and_two_threads_give_sane_metrics(cli):
    cli("run", "ebizzy", "--runs", "1", "--nr-threads", "2", *SMALL,
        "--mmap", "false", "--mmap", "true", "--touch", "false", "--touch", "true")
    runs = cli.sql("SELECT id, status, params FROM run ORDER BY id")
    assert len(runs) == 4 and all(status == "finished" for _, status, _ in runs)
    rates = {}
    for run_id, _, params in runs:
        p = json.loads(params)
        assert p["nr_threads"] == 2 and p["chunk_size"] == 65536
        s = samples(cli, run_id)
        assert set(s) == METRICS
        total = s["ebizzy.throughput"][0]
        low, high = s["ebizzy.throughput.per_thread.min"][0], s["ebizzy.throughput.per_thread.max"][0]
        assert 0 < low <= high <= total
        assert 2 * low <= total * (1 + 1e-9) and total <= 2 * high * (1 + 1e-9)
        assert 0 <= s["ebizzy.throughput.per_thread.stddev_percent"][0] <= 50
        real = s["ebizzy.time.real"][0]
        assert 0.3 <= real < 5
        # CPU seconds, not another unit: some, and no more than two threads busy for the timed
        # seconds (plus a little setup) can use - not a share of the CPUs, which load decides
        cpu = s["ebizzy.time.user"][0] + s["ebizzy.time.sys"][0]
        assert 0 < cpu < 2 * real + 0.1, (cpu, real)
        # records per CPU second: what a record costs, whatever share of the CPUs the run got
        rates[(p["mmap"], p["touch"])] = total * real / cpu
    # A 64 KiB copy from the malloc heap costs microseconds; an mmap'd one faults 16 pages in
    # and unmaps them: the malloc run completes more records per CPU second (about 30 times
    # as many here; records per wall second would also hang on the share each run got).
    assert rates[(False, False)] > rates[(True, False)]


def test_threads_as_a_percentage_of_the_cpus_and_random_picks(cli):
    import os

    cli("run", "ebizzy", "--runs", "1", "--nr-threads", "100%", "--random", "true", *SMALL)
    (params,), = cli.sql("SELECT params FROM run")
    assert json.loads(params)["nr_threads"] == len(os.sched_getaffinity(0))
    assert json.loads(params)["random"] is True
    assert cli.sql("SELECT count(*) FROM sample WHERE metric = 'ebizzy.throughput' AND value > 0") == [(1,)]


BAD = [
    ({"nr_threads": 0}, ("nr_threads", "between 1 and")),
    ({"nr_threads": "lots"}, ("nr_threads", "N% of the CPUs")),
    ({"chunk_size": 7}, ("chunk_size", "multiple of 8")),
    ({"chunk_size": "big"}, ("chunk_size", "512k")),
    ({"chunks": 0}, ("chunks", "1 to")),
    ({"mmap": "maybe"}, ("mmap", "valid: true, false")),
    ({"duration": -1}, ("duration", "positive")),
    ({"chunks": 1000000, "chunk_size": "1G"}, ("memory available",)),
]


@pytest.mark.parametrize("raw, needles", BAD)
def test_bad_parameters_are_refused_naming_the_parameter(raw, needles):
    with pytest.raises(JobError) as e:
        FAMILY.parse_params(raw)
    assert "\n" not in str(e.value)
    for n in needles:
        assert n in str(e.value)


@pytest.mark.parametrize("args, needles", [
    (("--nr-threads", "0"), ("nr_threads", "between 1 and")),
    (("--mmap", "true", "--chunks", "1000000", "--chunk-size", "1G"), ("memory available",)),
])
def test_bad_options_are_one_line_errors_before_anything_runs(cli, args, needles):
    proc = cli("run", "ebizzy", "--runs", "1", *args, check=False)
    assert_one_line_error(proc, *needles)
    assert not cli.db.exists() or cli.sql("SELECT count(*) FROM run") == [(0,)]


def test_unknown_key_in_a_job_file_lists_the_valid_ones(cli, tmp_path):
    job = tmp_path / "bad.yaml"
    job.write_text("benchmark: ebizzy\nthreads: 2\n")
    proc = cli("run", str(job), check=False)
    assert_one_line_error(proc, "threads", "nr_threads")


def test_the_program_refuses_bad_options_with_one_line(tmp_path):
    binary = cbuild.build("ebizzy", SOURCE_DIR, flags=BUILD_FLAGS, libs=BUILD_LIBS)
    for argv, needle in ((["-t", "0"], "-t"), (["-x"], "-x"), (["-S", "nan"], "-S"), (["-s", "-8"], "-s")):
        proc = subprocess.run([str(binary), *argv], capture_output=True, text=True, timeout=10)
        assert proc.returncode == 2, argv
        assert proc.stdout == "" and len(proc.stderr.strip().splitlines()) == 1 and needle in proc.stderr


def test_the_parser_refuses_garbage():
    def out(elapsed, records):     # the program's metric lines
        return "".join([f'{{"metric": "ebizzy.elapsed", "value": {elapsed}, "unit": "s"}}\n'] +
                       [f'{{"metric": "ebizzy.records", "value": {r}, "unit": "records"}}\n' for r in records])
    good = out(1.0, [10, 30])
    figures = {s.metric: s.value for s in parse_output(good, 2)}
    assert figures["ebizzy.throughput"] == 40 and figures["ebizzy.throughput.per_thread.min"] == 10
    assert figures["ebizzy.throughput.per_thread.stddev_percent"] == pytest.approx(25.0)   # LKP: stddev / total
    for bad in ("", "records/s 10", out(1.0, [10]), out(0, [1, 2]),
                out(1.0, [1, -2]), good + "\n" + good):
        with pytest.raises(ItemFailed):
            parse_output(bad, 2)


def test_records_mode_stops_after_that_many_records_past_a_warm_up(tmp_path):
    """-R (the icount sample): RECORDS records of all threads are counted after a warm-up of a
    quarter of them, exactly RECORDS however the threads are scheduled (each record takes a
    ticket; before, a thread preempted between the last record and the stop let the others
    count more: 403 of 400 with 3 threads)."""
    binary = cbuild.build("ebizzy", SOURCE_DIR, flags=BUILD_FLAGS, libs=BUILD_LIBS)
    for threads in (1, 3):
        proc = subprocess.run([str(binary), "-t", str(threads), "-n", "2", "-s", "65536", "-S", "1000", "-R", "400"],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        lines = [json.loads(line) for line in proc.stdout.splitlines()]
        records = [e["value"] for e in lines if e["metric"] == "ebizzy.records"]
        elapsed = next(e["value"] for e in lines if e["metric"] == "ebizzy.elapsed")
        assert len(records) == threads
        # -S 1000 would take 1000 s: the records ended the run
        assert sum(records) == 400 and 0 < elapsed < 60
    proc = subprocess.run([str(binary), "-R", "0"], capture_output=True, text=True, timeout=10)
    assert proc.returncode == 2 and "-R" in proc.stderr and len(proc.stderr.splitlines()) == 1

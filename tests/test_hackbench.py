"""The hackbench family through the CLI at its smallest size: every mode x ipc passes
every message and gives sane time and throughput; placement is applied and recorded;
bad options are one-line errors before anything runs; the C program and the parser
refuse what they cannot use."""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import assert_one_line_error
from perflab.core import cbuild
from perflab.benchmarks.base import ItemFailed, JobError
from perflab.benchmarks.hackbench import BUILD_FLAGS, BUILD_LIBS, SOURCE_DIR, FAMILY, parse_output

METRICS = {"hackbench.time", "hackbench.throughput", "hackbench.time.user", "hackbench.time.sys"}


def test_every_mode_and_ipc_gives_sane_time_and_throughput(cli):
    cli("run", "hackbench", "--runs", "2", "--groups", "1", "--loops", "20",
        "--mode", "process", "--mode", "thread", "--ipc", "socket", "--ipc", "pipe")
    runs = cli.sql("SELECT id, status, params FROM run ORDER BY id")
    assert len(runs) == 4 and all(status == "finished" for _, status, _ in runs)
    seen = set()
    for run_id, _, params in runs:
        p = json.loads(params)
        seen.add((p["mode"], p["ipc"]))
        rows = cli.sql("SELECT repetition, metric, value FROM sample WHERE run_id = ?", (run_id,))
        for repetition in (0, 1):
            s = {m: v for r, m, v in rows if r == repetition}
            assert set(s) == METRICS
            assert 0 < s["hackbench.time"] < 30
            # 1 group x 20 senders x 20 receivers x 20 loops = 8000 messages
            assert s["hackbench.throughput"] == pytest.approx(8000 / s["hackbench.time"])
            assert s["hackbench.time.user"] + s["hackbench.time.sys"] > 0
    assert seen == {("process", "socket"), ("process", "pipe"), ("thread", "socket"), ("thread", "pipe")}


def test_one_cpu_placement_is_applied_and_recorded(cli):
    import os

    cli("run", "hackbench", "--runs", "1", "--groups", "1", "--fds", "2", "--loops", "10", "--placement", "one-cpu")
    (facts,), = cli.sql("SELECT e.facts FROM environment e JOIN run r ON r.environment_id = e.id")
    assert json.loads(facts)["placement"] == f"every task on CPU {min(os.sched_getaffinity(0))}"
    assert cli.sql("SELECT count(*) FROM sample WHERE metric = 'hackbench.time' AND value > 0") == [(1,)]


@pytest.mark.parametrize("raw, needles", [
    ({"groups": 0}, ("groups", "between 1 and")),
    ({"loops": "many"}, ("loops", "whole number")),
    ({"datasize": 0}, ("datasize", "between 1 and")),
    ({"fds": 1001}, ("fds", "between 1 and")),
    ({"mode": "fork"}, ("mode", "'process' or 'thread'")),
    ({"ipc": "inet"}, ("ipc", "'socket' or 'pipe'")),
    ({"placement": "cpu0"}, ("placement", "scheduler")),
    ({"senders": 3}, ("senders", "groups, fds")),
])
def test_bad_parameters_are_refused_naming_the_parameter(raw, needles):
    with pytest.raises(JobError) as e:
        FAMILY.parse_params(raw)
    assert "\n" not in str(e.value)
    for n in needles:
        assert n in str(e.value)


@pytest.mark.parametrize("args, needles", [
    (("--mode", "fork"), ("mode", "'process' or 'thread'")),
    (("--groups", "0"), ("groups", "between 1 and")),
])
def test_bad_options_are_one_line_errors_before_anything_runs(cli, args, needles):
    proc = cli("run", "hackbench", "--runs", "1", *args, check=False)
    assert_one_line_error(proc, *needles)
    assert not cli.db.exists() or cli.sql("SELECT count(*) FROM run") == [(0,)]


def test_a_thread_run_beyond_the_descriptor_limit_is_refused_before_anything_runs(cli, tmp_path):
    job = tmp_path / "big.yaml"
    job.write_text("benchmark: hackbench\nloops: 1\nmode: thread\ngroups: [1, 2000]\n")
    proc = subprocess.run(["sh", "-c", f'ulimit -n 1024 && exec "$0" run {job}', _perflab()],
                          capture_output=True, text=True, env=cli.env, cwd=tmp_path, timeout=60)
    assert_one_line_error(proc, "groups = 2000", "ulimit -n")
    assert not cli.db.exists() or cli.sql("SELECT count(*) FROM run") == [(0,)]   # not even groups: 1


def _perflab() -> str:
    from conftest import PERFLAB

    return PERFLAB


def test_the_program_refuses_bad_options_with_one_line():
    binary = cbuild.build("hackbench", SOURCE_DIR, flags=BUILD_FLAGS, libs=BUILD_LIBS)
    for argv, needle in ((["-g", "0"], "-g"), (["-m", "fork"], "-m"), (["-i", "inet"], "-i"), (["-z"], "-z")):
        proc = subprocess.run([str(binary), *argv], capture_output=True, text=True, timeout=10)
        assert proc.returncode == 2, argv
        assert proc.stdout == "" and len(proc.stderr.strip().splitlines()) == 1 and needle in proc.stderr


def test_the_parser_refuses_garbage():
    p = FAMILY.parse_params({"groups": 1, "loops": 10})
    def out(tasks, messages, time):     # the program's metric lines
        return (f'{{"metric": "hackbench.time", "value": {time}, "unit": "s"}}\n'
                f'{{"metric": "hackbench.messages", "value": {messages}, "unit": "messages"}}\n'
                f'{{"metric": "hackbench.tasks", "value": {tasks}, "unit": "tasks"}}\n')
    good = out(40, 4000, 0.5)
    figures = {s.metric: s.value for s in parse_output(good, p)}
    assert figures == {"hackbench.time": 0.5, "hackbench.throughput": 8000}
    for bad in ("", "Time: 0.5", out(40, 4000, 0), out(40, 3999, 1),
                out(20, 4000, 1), good + "\n" + good):
        with pytest.raises(ItemFailed):
            parse_output(bad, p)

"""`measure: instructions | cache`: processes counted under the real valgrind, end to end."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from conftest import assert_one_line_error
from perflab.jobs.job import AtomicJob

LOOP = r"""
#include <stdlib.h>
__attribute__((noinline)) static long work(long n) {
    volatile long s = 0;
    for (long i = 0; i < n; i++)
        s += i;
    return s;
}
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000;
    return work(n) == -1;
}
"""


@pytest.fixture
def loop(tmp_path):
    """A small C program built with the machine's compiler: `loop N` runs N iterations of work()."""
    src = tmp_path / "loop.c"
    src.write_text(LOOP)
    binary = tmp_path / "loop"
    subprocess.run(["cc", "-O1", "-o", str(binary), str(src)], check=True)
    return str(binary)


def counts(cli, run_id, metric="valgrind.instructions"):
    return [v for (v,) in cli.sql("SELECT value FROM sample WHERE run_id=? AND metric=? ORDER BY repetition",
                                  (run_id, metric))]


def metrics_of(cli, run_id):
    rows = cli.sql("SELECT metric, value, unit FROM sample WHERE run_id=? AND repetition=0", (run_id,))
    return {m: (v, u) for m, v, u in rows}


def test_two_runs_count_the_same_instructions_beside_the_times(cli, loop):
    cli("run", "cmd", "--measure", "instructions", "--runs", "2", "--", loop, "200000")
    first, second = counts(cli, 1)
    assert first == second and first > 200000 * 3
    got = metrics_of(cli, 1)
    assert got["valgrind.instructions"][1] == "instructions"
    assert {"time.elapsed_time", "time.user_time", "time.system_time"} <= set(got)
    (params, job), = cli.sql("SELECT params, job FROM run WHERE id=1")
    assert json.loads(params)["measure"] == "instructions" and json.loads(job)["measure"] == "instructions"
    (facts,), = cli.sql("SELECT facts FROM environment")
    facts = json.loads(facts)
    assert facts["valgrind_version"].startswith("3.") and facts["cpu_vendor"] and facts["glibc_hwcaps"]
    assert facts["benchmark_aslr"].startswith("off") and "TZ=UTC" in facts["measure_env"]


def test_a_variant_doing_more_work_counts_more(cli, loop):
    cli("run", "cmd", "--measure", "instructions", "--runs", "1", "--cmd", f"{loop} 1000000", "--cmd", f"{loop} 1030000")
    (base,), (more,) = counts(cli, 1), counts(cli, 2)
    # 3.0% more iterations; the start-up instructions are the same in both.
    assert 1.02 < more / base < 1.031


def test_cache_adds_misses_and_estimated_cycles(cli, loop):
    cli("run", "cmd", "--measure", "cache", "--runs", "1", "--", loop, "100000")
    got = {m: v for m, (v, _) in metrics_of(cli, 1).items()}
    for name in ("valgrind.data_reads", "valgrind.data_writes", "valgrind.I1_misses", "valgrind.D1_misses",
                 "valgrind.LL_misses", "valgrind.estimated_cycles"):
        assert name in got, name
    expected = (got["valgrind.instructions"] + 10 * (got["valgrind.I1_misses"] + got["valgrind.D1_misses"])
                + 100 * got["valgrind.LL_misses"])
    assert got["valgrind.estimated_cycles"] == expected > got["valgrind.instructions"]
    (facts,), = cli.sql("SELECT facts FROM environment")
    assert "8388608 B" in json.loads(facts)["valgrind_caches"]     # the fixed LL, not the host's


def test_one_function_counted_alone_and_children_followed(cli, loop, tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text(f"benchmark: cmd\nruns: 1\nmeasure: instructions\nmeasure_function: work\nargv: [{loop}, '100000']\n")
    cli("run", str(job))
    (alone,) = counts(cli, 1)
    assert 100000 * 3 < alone < 100000 * 10          # the loop, without the program's start-up
    job.write_text(f"benchmark: cmd\nruns: 1\nmeasure: instructions\nmeasure_children: true\nshell: true\n"
                   f"command: '{loop} 100000; {loop} 100000'\n")
    cli("run", str(job))
    cli("run", "cmd", "--measure", "instructions", "--runs", "1", "--", loop, "100000")
    (shell,), (one,) = counts(cli, 2), counts(cli, 3)
    assert shell > 2 * one
    assert counts(cli, 2, "valgrind.processes")[0] >= 2


def test_a_function_that_never_ran_is_a_failure_not_zero_instructions(cli, loop, tmp_path):
    """Issue 31 M4: a misspelled measure_function was stored as a finished run of 0 instructions."""
    job = tmp_path / "job.yaml"
    job.write_text(f"benchmark: cmd\nruns: 1\nmeasure: instructions\nmeasure_function: no_such_function_xyz\n"
                   f"argv: [{loop}, '1000']\n")
    proc = cli("run", str(job), check=False)
    assert proc.returncode != 0
    assert "measure_function 'no_such_function_xyz' counted no instruction" in proc.stderr + proc.stdout
    assert cli.sql("SELECT status FROM run") != [("finished",)]
    assert cli.sql("SELECT count(*) FROM sample WHERE metric = 'valgrind.instructions' AND value = 0") == [(0,)]


def test_rerun_counts_again(cli, loop):
    cli("run", "cmd", "--measure", "instructions", "--runs", "1", "--", loop, "1000")
    cli("rerun", "1", "--tag", "again")
    assert counts(cli, 1) == counts(cli, 2)


def test_without_valgrind_a_one_line_error_names_the_package(cli, loop, tmp_path):
    bare = tmp_path / "bin"
    bare.mkdir()
    proc = cli("run", "cmd", "--measure", "instructions", "--runs", "1", "--", loop, check=False,
               env={"PATH": str(bare)})
    assert_one_line_error(proc, "valgrind", "Debian package `valgrind`")
    assert not cli.db.exists() or cli.sql("SELECT count(*) FROM run") == [(0,)]


def test_a_program_valgrind_cannot_run_fails_the_run_with_valgrinds_message(cli, tmp_path):
    # An executable for another architecture: valgrind names the platform it has no tool for.
    other = tmp_path / "other-arch"
    shutil.copy("/bin/true", other)
    with open(other, "r+b") as f:
        f.seek(18)
        f.write(b"\xb7\x00")          # e_machine: AArch64
    os.chmod(other, 0o755)
    proc = cli("run", "cmd", "--measure", "instructions", "--runs", "1", "--", str(other), check=False)
    assert_one_line_error(proc, "valgrind", "failed to start tool")
    assert cli.sql("SELECT status FROM run") == [("failed",)]


@pytest.mark.parametrize("text, needles", [
    ("measure: cycles\n", ("job.yaml:3", "'measure'", "'cycles'", "instructions, cache")),
    ("measure_children: true\n", ("job.yaml:3", "'measure_children'", "needs measure")),
    ("measure: instructions\nmeasure_children: maybe\n", ("job.yaml:4", "'measure_children'", "true or false")),
])
def test_bad_measure_keys_name_the_key_and_line(cli, tmp_path, text, needles):
    job = tmp_path / "job.yaml"
    job.write_text("benchmark: cmd\nruns: 1\n" + text + "command: /bin/true\n")
    assert_one_line_error(cli("run", str(job), check=False), *needles)
    assert not cli.db.exists()


def test_a_guest_job_cannot_be_counted(cli, tmp_path):
    kernel = tmp_path / "vmlinuz"
    kernel.write_bytes(b"not booted: refused before")
    job = tmp_path / "job.yaml"
    job.write_text(f"benchmark: hackbench\nmeasure: instructions\nkernel: {kernel}\n")
    assert_one_line_error(cli("run", str(job), check=False), "job.yaml:2", "'measure'", "guest")
    assert_one_line_error(cli("run", "hackbench", "--measure", "cache", "--kernel", str(kernel), check=False),
                          "'measure'", "guest")


def test_jobs_without_measure_keep_their_json_form():
    plain = {"benchmark": "cmd", "params": {"argv": ["true"]}, "runs": 1, "warmup": 0, "timeout": None,
             "tag": None, "comment": None, "monitors": {}}
    assert AtomicJob.from_dict(plain).to_dict() == plain
    assert list(AtomicJob.from_dict(plain).to_dict()) == list(plain)
    counted = AtomicJob.from_dict(plain).with_(measure="cache", measure_function="work").to_dict()
    assert list(counted) == [*plain, "measure", "measure_function"]
    assert AtomicJob.from_dict(counted).to_dict() == counted


def test_a_suite_repetition_names_each_process_and_stores_their_sum(loop):
    """Several recorded processes per repetition (the lmbench suite's shape), through the real executor."""
    from perflab.benchmarks.base import Session
    from perflab.benchmarks.measured import Valgrind
    from perflab.core.process import ProcessSpec
    from perflab.execution.executor import execute

    class Suite(Session):
        def processes(self, repetition):
            return [ProcessSpec(["/bin/true"], item="setup", record=False),
                    ProcessSpec([loop, "1000"], item="small"), ProcessSpec([loop, "50000"], item="big one")]

        def parse(self, spec, result):
            return []

    job = AtomicJob.from_dict({"benchmark": "cmd", "measure": "instructions"})
    (instrument,) = job.instruments
    assert instrument == Valgrind("instructions")
    session, watch = Suite(name="suite", params={}), instrument.attach("cmd")
    try:
        got = {}
        specs = session.processes(0)
        watch.begin(specs)
        for spec in specs:
            ran, wrapper = watch.wrap(spec)
            result = execute(ran, wrapper=wrapper)
            assert watch.judge(ran, result) is None and session.judge(spec, result) is None
            if spec.record:
                got.update({s.metric: s.value for s in [*session.parse(spec, result), *watch.samples(ran, result)]})
            else:
                assert wrapper == [] and ran.argv == ["/bin/true"]          # helpers run natively
        assert watch.params == {"measure": "instructions"}
    finally:
        watch.close()
    small, big = got["valgrind.instructions.small"], got["valgrind.instructions.big_one"]
    assert big > small > 0 and got["valgrind.instructions"] == small + big

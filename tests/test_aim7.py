"""The aim7 family: the C program runs every task and cleans up after itself; through the CLI
a mix stores jobs-per-min and real/user/sys time with sane magnitudes; every task runs on the
runner; a load sweep stores one run per load; an unknown task is refused before anything
runs; the shipped job file expands LKP-style and runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from conftest import assert_one_line_error
from perflab import jobs
from perflab.core import cbuild
from perflab.benchmarks.aim7 import FAMILY, Aim7Params, tasks as tk
from perflab.benchmarks.base import JobError, validate_params

TINY = ("--file-size", "8K", "--pool-size", "0", "--scale", "0.02")
ALL_TASKS = ",".join(f"{t}:1" for t in tk.TASKS)


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    with pytest.MonkeyPatch.context() as env:
        env.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("aim7-cbuild")))
        return (cbuild.build(tk.PROGRAM, tk.SOURCE_DIR, flags=tk.BUILD_FLAGS),
                cbuild.build(tk.HELPER, tk.SOURCE_DIR, flags=tk.BUILD_FLAGS))


def run_program(programs, cwd, *args, check=True):
    program, helper = programs
    proc = subprocess.run([str(program), *args, "-e", str(helper)], cwd=cwd, capture_output=True, text=True,
                          timeout=60)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def result(stdout: str) -> dict:
    """The program's metric lines by name without "aim7." (aim7.user_real_s, printed once per user: a list)."""
    doc: dict = {"user_real_s": []}
    for line in stdout.splitlines():
        figure = json.loads(line)
        name = figure["metric"].removeprefix("aim7.")
        if name == "user_real_s":
            doc[name].append(figure["value"])
        else:
            doc[name] = figure["value"]
    return doc


def samples(cli) -> dict[int, dict[str, list[float]]]:
    out: dict[int, dict[str, list[float]]] = {}
    for rid, metric, value in cli.sql("SELECT run_id, metric, value FROM sample ORDER BY id"):
        out.setdefault(rid, {}).setdefault(metric, []).append(value)
    return out


# ---- the C program ------------------------------------------------------------------------------

def test_every_task_runs_for_every_user_and_leaves_no_file(programs, tmp_path):
    proc = run_program(programs, tmp_path, "-u", "3", "-t", ALL_TASKS, "-b", "8", "-S", "0.02")
    doc = result(proc.stdout)
    assert doc["users"] == 3 and doc["jobs"] == 3 * len(tk.TASKS) and doc["blocks"] == 8
    assert 0 < doc["real_s"] < 30 and len(doc["user_real_s"]) == 3
    assert all(0 < u <= doc["real_s"] for u in doc["user_real_s"])
    assert list(tmp_path.iterdir()) == []


def test_a_mix_of_counts_is_run_whole_by_every_user(programs, tmp_path):
    outs = [run_program(programs, tmp_path, "-u", "2", "-t", "fork_test:3,brk_test:3", "-b", "1", "-S", "0.01",
                        "-s", "7").stdout for _ in range(2)]
    assert all(result(o)["jobs"] == 12 for o in outs)


def test_a_failing_task_names_user_and_task_and_fails(programs, tmp_path):
    (tmp_path / "u0.disk_wrt.0").mkdir()      # user 0's first file name is taken by a directory
    proc = run_program(programs, tmp_path, "-u", "2", "-t", "disk_wrt:1", "-b", "4", check=False)
    assert proc.returncode == 1 and proc.stdout == ""
    assert "aim7: user 0: disk_wrt: create" in proc.stderr
    assert not (tmp_path / "aim7.source").exists()


def test_bad_options_exit_2_with_one_line(programs, tmp_path):
    for args in (["-u", "2", "-t", "nosuch:1", "-b", "4"], ["-u", "0", "-t", "disk_rr:1", "-b", "4"],
                 ["-u", "1", "-t", "disk_rr", "-b", "4"], ["-u", "1", "-t", "disk_rr:1"]):
        proc = run_program(programs, tmp_path, *args, check=False)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, (args, proc.stderr)
    assert "valid: disk_wrt" in run_program(programs, tmp_path, "-u", "1", "-t", "x:1", "-b", "1", check=False).stderr


# ---- the workfile ---------------------------------------------------------------------------------

def test_workfiles_and_jobs_per_user():
    assert tk.per_user("disk_rr", None) == {"disk_rr": 10}          # LKP's "10 <task>"
    assert tk.per_user("default", None) == tk.per_user("mixed", None) == {t: 1 for t in tk.TASKS}
    shared = tk.per_user("mixed", 20)
    assert sum(shared.values()) == 20 and set(shared.values()) <= {1, 2}
    assert tk.per_user("fork_test", 3) == {"fork_test": 3}
    assert Aim7Params(test="default").test == "mixed"
    p = Aim7Params(test="disk_rr", load=4, file_size="1M", pool_size="10M")
    assert p.blocks() == 1024 + 10240 // 4                          # FILESIZE + POOLSIZE / users


@pytest.mark.parametrize("raw, needles", [
    ({"file_size": "12Q"}, ("file_size", "12Q")),
    ({"file_size": "0", "pool_size": "0"}, ("no 1 KiB block",)),
    ({"scale": 0}, ("scale",)),
    ({"jobs": 0}, ("jobs",)),
    ({"load": "abc"}, ("load", "abc")),
    ({"tests": "disk_rr"}, ("unknown parameter 'tests'", "valid:")),
])
def test_bad_parameters_name_the_key(raw, needles):
    with pytest.raises(JobError) as e:
        validate_params(FAMILY, raw)
    for n in needles:
        assert n in str(e.value)


# ---- on the runner, through the CLI ----------------------------------------------------------

def test_a_mix_through_the_cli_stores_sane_metrics(cli):
    cli("run", "aim7", "--test", "mixed", "--load", "2", *TINY, "--runs", "2", "--tag", "t")
    (run,) = cli.sql("SELECT id, status, params FROM run")
    assert run[1] == "finished"
    params = json.loads(run[2])
    assert params["test"] == "mixed" and params["load"] == 2 and "dir" not in params
    m = samples(cli)[run[0]]
    assert set(m) == {"aim7.jobs-per-min", "aim7.time.elapsed_time", "aim7.time.user_time", "aim7.time.system_time"}
    assert all(len(v) == 2 for v in m.values())
    for jpm, real in zip(m["aim7.jobs-per-min"], m["aim7.time.elapsed_time"]):
        assert 0 < real < 60
        assert jpm * real / 60 == pytest.approx(2 * len(tk.TASKS))    # jobs = users x the workfile
    assert all(0 <= v < 60 for v in m["aim7.time.user_time"] + m["aim7.time.system_time"])
    # exec_test and fork_test ran in grandchildren: the tree's CPU time is not nothing
    assert all(u + s > 0 for u, s in zip(m["aim7.time.user_time"], m["aim7.time.system_time"]))
    facts = json.loads(cli.sql("SELECT e.facts FROM environment e JOIN run r ON r.environment_id = e.id")[0][0])
    assert facts["aim7_blocks"] == 8 and facts["workdir_fs"]


def test_every_task_runs_on_the_runner(cli):
    args = [a for t in tk.TASKS for a in ("--test", t)]
    cli("run", "aim7", *args, "--load", "1", "--jobs", "1", *TINY)
    rows = cli.sql("SELECT id, status, params FROM run")
    assert sorted(json.loads(p)["test"] for _, _, p in rows) == sorted(tk.TASKS)
    assert all(status == "finished" for _, status, _ in rows)
    by_run = samples(cli)
    for rid, _, _ in rows:
        assert by_run[rid]["aim7.jobs-per-min"][0] > 0


def test_a_load_sweep_stores_one_run_per_load(cli):
    cli("run", "aim7", "--test", "fork_test", "--load", "1", "--load", "3", "--load", "5",
        "--scale", "0.02", "--jobs", "2")
    rows = cli.sql("SELECT id, params FROM run ORDER BY id")
    assert [json.loads(p)["load"] for _, p in rows] == [1, 3, 5]
    by_run = samples(cli)
    for (rid, p), users in zip(rows, (1, 3, 5)):
        jpm, real = by_run[rid]["aim7.jobs-per-min"][0], by_run[rid]["aim7.time.elapsed_time"][0]
        assert jpm * real / 60 == pytest.approx(users * 2)


@pytest.mark.parametrize("args, needles", [
    (("--test", "disk_bogus"), ("test", "disk_bogus", "valid tasks: disk_wrt", "creat-clo", "mixes: mixed")),
    (("--load", "0"), ("load",)),
])
def test_bad_parameters_are_refused_before_anything_runs(cli, args, needles):
    proc = cli("run", "aim7", *args, check=False)
    assert_one_line_error(proc, *needles)
    assert not os.path.exists(cli.db) or cli.sql("SELECT count(*) FROM run") == [(0,)]


def test_an_unknown_task_in_a_job_file_names_the_line(cli, tmp_path):
    path = tmp_path / "a.yaml"
    path.write_text("benchmark: aim7\ntest: [disk_rr, disk_nope]\nload: 1\n")
    proc = cli("run", path, check=False)
    assert_one_line_error(proc, "disk_nope", "a.yaml:2")
    assert not os.path.exists(cli.db) or cli.sql("SELECT count(*) FROM run") == [(0,)]


def test_files_that_cannot_fit_are_refused_before_anything_runs(cli, tmp_path):
    proc = cli("run", "aim7", "--test", "disk_wrt", "--load", "100", "--file-size", "1000G", "--dir", tmp_path,
               check=False)
    assert_one_line_error(proc, "load = 100", "free")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("perflab-aim7")] == []


def test_the_shipped_job_file_is_lkp_shaped_and_runs(cli, tmp_path):
    atomic = jobs.load(jobs.SHIPPED_DIR / "aim7.yaml")
    assert {j["params"]["fs"] for j in atomic} == {"xfs"}
    assert {"disk_rr", "disk_wrt", "sync_disk_rw", "creat-clo"} <= {j["params"]["test"] for j in atomic}
    cli("run", "aim7.yaml", "--set", "fs=null", "--set", f"dir={tmp_path}", "--set", "test=creat-clo",
        "--set", "load=[1, 2]", "--set", "runs=1", "--set", "scale=0.02", "--set", "file_size=8K",
        "--set", "pool_size=0")
    assert [s for (s,) in cli.sql("SELECT status FROM run")] == ["finished", "finished"]


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("mkfs.xfs") or not os.path.exists("/dev/loop-control"),
                    reason="needs root, mkfs.xfs and loop devices to make an xfs for the run")
def test_disk_tasks_on_a_fresh_xfs(cli):
    cli("run", "aim7", "--fs", "xfs", "--fs-size", "300M", "--test", "disk", "--load", "2", *TINY)
    (status,) = cli.sql("SELECT status FROM run")[0]
    facts = json.loads(cli.sql("SELECT e.facts FROM environment e JOIN run r ON r.environment_id = e.id")[0][0])
    assert status == "finished" and facts["workdir_fs"] == "xfs"


def test_a_hung_load_point_is_killed_with_its_users_and_the_sweep_goes_on(cli):
    # The timeout is both points': the normal one (~0.05 s) beats it on a busy machine too,
    # the hung one (a million jobs per user) never does.
    proc = cli("run", "aim7", "--test", "fork_test", "--load", "3", "--jobs", "1000000", "--jobs", "1",
               "--scale", "0.02", "--timeout", "3", check=False)
    assert proc.returncode == 1 and "timed out" in proc.stderr
    assert [s for (s,) in cli.sql("SELECT status FROM run ORDER BY id")] == ["failed", "finished"]
    cache = os.path.realpath(cli.env["XDG_CACHE_HOME"])
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            continue
        if exe.startswith(cache) and os.path.basename(exe).startswith("aim7-"):
            left.append(pid)
    assert left == []                   # no user (nor child of one) outlives the timeout

"""Job files (LKP style), the family registry, and the will-it-scale family on the runner."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import yaml

from conftest import assert_one_line_error
from perflab import benchmarks, jobs
from perflab.benchmarks.base import JobError

CPUS = len(os.sched_getaffinity(0))


def write(tmp_path, text: str, name: str = "job.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


# ---- expansion ----------------------------------------------------------------

def test_a_matrix_expands_to_the_cartesian_product(tmp_path):
    path = write(tmp_path, """\
        benchmark: will-it-scale
        runs: 2
        test: [page_fault1, brk1]
        mode: [process, thread]
        nr_task: [1, 3]
        duration: 0.5
    """)
    atomic = jobs.load(path)
    assert len(atomic) == 8
    assert {(j["params"]["test"], j["params"]["mode"], j["params"]["nr_task"]) for j in atomic} == {
        (t, m, n) for t in ("page_fault1", "brk1") for m in ("process", "thread") for n in (1, 3)}
    assert all(j["runs"] == 2 and j["benchmark"] == "will-it-scale" for j in atomic)
    # an atomic job is plain JSON, and expands to exactly itself again
    for j in atomic:
        assert json.loads(json.dumps(j)) == j
        assert jobs.expand(yaml.safe_load(jobs.to_yaml(j))) == [j]


def test_percent_of_cpus_and_points_that_resolve_alike(tmp_path):
    fam = benchmarks.family("will-it-scale")
    assert fam.parse_params({"test": "brk1", "nr_task": "100%"}).nr_task == CPUS
    assert fam.parse_params({"test": "brk1", "nr_task": "1%"}).nr_task == 1
    path = write(tmp_path, "benchmark: will-it-scale\ntest: brk1\nnr_task: [1, 1%, 100%]\n")
    expected = 1 if CPUS == 1 else 2
    assert len(jobs.load(path)) == expected


def test_nested_params_and_overrides(tmp_path):
    path = write(tmp_path, """\
        benchmark: will-it-scale
        will-it-scale:
          test: brk1
          mode: thread
    """)
    (job,) = jobs.load(path, ["duration=2", "runs=4"])
    assert job["params"] == {"test": "brk1", "mode": "thread", "duration": 2} and job["runs"] == 4
    assert len(jobs.load(path, ["mode=[process, thread]"])) == 2


def test_list_valued_parameters_are_values_not_axes(tmp_path):
    path = write(tmp_path, "benchmark: lmbench\nonly: [ctx, memory]\n")
    (job,) = jobs.load(path)
    assert job["params"]["only"] == ["ctx", "memory"]
    path = write(tmp_path, "benchmark: lmbench\nonly: [[ctx], [memory]]\n", "axis.yaml")
    assert [j["params"]["only"] for j in jobs.load(path)] == [["ctx"], ["memory"]]
    path = write(tmp_path, "benchmark: cmd\ncommand: ['true', 'sleep 0.01']\n", "cmd.yaml")
    assert [j["params"]["command"] for j in jobs.load(path)] == ["true", "sleep 0.01"]


def test_the_seed_job_file_reproduces_the_reports_table():
    (seed,) = [p for p in jobs.shipped() if p.name == "will-it-scale-seed.yaml"]
    atomic = jobs.load(seed)
    tests = {"page_fault1", "page_fault2", "page_fault3", "brk1", "context_switch1", "malloc1", "read1",
             "read2", "signal1", "writeseek3"}
    assert {(j["params"]["test"], j["params"]["mode"], j["params"]["thp"]) for j in atomic} == {
        (t, m, thp) for t in tests for m in ("process", "thread") for thp in ("always", "never")}
    assert all(j["params"]["nr_task"] == "100%" for j in atomic)


def test_every_family_has_a_shipped_job_file():
    names = {jobs.load(p)[0]["benchmark"] for p in jobs.shipped()}
    assert names == set(benchmarks.FAMILIES)


@pytest.mark.parametrize("text, needles", [
    ("benchmark: will-it-scale\ntest: nosuch\n", ["job.yaml:2", "test", "nosuch", "page_fault1"]),
    ("benchmark: will-it-scale\ntest: brk1\nnr_task: 0\n", ["job.yaml", "nr_task", "between 1"]),
    ("benchmark: will-it-scale\ntest: brk1\nduration: -1\n", ["duration", "positive"]),
    ("benchmark: will-it-scale\ntest: brk1\nthp: sometimes\n", ["thp", "'always'", "'never'"]),
    ("benchmark: will-it-scale\ntest: brk1\nbogus: 1\n", ["job.yaml:3", "'bogus'", "valid:", "nr_task"]),
    ("benchmark: nosuch\n", ["job.yaml:1", "nosuch", "will-it-scale", "lmbench", "cmd"]),
    ("runs: 3\n", ["benchmark", "missing"]),
    ("benchmark: cmd\ncommand: true\nruns: 0\n", ["job.yaml:3", "runs", "integer >= 1"]),
    ("benchmark: cmd\ncommand: true\ntimeout: .nan\n", ["timeout"]),
    ("benchmark: cmd\ncommand: [true\n", ["job.yaml", "not valid YAML"]),
    ("benchmark: will-it-scale\ntest: []\n", ["job.yaml:2", "empty list"]),
    ("- a\n- b\n", ["a mapping"]),
])
def test_bad_job_files_name_file_line_and_key(tmp_path, text, needles):
    path = write(tmp_path, text)
    with pytest.raises(JobError) as e:
        jobs.load(path)
    message = str(e.value)
    assert "\n" not in message
    for n in needles:
        assert n in message, (n, message)


def test_bad_job_file_on_the_cli_writes_nothing(cli, tmp_path):
    path = write(tmp_path, "benchmark: will-it-scale\ntest: [brk1, nosuch]\n")
    assert_one_line_error(cli("run", path, check=False), "nosuch")
    assert not cli.db.exists()


# ---- the registry and the CLI -----------------------------------------------------

def test_run_lists_the_families_and_each_has_help(cli):
    out = cli("run", "--help").stdout
    for name in benchmarks.FAMILIES:
        assert name in out
        assert "Example" in cli("run", name, "--help").stdout


def test_jobs_list_split_run_and_rerun(cli, tmp_path):
    listing = cli("jobs", "list").stdout
    assert "will-it-scale-seed.yaml" in listing and "40 atomic jobs" in listing
    out = tmp_path / "atomic"
    files = cli("jobs", "split", "will-it-scale-scaling.yaml", "-o", out, "--set", "test=getppid1").stdout.split()
    assert len(files) == len(jobs.load(jobs.SHIPPED_DIR / "will-it-scale-scaling.yaml"))
    assert all(os.path.basename(f).startswith("will-it-scale-") for f in files)
    one = sorted(files)[0]
    cli("run", one, "--set", "duration=0.3", "--set", "warmup_time=0", "--set", "runs=2", "--tag", "split")
    (run_id, job, params) = cli.sql("SELECT id, job, params FROM run")[0]
    job = json.loads(job)
    assert job["benchmark"] == "will-it-scale" and job["runs"] == 2 and job["tag"] == "split"
    cli("rerun", str(run_id), "--tag", "again")
    rows = cli.sql("SELECT tag, status, params FROM run ORDER BY id")
    assert [r[:2] for r in rows] == [("split", "finished"), ("again", "finished")] and rows[0][2] == rows[1][2]


# ---- will-it-scale on the runner ----------------------------------------------------

def test_will_it_scale_without_an_nr_task_sweep_ends_without_importing_numpy():
    """The scalability figure needs a sweep; four testcases at one nr_task (issue 47's guest
    command) computed nothing, but imported numpy after the last job: 0.1-0.3 s of CPU at the
    end of the command (docs/vm.md). A fresh interpreter: the family's after_jobs on two runs
    of two testcases, then the same with a sweep, which imports it and adds the figure."""
    code = textwrap.dedent("""
        import sys
        from types import SimpleNamespace as NS
        from perflab.benchmarks.will_it_scale.family import WillItScaleFamily, WORKLOAD
        def run(test, tasks, ops):
            return NS(session=NS(params={"test": test, "nr_task": tasks}), values={WORKLOAD: [ops, ops]})
        added = []
        family = WillItScaleFamily()
        family.after_jobs([run("getppid1", 1, 3e6), run("brk1", 1, 1.6e5)], lambda *a: added.append(a))
        print("numpy" in sys.modules, len(added))
        family.after_jobs([run("getppid1", 1, 3e6), run("getppid1", 2, 5.4e6)], lambda *a: added.append(a))
        print("numpy" in sys.modules, len(added))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[:2] == ["False 0", "True 4"], out


def test_will_it_scale_sweep_stores_lkp_metrics_scalability_and_facts(cli, system_thp):
    cli("run", "will-it-scale", "--test", "getppid1", "--mode", "process", "--mode", "thread",
        "--nr-task", "1", "--nr-task", "2", "--duration", "0.3", "--warmup-time", "0", "--interval", "0.1",
        "--runs", "2", "--thp", "never", "--tag", "t")
    rows = cli.sql("SELECT r.id, r.params, s.metric, s.value, s.unit FROM run r JOIN sample s ON s.run_id = r.id")
    by_run: dict = {}
    for rid, params, metric, v, unit in rows:
        p = json.loads(params)
        by_run.setdefault((p["mode"], p["nr_task"]), {}).setdefault(metric, []).append(v)
    assert set(by_run) == {("process", 1), ("process", 2), ("thread", 1), ("thread", 2)}
    for (mode, tasks), metrics in by_run.items():
        per_task = metrics[f"will-it-scale.per_{mode}_ops"]
        assert len(per_task) == 2 and all(v > 0 for v in per_task)
        assert all(abs(w - p * tasks) < 1e-6 * w for w, p in zip(metrics["will-it-scale.workload"], per_task))
        assert len(metrics["will-it-scale.scalability"]) == 2 and all(v > 0 for v in metrics["will-it-scale.scalability"])
    facts = json.loads(cli.sql("SELECT e.facts FROM environment e JOIN run r ON r.environment_id = e.id")[0][0])
    assert facts["benchmark_aslr"].startswith("off") and "bound" in facts["placement"]
    assert "never" in facts["thp_in_effect"]


def test_report_scaling_and_lkp_compare_shape(cli, tmp_path):
    for tag in ("base", "head"):
        cli("run", "will-it-scale", "--test", "getppid1", "--test", "brk1", "--nr-task", "1", "--nr-task", "2",
            "--duration", "0.2", "--warmup-time", "0", "--interval", "0.1", "--runs", "2", "--tag", tag)
    out = cli("report", "scaling", "base", "--plot", tmp_path / "s.png").stdout
    assert "getppid1" in out and "brk1" in out and "linear" in out
    assert (tmp_path / "s.png").read_bytes()[:4] == b"\x89PNG"
    lkp = cli("compare", "base", "head").stdout
    lines = [l for l in lkp.splitlines() if "will-it-scale.per_process_ops" in l]
    assert len(lines) == 4 and all(l.split()[0] in ("test=getppid1", "test=brk1") for l in lines)
    assert all(l.split()[1] in ("nr_task=1", "nr_task=2") for l in lines)


def test_a_hung_testcase_is_killed_and_the_matrix_goes_on(cli):
    # duration far beyond the timeout: the harness is killed with its tasks, the next job runs.
    # The timeout is both jobs': the 0.2 s one (0.3 s with the harness's start on a busy
    # machine) must beat it too.
    proc = cli("run", "will-it-scale", "--test", "getppid1", "--nr-task", "1", "--duration", "60", "--duration", "0.2",
               "--warmup-time", "0", "--runs", "1", "--timeout", "5", check=False)
    assert proc.returncode == 1 and "timed out" in proc.stderr
    assert [s for (s,) in cli.sql("SELECT status FROM run ORDER BY id")] == ["failed", "finished"]


# ---- the typed atomic job ---------------------------------------------------------

# Job dicts as runs stored them before AtomicJob existed (and as exports of those runs carry them):
# `perflab run cmd` (params second), a job file's point (params last), a lab worker's job with its
# source and lab keys, bisect's command job, and a minimal old one without most keys.
OLD_JOBS = [
    {"benchmark": "cmd", "params": {"argv": ["true"], "shell": False, "prepare": "true", "ignore_failure": False,
                                    "metrics": []},
     "runs": 2, "warmup": 0, "timeout": None, "tag": "j", "comment": None, "monitors": {}},
    {"benchmark": "will-it-scale", "runs": 5, "warmup": 0, "timeout": 300, "tag": None, "comment": None,
     "monitors": {"proc-vmstat": {"interval": 1.0}}, "params": {"test": "page_fault2", "mode": "thread",
                                                              "nr_task": "50%"}},
    {"benchmark": "cmd", "params": {"argv": ["./prog"]}, "runs": 3, "warmup": 0, "timeout": None, "tag": "v1",
     "comment": "perflab bisect 4: step abc", "monitors": {},
     "source": {"repo": "https://example.org/r.git", "commit": "ab" * 20, "build": "make", "build_timeout": 600.0},
     "lab": {"submission": "s1", "task": "t1", "attempt": 1, "worker": "w"}},
    {"benchmark": "cmd", "runs": 2},
]


@pytest.mark.parametrize("old", OLD_JOBS)
def test_an_atomic_job_reads_and_writes_the_stored_json_exactly(old):
    job = jobs.AtomicJob.from_dict(old)
    assert json.dumps(job.to_dict()) == json.dumps(old)
    assert jobs.AtomicJob.from_dict(job.to_dict()) == job
    # A key set later (rerun --tag, the runner's default runs) is written as adding it to the dict was.
    assert json.dumps(job.with_(tag="new").to_dict()) == json.dumps({**old, "tag": "new"})


def test_the_stored_job_of_an_old_export_reruns(cli, tmp_path):
    from test_regression_report import JOB

    doc = {"format": "perflab-export", "version": 2, "runs": [
        {"uuid": "00000000-0000-4000-8000-000000000002", "testbox": "box", "benchmark": "cmd", "name": "true",
         "params": {}, "tag": "old", "commit": None, "dirty": None, "started": "2026-11-01T10:00:00",
         "finished": "2026-11-01T10:00:01", "status": "finished", "comment": None, "error": None,
         "environment": {"testbox": "box"}, "failures": [], "job": OLD_JOBS[0], "samples": []}]}
    (tmp_path / "old.json").write_text(json.dumps(doc))
    cli("import", tmp_path / "old.json")
    # An imported host command runs only when trusted (issue 45, R6; tests/test_trust.py).
    cli("rerun", "1", "--tag", "again", "--trust")
    stored = [json.loads(j) for (j,) in cli.sql("SELECT job FROM run ORDER BY id")]
    assert stored == [OLD_JOBS[0], {**OLD_JOBS[0], "tag": "again"}]
    assert jobs.AtomicJob.from_dict(JOB).to_dict() == JOB


def test_jobs_are_validated_once_where_they_are_built(tmp_path, monkeypatch):
    family = benchmarks.family("cmd")
    seen = []
    real = type(family).parse_params
    monkeypatch.setattr(type(family), "parse_params", lambda self, raw, where="": seen.append(raw) or real(self, raw, where))
    path = tmp_path / "j.yaml"
    path.write_text("benchmark: cmd\ncommand: [true, 'sleep 0']\n")
    atomic = jobs.load_atomic(path)
    assert len(seen) == 2 and all(j.resolved and j.family is family for j in atomic)
    assert jobs.resolve(atomic[0]) is atomic[0] and len(seen) == 2
    assert [j.to_dict() for j in atomic] == jobs.load(path)
    with pytest.raises(JobError, match="unknown parameter 'nope' for cmd"):
        jobs.resolve({"benchmark": "cmd", "params": {"nope": 1}})

"""`perflab run cmd`: what is measured and stored, end to end."""

import json
import subprocess

from conftest import assert_one_line_error


def samples(cli, run_id):
    return cli.sql("SELECT metric, value, unit, direction, repetition FROM sample WHERE run_id=? ORDER BY repetition, metric", (run_id,))


def test_records_every_run(cli):
    out = cli("run", "cmd", "--runs", "4", "--tag", "base", "--", "sleep", "0.02").stdout
    assert "run #1: sleep 0.02" in out and "4 runs" in out
    (run,) = cli.sql("SELECT id, benchmark, name, tag, status, finished IS NOT NULL FROM run")
    assert run == (1, "cmd", "sleep 0.02", "base", "finished", 1)
    rows = samples(cli, 1)
    by_metric = {}
    for metric, value, unit, direction, rep in rows:
        by_metric.setdefault(metric, []).append((value, unit, direction, rep))
    assert set(by_metric) == {"time.elapsed_time", "time.user_time", "time.system_time",
                              "time.maximum_resident_set_size", "time.exit_status"}
    walls = by_metric["time.elapsed_time"]
    assert [w[3] for w in walls] == [0, 1, 2, 3]
    # Never shorter than the sleep; the upper bound is far beyond what load adds to a 20 ms sleep and
    # still catches a measurement in the wrong unit (ms stored as s reads 20).
    assert all(0.02 <= v < 5.0 and unit == "s" and d == -1 for v, unit, d, _ in walls)
    assert all(0 <= v < 0.1 for v, *_ in by_metric["time.user_time"])
    assert all(v > 100 and unit == "KiB" for v, unit, *_ in by_metric["time.maximum_resident_set_size"])
    assert all(v == 0 and d == 0 for v, _, d, _ in by_metric["time.exit_status"])


def test_user_time_of_a_cpu_bound_command(cli):
    # 200,000 turns of the loop: about 0.1 s of user time, far above the 5 ms asked below (30,000 turns,
    # about 10 ms, was read as under 5 ms once in a loaded run: the kernel splits a process's CPU into
    # user and system by ticks it sampled).
    cli("run", "cmd", "--runs", "2", "--shell", "--", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done")
    users = [v for m, v, *_ in samples(cli, 1) if m == "time.user_time"]
    walls = [v for m, v, *_ in samples(cli, 1) if m == "time.elapsed_time"]
    assert all(u > 0.005 for u in users)
    assert all(u <= w * 1.05 + 0.01 for u, w in zip(users, walls))


def test_commands_run_interleaved(cli, tmp_path):
    trace = tmp_path / "trace"
    cli("run", "cmd", "--runs", "3", "--warmup", "1", "--shell",
        "--cmd", f"echo A >> {trace}", "--cmd", f"echo B >> {trace}")
    runs = trace.read_text().split()   # warmup round + 3 timed rounds, each in a random order (RMIT)
    assert [sorted(runs[i:i + 2]) for i in range(0, 8, 2)] == [["A", "B"]] * 4
    assert [r[0] for r in cli.sql("SELECT name FROM run ORDER BY id")] == [f"echo A >> {trace}", f"echo B >> {trace}"]


def test_dash_dash_separated_commands(cli):
    # Half a second apart: load delays the start of `true` by milliseconds, never by that much.
    out = cli("run", "cmd", "--runs", "2", "--", "true", "--", "sleep", "0.5").stdout
    assert "Fastest: true" in out
    assert cli.sql("SELECT name FROM run ORDER BY id") == [("true",), ("sleep 0.5",)]


def test_prepare_runs_before_every_run(cli, tmp_path):
    counter = tmp_path / "prep"
    cli("run", "cmd", "--runs", "3", "--prepare", f"echo x >> {counter}", "--", "true")
    assert counter.read_text().count("x") == 3


def test_metric_regex_and_json(cli):
    cli("run", "cmd", "--runs", "3", "--shell",
        "--metric", r"ops=throughput: (\d+\.?\d*) ops/s", "--unit", "ops=ops/s", "--higher-is-better", "ops",
        "--metric", "lat=json:$.result.lat[1]", "--unit", "lat=us",
        "--", """echo 'throughput: 1234.5 ops/s'; echo '{"result": {"lat": [1, 2.5]}}'""")
    rows = samples(cli, 1)
    ops = [(v, u, d) for m, v, u, d, _ in rows if m == "ops"]
    lat = [(v, u, d) for m, v, u, d, _ in rows if m == "lat"]
    assert ops == [(1234.5, "ops/s", 1)] * 3
    assert lat == [(2.5, "us", -1)] * 3


def test_metric_that_matches_nothing_writes_nothing(cli):
    proc = cli("run", "cmd", "--runs", "3", "--metric", r"ops=(\d+) ops", "--", "echo", "hello", check=False)
    assert_one_line_error(proc, "ops", "matched nothing")
    assert cli.sql("SELECT count(*) FROM run") == [(0,)]
    assert cli.sql("SELECT count(*) FROM sample") == [(0,)]


def test_metric_that_is_not_a_number(cli):
    proc = cli("run", "cmd", "--runs", "1", "--metric", r"ops=speed: (\S+)", "--", "echo", "speed: fast", check=False)
    assert_one_line_error(proc, "ops", "'fast'", "not a number")
    assert cli.sql("SELECT count(*) FROM run") == [(0,)]


def test_bad_metric_specs(cli):
    assert_one_line_error(cli("run", "cmd", "--metric", "ops=(", "--", "true", check=False), "invalid regex")
    assert_one_line_error(cli("run", "cmd", "--metric", "novalue", "--", "true", check=False), "NAME=REGEX")
    assert_one_line_error(cli("run", "cmd", "--metric", "x=json:$.a..b", "--", "true", check=False), "JSON path")
    assert_one_line_error(cli("run", "cmd", "--unit", "y=s", "--", "true", check=False), "'y'")


def test_missing_executable(cli):
    proc = cli("run", "cmd", "--", "no-such-program-xyz", "--flag", check=False)
    assert_one_line_error(proc, "no-such-program-xyz", "not found")
    # Checked before the store is even opened: nothing written at all.
    assert not cli.db.exists()


def test_no_command(cli):
    assert_one_line_error(cli("run", "cmd", "--runs", "2", check=False), "no command")


def test_failing_command_is_recorded_as_failed_run(cli):
    proc = cli("run", "cmd", "--runs", "5", "--shell", "--", "echo oops-on-stderr >&2; exit 3", check=False)
    assert_one_line_error(proc, "exited with status 3", "oops-on-stderr")
    (run,) = cli.sql("SELECT status, error FROM run")
    assert run[0] == "failed" and "oops-on-stderr" in run[1]
    # The failed repetition is kept with its exit status; the run stopped there.
    assert cli.sql("SELECT value FROM sample WHERE metric='time.exit_status'") == [(3.0,)]


def test_ignore_failure_keeps_going(cli):
    cli("run", "cmd", "--runs", "3", "--ignore-failure", "--", "false")
    assert cli.sql("SELECT status FROM run") == [("finished",)]
    assert cli.sql("SELECT value FROM sample WHERE metric='time.exit_status'") == [(1.0,)] * 3


def test_timeout_kills_and_fails(cli):
    proc = cli("run", "cmd", "--runs", "2", "--timeout", "0.3", "--", "sleep", "60", check=False)
    assert_one_line_error(proc, "timed out")
    wall, code = cli.sql("SELECT (SELECT value FROM sample WHERE metric='time.elapsed_time'), (SELECT value FROM sample WHERE metric='time.exit_status')")[0]
    # SIGTERM first (the command may clean up), SIGKILL only after the grace period: the status says
    # which signal ended it. Killed at the timeout, long before the sleep's own end, however loaded.
    assert 0.25 < wall < 30 and code == 128 + 15
    assert cli.sql("SELECT status FROM run") == [("failed",)]


def test_repo_commit_and_dirty_flag(cli, tmp_path):
    repo = tmp_path / "sut"
    repo.mkdir()
    git = lambda *a: subprocess.run(["git", "-C", repo, *a], check=True, capture_output=True, text=True).stdout.strip()
    git("init", "-q")
    (repo / "f.c").write_text("int main(){return 0;}\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    head = git("rev-parse", "HEAD")
    cli("run", "cmd", "--runs", "1", "--repo", repo, "--", "true")
    (repo / "f.c").write_text("int main(){return 1;}\n")
    cli("run", "cmd", "--runs", "1", "--repo", repo, "--", "true")
    assert cli.sql("SELECT \"commit\", dirty FROM run ORDER BY id") == [(head, 0), (head, 1)]
    log = cli("log").stdout
    assert head[:12] + "+dirty" in log
    assert_one_line_error(cli("run", "cmd", "--repo", tmp_path / "nope", "--", "true", check=False), "nope")


def test_environment_is_recorded(cli):
    cli("run", "cmd", "--runs", "1", "--box", "box-7", "--", "true")
    (facts,) = cli.sql("SELECT facts FROM environment")
    facts = json.loads(facts[0])
    for key in ("testbox", "kernel_release", "kernel_version", "kernel_cmdline", "cpu_model", "cpu_cores",
                "cpu_threads", "memory_kib", "thp_enabled", "thp_defrag", "cpufreq_governor", "aslr",
                "cc", "cc_version", "libc", "loadavg_start"):
        assert key in facts, key
    assert facts["testbox"] == "box-7"
    assert cli.sql("SELECT name FROM testbox") == [("box-7",)]
    assert facts["cpu_threads"] >= 1 and facts["memory_kib"] > 0


def _under_a_terminal(cli, *args):
    """Run perflab under a pseudo-terminal (util-linux `script`), as a person would."""
    import shlex
    import shutil

    from conftest import PERFLAB

    if not shutil.which("script"):
        import pytest
        pytest.skip("util-linux script is not installed")
    line = shlex.join([PERFLAB, *map(str, args)])
    return subprocess.run(["script", "-qec", line, "/dev/null"], capture_output=True, text=True,
                          env=cli.env, cwd=cli.tmp, timeout=60)


def _bar_output(tmp_path, monkeypatch, runs: int, seconds_each: float) -> str:
    """What the loop draws on a terminal for `runs` repetitions of `seconds_each`, on a clock the
    repetitions move (not the machine's: how loaded it is cannot make a short invocation long)."""
    import io
    from types import SimpleNamespace

    from rich.console import Console

    from perflab.runner import loop, progress, recorder
    from perflab.store import open_store
    from test_runner_fast import FakeFamily, job, result

    clock = SimpleNamespace(now=1000.0)
    monkeypatch.setattr(progress, "time", SimpleNamespace(monotonic=lambda: clock.now))
    monkeypatch.setattr(recorder.environment, "capture", lambda box=None, cc=None: {"testbox": "bar"})

    def executor(spec, hooks=None):
        clock.now += seconds_each
        return result(seconds_each)

    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=120)
    store = open_store(str(tmp_path / f"bar-{runs}.db"))
    loop.run_jobs(store, [job(FakeFamily(), runs=runs)], executor=executor, console=console)
    return screen.getvalue()


def test_progress_bar_with_eta_for_runs_longer_than_a_second(cli, tmp_path, monkeypatch):
    # For real, under a terminal: six 0.25 s sleeps end the 4th at least 1 s after the start, with
    # two to go, so the bar shows however slow the machine is.
    long = _under_a_terminal(cli, "run", "cmd", "--runs", "6", "--", "sleep", "0.25")
    assert long.returncode == 0, long.stdout
    assert "ETA" in long.stdout and "sleep 0.25" in long.stdout and "%" in long.stdout
    # A short invocation sees none. Three runs of `true` are short only on an idle machine (setting up
    # and three processes can take over a second under load), so the durations are scripted here.
    assert "ETA" in _bar_output(tmp_path, monkeypatch, 6, 0.25)      # the same as above, on the clock
    assert "ETA" not in _bar_output(tmp_path, monkeypatch, 3, 0.01)


def test_cpus_binds_the_command(cli, tmp_path):
    import os

    last = max(os.sched_getaffinity(0))
    cli("run", "cmd", "--runs", "2", "--cpus", str(last), "--shell",
        "--metric", r"cpu=Cpus_allowed_list:\s+(\d+)$", "--", "grep Cpus_allowed_list /proc/self/status")
    assert [v for m, v, *_ in samples(cli, 1) if m == "cpu"] == [last, last]
    (params,) = cli.sql("SELECT params FROM run WHERE id = 1")
    assert json.loads(params[0])["cpus"] == str(last)
    for bad, why in (("0-x", "expected a CPU list like 1 or 0,2-3"), ("4096", "CPU 4096 is not among"),
                     ("3-1", "runs backwards")):
        assert_one_line_error(cli("run", "cmd", "--cpus", bad, "--", "true", check=False), why)
    job = tmp_path / "pinned.yaml"
    job.write_text('benchmark: cmd\nargv: [/bin/true]\ncpus: "nope"\n')
    assert_one_line_error(cli("run", str(job), check=False), "pinned.yaml:", "cpus = 'nope'")

"""The one runner: its executor (the C launcher), interruption, failures, and what `run cmd` measures."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import assert_one_line_error
from services import until
from perflab.execution.executor import ProcessSpec, execute


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


# ---- the executor -------------------------------------------------------------

def test_executor_measures_the_command_alone():
    began = time.monotonic()
    r = execute(ProcessSpec(["/bin/true"]))
    outside = time.monotonic() - began
    assert r.ok and r.exit_status == 0
    # Spawned from Python, `true` inherited the interpreter's high-water mark (~50 MB).
    assert r.maxrss_kib < 8 * 1024
    # Its wall time lies within the call's (however slow the machine); its CPU time is its own,
    # not this interpreter's (seconds by now): a few milliseconds, busy machine or not.
    assert 0 < r.wall <= outside
    assert r.user + r.sys < 0.5


def test_max_rss_of_a_200_mb_allocation(tmp_path):
    src = tmp_path / "alloc.c"
    src.write_text(textwrap.dedent("""\
        #include <stdlib.h>
        #include <string.h>
        int main(void) { size_t n = 200u << 20; char *p = malloc(n); memset(p, 1, n); return p[n - 1] != 1; }
    """))
    subprocess.run([os.environ.get("CC", "cc"), "-O0", "-o", tmp_path / "alloc", src], check=True)
    r = execute(ProcessSpec([str(tmp_path / "alloc")]))
    assert r.ok
    assert abs(r.maxrss_kib - 200 * 1024) / (200 * 1024) < 0.05, r.maxrss_kib


def test_executor_returns_status_switches_and_output_tails():
    r = execute(ProcessSpec(["/bin/sh", "-c", "echo out; echo err >&2; sleep 0.01; exit 3"]))
    assert (r.exit_status, r.signal, r.timed_out, r.stdout, r.stderr_tail) == (3, 0, False, "out\n", "err\n")
    assert r.voluntary_switches >= 1 and r.describe_failure(None) == "exited with status 3: err"
    with pytest.raises(Exception, match="No such file"):
        execute(ProcessSpec(["/no/such/program"]))


def test_timeout_kills_the_group_grandchild_that_ignores_sigterm_too(tmp_path):
    pidfile = tmp_path / "pids"
    # The child ignores SIGTERM and leaves a grandchild that also ignores it, in the same group,
    # and an orphan that escaped into its own session.
    script = (f"trap '' TERM; (trap '' TERM; echo $(exec sh -c 'echo $PPID') >> {pidfile}; exec sleep 60) & "
              f"setsid sh -c 'echo $$ >> {pidfile}; exec sleep 60' & sleep 60")
    # The timeout leaves the shells time to start and write their pids on a busy machine
    # (0.5 s bet on a quick start); the sleeps (60 s) stay far beyond it.
    began = time.monotonic()
    r = execute(ProcessSpec(["/bin/sh", "-c", script], timeout=2.0), grace=0.5)
    assert r.timed_out and r.signal == signal.SIGKILL and r.exit_status == 137
    assert time.monotonic() - began < 30            # SIGKILL after the grace, not the sleeps' end
    pids = [int(p) for p in pidfile.read_text().split()]
    assert len(pids) == 2
    until("the sleeps killed", lambda: not any(_alive(p) for p in pids), 30, step=0.02)


def test_no_aslr_and_cpu_binding():
    r = execute(ProcessSpec(["/bin/cat", "/proc/self/personality"], no_aslr=True))
    assert int(r.stdout, 16) & 0x0040000
    r = execute(ProcessSpec(["/bin/sh", "-c", "grep Cpus_allowed_list /proc/self/status"], cpus="0"))
    assert r.stdout.split()[-1] == "0"


# ---- run cmd: what the issue-8 review found -------------------------------------

def test_run_cmd_records_the_commands_own_max_rss(cli):
    cli("run", "cmd", "--runs", "3", "--", "/bin/true")
    values = [v for (v,) in cli.sql("SELECT value FROM sample WHERE metric='time.maximum_resident_set_size'")]
    assert len(values) == 3 and all(v < 8 * 1024 for v in values)


def test_metric_names_may_not_collide(cli):
    proc = cli("run", "cmd", "--runs", "2", "--metric", r"time.elapsed_time=(\d+)", "--", "echo", "5", check=False)
    assert_one_line_error(proc, "time.elapsed_time", "records itself")
    proc = cli("run", "cmd", "--runs", "2", "--metric", r"x=(\d+)", "--metric", r"x=(\d+)", "--", "echo", "5", check=False)
    assert_one_line_error(proc, "'x'", "twice")
    assert not cli.db.exists()


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0"])
def test_non_finite_timeout_is_refused(cli, value):
    assert_one_line_error(cli("run", "cmd", "--timeout", value, "--", "true", check=False), "--timeout")
    assert not cli.db.exists()


def test_a_failing_warmup_fails_the_command(cli):
    proc = cli("run", "cmd", "--runs", "3", "--warmup", "1", "--", "false", check=False)
    assert_one_line_error(proc, "warm-up", "exited with status 1")
    assert cli.sql("SELECT status FROM run") == [("failed",)]
    assert cli.sql("SELECT count(*) FROM sample") == [(0,)]


def test_samples_record_repetition_and_process(cli):
    cli("run", "cmd", "--runs", "2", "--prepare", "true", "--", "true")
    rows = cli.sql("SELECT DISTINCT repetition, process FROM sample ORDER BY repetition")
    assert rows == [(0, 1), (1, 1)]   # process 0 of each repetition is the --prepare command


def _has_samples(db) -> bool:
    import sqlite3

    if not db.exists():
        return False
    try:
        con = sqlite3.connect(db, timeout=0.1)
        try:
            return con.execute("SELECT count(*) FROM sample").fetchone()[0] > 0
        finally:
            con.close()
    except sqlite3.Error:
        return False


def test_ctrl_c_during_fast_repetitions_is_always_clean(cli):
    """SIGINT at a random moment of `run cmd -- true`: always exit 130, the run interrupted, no lock.

    50 trials (the review saw 7 of 121 go wrong), two at a time, each on a copy of one migrated store.
    """
    import shutil
    import sqlite3
    from concurrent.futures import ThreadPoolExecutor

    from conftest import PERFLAB

    cli("runs")   # creates and migrates the template store
    trials = int(os.environ.get("PERFLAB_CTRL_C_TRIALS", "50"))

    def trial(i: int):
        db = cli.tmp / f"ctrl-c-{i}.db"
        shutil.copy(cli.db, db)
        env = dict(cli.env, PERFLAB_DB=str(db))
        proc = subprocess.Popen([PERFLAB, "run", "cmd", "--runs", "100000", "--", "true"], env=env, cwd=cli.tmp,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not _has_samples(db):
            time.sleep(0.005)
        time.sleep((i % 10) * 0.007)   # land at varying points of a repetition
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return (i, "hung")
        con = sqlite3.connect(db)
        status = con.execute("SELECT status FROM run").fetchall()
        con.close()
        if proc.returncode != 130 or status != [("interrupted",)] or "Traceback" in err or "error" in err:
            return (i, proc.returncode, status, err.strip())
        return None

    with ThreadPoolExecutor(2) as pool:
        bad = [r for r in pool.map(trial, range(trials)) if r is not None]
    assert not bad, bad


def test_kill_9_mid_matrix_leaves_no_benchmark_running_and_completed_jobs_stored(cli, tmp_path):
    job = tmp_path / "job.yaml"
    marker = tmp_path / "started"
    job.write_text(textwrap.dedent(f"""\
        benchmark: cmd
        runs: 1
        shell: true
        command: ["true", "echo $$ >> {marker}; exec sleep 60", "true"]
    """))
    proc = cli.popen("run", str(job))
    until("the second command started", marker.exists, 30, step=0.02)
    time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    sleeper = int(marker.read_text().split()[0])
    until("the second command's sleep ended", lambda: not _alive(sleeper), 30)
    rows = cli.sql("SELECT name, status FROM run ORDER BY id")
    assert rows[0] == ("true", "finished") and len(rows) == 2


def test_a_hanging_job_is_killed_at_its_timeout_and_the_matrix_goes_on(cli, tmp_path):
    job = tmp_path / "job.yaml"
    # The timeout is every command's: `true` must beat it on a busy machine too; `sleep 30` never does.
    job.write_text("benchmark: cmd\nruns: 2\ntimeout: 2\nshell: true\ncommand: ['sleep 30', 'true']\n")
    proc = cli("run", str(job), check=False)
    assert proc.returncode == 1 and "timed out" in proc.stderr
    assert cli.sql("SELECT name, status FROM run ORDER BY id") == [("sleep 30", "failed"), ("true", "finished")]


def test_store_upgrades_a_database_at_the_first_revision(tmp_path):
    """A store made before migration 0002 is upgraded when opened (the head is read from the scripts)."""
    import sqlite3

    from alembic import command
    from alembic.config import Config
    from sqlalchemy import create_engine

    import perflab.store.db as db

    path = tmp_path / "old.db"
    engine = create_engine(f"sqlite:///{path}")
    with engine.connect() as conn:
        cfg = Config(str(db.Path(db.__file__).with_name("alembic.ini")))
        cfg.set_main_option("script_location", str(db.Path(db.__file__).with_name("migrations")))
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0001")
        conn.commit()
    assert db.HEAD_REVISION != "0001"
    store = db.open_store(str(path))
    con = sqlite3.connect(path)
    assert con.execute("SELECT version_num FROM alembic_version").fetchall() == [(db.HEAD_REVISION,)]
    assert "process" in [r[1] for r in con.execute("PRAGMA table_info(sample)")]
    assert "job" in [r[1] for r in con.execute("PRAGMA table_info(run)")]
    store.engine.dispose()


def test_a_benchmark_starts_with_no_signal_blocked_or_ignored_whatever_its_caller_left():
    """The launcher gives the benchmark a known signal state: perflab stops it with SIGINT or
    SIGTERM, which a mask or an ignored disposition inherited from the caller would swallow."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        result = execute(ProcessSpec(["/bin/grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"], timeout=30))
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
        signal.signal(signal.SIGINT, previous)
    assert result.exit_status == 0, result.stderr_tail
    masks = dict(line.split(":\t") for line in result.stdout.splitlines())
    blocked, ignored = int(masks["SigBlk"], 16), int(masks["SigIgn"], 16)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        assert not blocked & (1 << (sig - 1)) and not ignored & (1 << (sig - 1)), masks

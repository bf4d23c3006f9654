"""A run cut short keeps every committed repetition and is shown as interrupted."""

import os
import signal

import pytest

from services import until


def wait_for_samples(cli, at_least: int, timeout: float = 120) -> int:
    def samples() -> int:
        if cli.db.exists():
            try:
                n = cli.sql("SELECT count(DISTINCT repetition) FROM sample")[0][0]
            except Exception:  # the schema may not exist yet
                n = 0
            return n if n >= at_least else 0
        return 0

    return until(f"{at_least} repetitions' samples", samples, timeout)


def test_sigkill_keeps_completed_repetitions(cli):
    proc = cli.popen("run", "cmd", "--runs", "200", "--", "sleep", "0.05")
    wait_for_samples(cli, 3)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    kept = cli.sql("SELECT count(DISTINCT repetition) FROM sample WHERE metric='time.elapsed_time'")[0][0]
    assert 3 <= kept < 200
    # Every kept repetition is complete: all five metrics of it.
    assert cli.sql("SELECT count(*) FROM sample")[0][0] == kept * 5
    # The dead process could not say so; the next command recognises it.
    assert cli.sql("SELECT status FROM run") == [("running",)]
    log = cli("log").stdout
    assert "INTERRUPTED" in log
    assert cli.sql("SELECT status FROM run") == [("interrupted",)]
    assert "interrupted" in cli("runs").stdout
    show = cli("show", "1").stdout
    assert "interrupted" in show and f" {kept} " in next(l for l in show.splitlines() if l.strip().startswith("time.elapsed_time "))


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_sigterm_and_ctrl_c_mark_interrupted(cli, sig, code):
    proc = cli.popen("run", "cmd", "--runs", "200", "--", "sleep", "0.05")
    wait_for_samples(cli, 2)
    os.kill(proc.pid, sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code
    assert "kept" in err and "Traceback" not in err
    status, error = cli.sql("SELECT status, error FROM run")[0]
    assert status == "interrupted" and error
    assert cli.sql("SELECT count(DISTINCT repetition) FROM sample")[0][0] >= 2


def test_a_live_run_is_not_reaped(cli):
    # Long enough (50 s at least) to be running still when a slow `perflab log` looks; killed below.
    proc = cli.popen("run", "cmd", "--runs", "1000", "--", "sleep", "0.05")
    try:
        wait_for_samples(cli, 1)
        cli("log")
        assert cli.sql("SELECT status FROM run") == [("running",)]
    finally:
        proc.kill()
        proc.wait()


def test_two_processes_write_one_database(cli):
    procs = [cli.popen("run", "cmd", "--runs", "30", "--tag", f"p{i}", "--", "true") for i in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    assert cli.sql("SELECT tag, status FROM run ORDER BY tag") == [("p0", "finished"), ("p1", "finished")]
    assert cli.sql("SELECT count(*) FROM sample")[0][0] == 2 * 30 * 5

"""The robot on hostile options (issue 23: M4, M5, M6): refused before any work, or a non-zero status."""

from __future__ import annotations

from conftest import assert_one_line_error
from test_robot import make_repo


def _setup(tmp_path):
    repo = tmp_path / "sut"
    shas = make_repo(repo, commits=3)
    job = tmp_path / "job.yaml"
    job.write_text("benchmark: cmd\nargv: [/bin/sh, prog.sh]\nruns: 2\n")
    return repo, shas, job


def test_a_metric_glob_matching_nothing_is_refused_before_any_work(cli, tmp_path):     # M4
    repo, shas, job = _setup(tmp_path)
    proc = cli("robot", "--repo", repo, "--job", job, "--once", "--metric", "nosuch.*", check=False)
    assert_one_line_error(proc, "--metric nosuch.*", "matches none", "time.elapsed_time")
    assert not cli.db.exists() or cli.sql("SELECT count(*) FROM run") == [(0,)]


def test_an_unwritable_out_is_refused_before_any_work(cli, tmp_path):      # M5
    repo, shas, job = _setup(tmp_path)
    (tmp_path / "file").write_text("x")
    for out in ("/proc/nope", tmp_path / "file"):
        proc = cli("robot", "--repo", repo, "--job", job, "--once", "--out", out, check=False)
        assert_one_line_error(proc, "--out", str(out))
    assert not cli.db.exists() or cli.sql("SELECT count(*) FROM run") == [(0,)]


def test_a_pass_that_could_build_nothing_exits_3(cli, tmp_path):      # M6
    repo, shas, job = _setup(tmp_path)
    proc = cli("robot", "--repo", repo, "--job", job, "--once", "--build", "false", "--start", shas[0],
               check=False, timeout=300)
    assert proc.returncode == 3, (proc.stdout, proc.stderr)
    assert "no commit could be tested" in proc.stderr and "Traceback" not in proc.stderr

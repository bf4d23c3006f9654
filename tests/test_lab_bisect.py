"""bisect --box and robot --box: the decisions made here, every measurement made by a
lab box's worker (a real worker process on a real redis-server), which fetches each
commit, builds it in a worktree of its own and runs the job; the runs reach the
shared store and are read back from it."""

from __future__ import annotations

import json
import subprocess

import pytest

import test_bisect
import test_robot
from conftest import assert_one_line_error
from test_lab import Lab


@pytest.fixture
def box(tmp_path, redis_server):
    lab = Lab(tmp_path, redis_server.url, str(tmp_path / "shared.db"))
    lab.start_worker("b1")
    yield lab
    lab.stop()


def _git(repo, *args) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def test_bisect_on_a_lab_box_finds_the_commit_and_skips_the_unbuildable_one(tmp_path, box):
    repo = tmp_path / "repo"
    shas = test_bisect.make_repo(repo)
    job = tmp_path / "loop.yaml"
    job.write_text(test_bisect.JOB)
    done = box.perflab("bisect", "--repo", repo, "--good", shas[0], "--bad", shas[-1], "--build", test_bisect.BUILD,
                       "--job", job, "--metric", "loop.ratio", "--box", "b1", "--db", box.db, timeout=400)
    out = done.stdout
    assert f"first bad commit: {shas[test_bisect.SLOW_AT - 1]}" in out, out + done.stderr
    assert f"git bisect skip {shas[test_bisect.BROKEN_AT - 1]}" in out           # built on the box: failed
    assert "--build failed at" in done.stderr

    # Every run was made by the box's worker, at its commit, and sits in the shared store.
    from perflab.store import open_store

    store = open_store(box.db)
    tag = next(line.split("runs tagged ")[1].rstrip(")") for line in out.splitlines() if "runs tagged" in line)
    runs = store.find_runs(tag=tag)
    assert runs and {r.box for r in runs} == {"b1"}
    assert {r.commit for r in runs} >= {shas[0], shas[-1], shas[test_bisect.SLOW_AT - 1]}
    assert all(r.status == "finished" and r.job["source"]["commit"] == r.commit and r.job["lab"]["worker"]
               for r in runs)
    used = int(out.split("runs: ")[1].split()[0])
    assert used == sum(1 for s in store.samples([r.id for r in runs]) if s.metric == "loop.ratio")
    # The built commits live in the worker's cache, not in the user's repository.
    test_bisect.assert_repo_untouched(repo, shas[-1])
    assert test_bisect.worktrees(repo) == [str(repo)]
    assert list((box.spool("b1") / "src").glob("*/mirror.git"))


def test_robot_on_a_lab_box_reports_the_planted_regression_once(tmp_path, box):
    repo = tmp_path / "sut"
    shas = test_robot.make_repo(repo)
    job = tmp_path / "job.yaml"
    job.write_text("benchmark: cmd\nargv: [/bin/sh, prog.sh]\nruns: 6\n")
    out = tmp_path / "reports"
    args = ["robot", "--repo", repo, "--job", job, "--start", shas[0], "--out", out, "--once", "--name", "lab",
            "--box", "b1", "--db", box.db]
    first = box.perflab(*args, timeout=400)
    assert "1 new report(s)" in first.stdout, first.stdout + first.stderr
    assert "measured on box b1" in first.stdout
    (report,) = out.iterdir()
    assert report.name.startswith(shas[test_robot.SLOW_AT][:12])
    second = box.perflab(*args, timeout=400)
    assert "0 new report(s)" in second.stdout, second.stdout
    from perflab.store import open_store

    runs = open_store(box.db).find_runs(tag="robot-lab")
    assert runs and {r.box for r in runs} == {"b1"} and all(r.commit for r in runs)


def test_lab_bisect_refuses_what_the_box_cannot_do(tmp_path, redis_server):
    repo = tmp_path / "repo"
    shas = test_bisect.make_repo(repo, n=4, slow_at=3, broken_at=99)
    lab = Lab(tmp_path, redis_server.url, str(tmp_path / "shared.db"))
    base = ["bisect", "--repo", repo, "--good", shas[0], "--bad", shas[-1], "--build", test_bisect.BUILD,
            "--metric", "time.elapsed_time", "--db", lab.db, "--", "./prog"]
    # commits that are not at the URL the box fetches from
    elsewhere = tmp_path / "elsewhere"
    _git(tmp_path, "init", "-q", "--bare", str(elsewhere))
    done = lab.perflab(*base[:-2], "--box", "b1", "--source-url", elsewhere, "--", "./prog", check=False)
    assert_one_line_error(done, f"commit {shas[0][:12]} is on none of its branches or tags")
    # the broker away: at once, before any step
    done = lab.perflab(*base[:-2], "--box", "b1", "--broker", "redis://127.0.0.1:1/0", "--", "./prog", check=False)
    assert_one_line_error(done, "broker redis://127.0.0.1:1/0 is unreachable")
    done = lab.perflab(*base[:-2], "--box", "no/such", "--", "./prog", check=False)
    assert_one_line_error(done, "box name 'no/such'")
    assert not list(tmp_path.glob("shared.db.bisect/*.json")) or all(
        json.loads(p.read_text())["status"] != "running" for p in tmp_path.glob("shared.db.bisect/*.json"))

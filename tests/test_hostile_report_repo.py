"""Issue 23 M3: reports on runs measured in a scratch worktree (the robot's, bisect's) name the
user's repository and its remote, not the worktree deleted since; subject, author and the
reproduce steps come from there."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from conftest import PERFLAB
from test_robot import GIT_ENV, SLOW_AT, make_repo


def _git(*args, cwd: Path) -> str:
    return subprocess.run(["git", "-C", str(cwd), *map(str, args)], check=True, capture_output=True, text=True,
                          env=dict(os.environ, **GIT_ENV)).stdout


def test_report_regression_on_worktree_runs_names_the_users_repository(cli, tmp_path):
    repo = tmp_path / "sut"
    shas = make_repo(repo, commits=SLOW_AT + 1)
    _git("remote", "add", "origin", "https://robot:s3cret@git.example.org/sut.git", cwd=repo)
    base, head = shas[SLOW_AT - 1], shas[SLOW_AT]
    # As the robot measures: each commit in a detached worktree outside the repository, removed after.
    for sha in (base, head):
        tree = tmp_path / f"perflab-robot-{sha[:8]}" / "tree"
        _git("worktree", "add", "--detach", tree, sha, cwd=repo)
        subprocess.run([PERFLAB, "run", "cmd", "--runs", "6", "--repo", tree, "--", "/bin/sh", "prog.sh"],
                       cwd=tree, env=cli.env, check=True, capture_output=True, timeout=120)
        _git("worktree", "remove", "--force", tree, cwd=repo)
    env = json.loads(cli.sql("SELECT e.facts FROM run r JOIN environment e ON e.id = r.environment_id "
                             "ORDER BY r.id DESC LIMIT 1")[0][0])
    assert env["sut_repo"] == str(repo.resolve())
    assert env["sut_worktree"].endswith("/tree") and env["sut_remote"] == "https://robot@git.example.org/sut.git"

    text = cli("report", "regression", "--base", base[:12], "--head", head[:12]).stdout
    assert f"in repository: {repo.resolve()} (https://robot@git.example.org/sut.git)" in text, text
    assert f'commit: {head} ("prog: sleep longer")' in text
    assert "author: Ada Author <ada@example.org>" in text
    assert f"git -C {repo.resolve()} checkout {head}" in text
    assert f"(cd {repo.resolve()} && perflab run \"$OLDPWD/job.yaml\" --repo ." in text
    assert "perflab-robot-" not in text and "s3cret" not in text

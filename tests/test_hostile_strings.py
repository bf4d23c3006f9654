"""H2 (issue 23), the whole sweep class: hostile strings through every output.

A repository whose commit subjects and author hold a window-title escape, BEL and colour
sequences, and a store whose tags, comments, box and run names hold the same, go through
every command; no ESC or BEL byte may reach stdout or stderr (perflab.core.text.printable
shows them as `\\x1b`, `\\x07`).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from conftest import CLI, PERFLAB

EVIL = "\x1b]0;TITLE\x07\x1b[31mred\x1b[0m"
SLOW_AT = 2


def _git(repo: Path, *args: str, env=None) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout


def _make_repo(path: Path) -> list[str]:
    env = dict(os.environ, GIT_AUTHOR_NAME=f"Eve {EVIL}", GIT_AUTHOR_EMAIL="eve@example.org",
               GIT_COMMITTER_NAME=f"Eve {EVIL}", GIT_COMMITTER_EMAIL="eve@example.org")
    path.mkdir()
    _git(path, "init", "-q", "-b", "main", env=env)
    shas = []
    for i in range(5):
        pause = "0.06" if i >= SLOW_AT else "0.02"
        (path / "prog.sh").write_text(f"#!/bin/sh\n# version {i}\nsleep {pause}\n")
        _git(path, "add", "prog.sh", env=env)
        _git(path, "commit", "-q", "-m", f"prog {i}: {EVIL}\n\nbody {EVIL}", env=env)
        shas.append(_git(path, "rev-parse", "HEAD").strip())
    return shas


class World:
    """The repository, the job file and the store, and every command's output so far."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.cli = CLI(tmp / "perflab.db", tmp, tmp / "cache")
        self.repo = tmp / "sut"
        self.shas = _make_repo(self.repo)
        self.job = tmp / "job.yaml"
        self.job.write_text(f"benchmark: cmd\nargv: [/bin/sh, prog.sh]\nruns: 4\ncomment: {EVIL!r}\n"
                            .replace("'", '"'))
        self.base, self.head = f"base{EVIL}", f"head{EVIL}"

    def __call__(self, *args, timeout=300) -> subprocess.CompletedProcess:
        return self.cli(*args, check=False, timeout=timeout)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> World:
    assert PERFLAB
    w = World(tmp_path_factory.mktemp("hostile-strings"))
    setup = [
        ("run", "cmd", "--runs", "3", "--tag", w.base, "--comment", EVIL, "--box", f"box{EVIL}",
         "--name", f"n{EVIL}", "--", "sleep", "0.01"),
        ("run", "cmd", "--runs", "3", "--tag", w.head, "--comment", EVIL, "--box", f"box{EVIL}",
         "--name", f"n{EVIL}", "--", "sleep", "0.03"),
        ("run", "cmd", "--runs", "2", "--tag", f"fails{EVIL}", "--", "sh", "-c", f"printf '{EVIL}' >&2; exit 3"),
        ("annotate", "1", f"note {EVIL}"),
    ]
    for args in setup:
        _assert_clean(w(*args), args)
    return w


def _assert_clean(proc: subprocess.CompletedProcess, what) -> None:
    for stream, text in (("stdout", proc.stdout), ("stderr", proc.stderr)):
        assert "\x1b" not in text and "\x07" not in text, (what, stream, text[-3000:])
    assert "Traceback" not in proc.stderr, (what, proc.stderr)


def _commands(w: World) -> dict[str, tuple]:
    b, h = w.base, w.head
    first, last = w.shas[0], w.shas[-1]
    return {
        "runs": ("runs",),
        "runs-failed": ("runs", "--status", "failed"),
        "log": ("log",),
        "show": ("show", "1"),
        "show-failed": ("show", "3"),
        "compare": ("compare", b, h),
        "compare-lkp": ("compare", b, h, "--style", "lkp"),
        "compare-mmtests": ("compare", b, h, "--style", "mmtests"),
        "compare-benchstat": ("compare", b, h, "--style", "benchstat"),
        "compare-csv": ("compare", b, h, "--style", "csv"),
        "detect": ("detect",),
        "report-regression": ("report", "regression", "--base", b, "--head", h),
        "report-table": ("report", "table"),
        "report-html": ("report", "html", b, h, "-o", w.tmp / "r.html"),
        "export-json": ("export",),
        "export-csv-file": ("export", "--format", "csv", "-o", w.tmp / "e.csv"),
        "check": ("check", "--baseline", b, "--run", h),
        "rerun": ("rerun", "1"),
        "run-job": ("run", w.job, "--repo", w.repo, "--tag", f"job{EVIL}"),
        "jobs-split": ("jobs", "split", w.job, "-o", w.tmp / "split"),
        "bad-job": ("run", w.tmp / "nope.yaml", "--set", f"tag={EVIL}"),
        "bad-tag": ("compare", f"nosuch{EVIL}", h),
        "robot": ("robot", "--repo", w.repo, "--job", w.job, "--start", first, "--once", "--out", w.tmp / "reports",
                  "--name", "evil"),
        "bisect": ("bisect", "--repo", w.repo, "--good", first, "--bad", last, "--job", w.job,
                   "--metric", "time.elapsed_time"),
        "submit-no-broker": ("submit", w.job, "--box", f"box{EVIL}", "--broker", "redis://127.0.0.1:1/0"),
        "queue-no-broker": ("queue", "--broker", "redis://127.0.0.1:1/0"),
    }


def _names() -> list[str]:
    class Fake:
        tmp = Path("/")
        repo = Path("/")
        job = Path("/")
        base = head = ""
        shas = ["", ""]
    return list(_commands(Fake()))   # type: ignore[arg-type]


@pytest.mark.parametrize("name", _names())
def test_no_escape_byte_reaches_the_terminal(world, name):
    args = _commands(world)[name]
    _assert_clean(world(*args, timeout=600), name)

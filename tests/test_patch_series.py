"""perflab series (issue 37, first part): a real mailbox made with `git format-patch --base`,
applied in perflab's clone, base against head, the patch that changed the count named."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import assert_one_line_error

PROGRAM = """static volatile long sink;
__attribute__((noinline)) void work(int n) { for (int i = 0; i < n; i++) sink += i; }
int main(void) { work(%d); return 0; }
// %s
"""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=Dev", "-c", "user.email=dev@example.org", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def _series(tmp_path: Path, culprit: int = 4, total: int = 6) -> tuple[Path, Path, str]:
    repo = tmp_path / "proj"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "prog.c").write_text(PROGRAM % (100000, "base"))
    _git(repo, "add", "prog.c")
    _git(repo, "commit", "-qm", "base")
    base = _git(repo, "rev-parse", "HEAD")
    _git(repo, "checkout", "-qb", "topic")
    for i in range(1, total + 1):
        n = 130000 if i >= culprit else 100000
        (repo / "prog.c").write_text(PROGRAM % (n, f"step {i}"))
        _git(repo, "commit", "-qam", f"prog: {'more work' if i == culprit else 'a comment'} ({i})")
    out = tmp_path / "mails"
    _git(repo, "format-patch", "-q", "--base", base, "--cover-letter", "-o", str(out), f"{base}..topic")
    _git(repo, "checkout", "-q", "main")
    mbox = tmp_path / "series.mbox"
    mbox.write_text("".join(p.read_text() for p in sorted(out.glob("*.patch"))))
    return repo, mbox, base


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind")
def test_the_series_is_applied_and_the_patch_that_added_work_is_named(cli, tmp_path):
    repo, mbox, base = _series(tmp_path)
    head_before = _git(repo, "rev-parse", "HEAD")
    job = tmp_path / "job.yaml"
    job.write_text("benchmark: cmd\ncommand: ./prog\nmeasure: instructions\n")
    out = cli("series", "--repo", repo, "--mbox", mbox, "--job", job, "--build", "cc -O1 -o prog prog.c",
              "--metric", "valgrind.instructions", timeout=600).stdout
    assert f"series: 6 patches ([PATCH 0/6] *** SUBJECT HERE ***), base {base[:12]}" in out, out
    assert "the patch: [PATCH 4/6] prog: more work (4) (4 of 6)" in out, out
    assert "where the first bad commit's instructions changed" in out and "work" in out
    # the user's repository: same branch, same commit, no worktree or branch of perflab's
    assert _git(repo, "rev-parse", "HEAD") == head_before and _git(repo, "status", "--porcelain") == ""
    assert _git(repo, "branch", "--format=%(refname:short)").split() == ["main", "topic"]


def test_a_series_that_does_not_apply_or_has_no_base_is_one_line(cli, tmp_path):
    repo, mbox, base = _series(tmp_path)
    (repo / "prog.c").write_text("int main(void) { return 1; }\n")
    _git(repo, "commit", "-qam", "elsewhere")
    job = tmp_path / "job.yaml"
    job.write_text("benchmark: cmd\ncommand: ./prog\n")
    args = ["series", "--repo", repo, "--mbox", mbox, "--job", job, "--metric", "time.elapsed_time"]
    assert_one_line_error(cli(*args, "--base", "main", check=False),
                          "[PATCH 1/6] prog: a comment (1) does not apply to")
    no_base = tmp_path / "nobase.mbox"
    no_base.write_text("\n".join(l for l in mbox.read_text().splitlines() if not l.startswith("base-commit:")) + "\n")
    assert_one_line_error(cli(*args[:4], no_base, *args[5:], check=False), "give --base REF")
    empty = tmp_path / "empty.mbox"
    empty.write_text("hello\n")
    assert_one_line_error(cli(*args[:4], empty, *args[5:], check=False), "no patch mail in it")

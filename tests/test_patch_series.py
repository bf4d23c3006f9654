"""perflab series (issue 37, first part): a real mailbox made with `git format-patch --base`,
applied in perflab's clone, base against head, the patch that changed the count named."""

from __future__ import annotations

import re
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


def mailed(tmp_path: Path, files: dict[str, str], patches: list[tuple[str, dict[str, str]]]) -> tuple[Path, Path, str]:
    """A repository tmp_path/proj whose main holds `files` (name -> text), and a directory of mails
    (git format-patch, a cover letter) of `patches` (subject, files written) on it: (the
    repository, back on main; the mails' directory; the base commit)."""
    repo = tmp_path / "proj"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")

    def commit(written: dict[str, str], subject: str) -> None:
        for name, text in written.items():
            (repo / name).write_text(text)
        _git(repo, "add", ".")
        _git(repo, "commit", "-qm", subject)

    commit(files, "base")
    base = _git(repo, "rev-parse", "HEAD")
    _git(repo, "checkout", "-qb", "topic")
    for subject, written in patches:
        commit(written, subject)
    out = tmp_path / "mails"
    _git(repo, "format-patch", "-q", "--base", base, "--cover-letter", "-o", str(out), f"{base}..topic")
    _git(repo, "checkout", "-q", "main")
    return repo, out, base


def _series(tmp_path: Path, culprit: int = 4, total: int = 6) -> tuple[Path, Path, str]:
    repo, out, base = mailed(tmp_path, {"prog.c": PROGRAM % (100000, "base")},
                             [(f"prog: {'more work' if i == culprit else 'a comment'} ({i})",
                               {"prog.c": PROGRAM % (130000 if i >= culprit else 100000, f"step {i}")})
                              for i in range(1, total + 1)])
    mbox = tmp_path / "series.mbox"
    mbox.write_text("".join(p.read_text() for p in sorted(out.glob("*.patch"))))
    return repo, mbox, base


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind")
def test_the_series_is_applied_and_the_patch_that_added_work_is_named(cli, tmp_path):
    repo, mbox, base = _series(tmp_path)
    head_before = _git(repo, "rev-parse", "HEAD")
    job = tmp_path / "job.yaml"
    job.write_text("benchmark: cmd\ncommand: ./prog\nmeasure: instructions\n")
    # Every long step speaks (PERFLAB_STEP_AFTER=0: no step is too short, no timing in the test).
    done = cli("series", "--repo", repo, "--mbox", mbox, "--job", job, "--build", "cc -O1 -o prog prog.c",
               "--metric", "valgrind.instructions", timeout=600, env={"PERFLAB_STEP_AFTER": "0"})
    out, err = done.stdout, done.stderr
    assert f"series: 6 patches ([PATCH 0/6] *** SUBJECT HERE ***), base {base[:12]}" in out, out
    # The steps on stderr, a start line and an end line with the duration each; none on stdout.
    for label in (f"applying 6 patches on {base[:12]} (git am)", f"{base[:12]} (good): building and measuring",
                  "cleaning up the series' worktrees"):
        assert f"\n{label} ...\n" in "\n" + err, (label, err)
        assert f"\n{label}: done in " in "\n" + err, (label, err)
    assert re.search(r"^confirming [0-9a-f]{12} against its parent [0-9a-f]{12}: done in ", err, re.M), err
    assert " ...\n" not in out and ": done in " not in out, out
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


# -- the checks after the culprit: the revert on the head, the kind of the change, the mail ----------

TIMED = """#include <unistd.h>
#include "scale.h"
static volatile long sink;
__attribute__((noinline)) void work(long n) { for (long i = 0; i < n; i++) sink += i; }
int main(void) { work(%s); if (%d) usleep(%d); return 0; }
"""


def _project(tmp_path: Path, patches: list[tuple[str, dict[str, str]]]) -> tuple[Path, Path, str]:
    """A repository whose base is a small C program, and a mailbox of `patches` (subject, files written) on it."""
    # The base waits 30 ms, so a start-up delay of a loaded machine is small against it (as in
    # tests/test_robot.py); the planted changes add hundreds of milliseconds.
    return mailed(tmp_path, {"prog.c": TIMED % ("SCALE * 2000000L", 1, 30000), "scale.h": "#define SCALE 1\n",
                             "README": "notes\n"}, patches)


def _notes(i: int) -> tuple[str, dict[str, str]]:
    return f"docs: notes ({i})", {"README": "notes\n" * (i + 1)}


def _record(db: Path) -> dict:
    import json

    return json.loads(next((db.parent / (db.name + ".bisect")).glob("*.json")).read_text())


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind")
def test_a_timed_regression_is_named_checked_by_revert_labelled_code_path_and_mailed(cli, tmp_path):
    # Patch 3 multiplies the program's work by 64 (~35 ms -> ~200 ms): far beyond what load fakes,
    # and the count (instructions x40) explains it.
    patches = [_notes(1), _notes(2), ("lib: scale the work up (3)", {"scale.h": "#define SCALE 64\n"}),
               _notes(4), _notes(5), _notes(6)]
    repo, mails, base = _project(tmp_path, patches)
    job = tmp_path / "job.yaml"
    job.write_text("benchmark: cmd\ncommand: ./prog\n")
    mail = tmp_path / "report.txt"
    out = cli("series", "--repo", repo, "--mbox", mails, "--job", job, "--build", "cc -O1 -o prog prog.c",
              "--metric", "time.elapsed_time", "--out", mail, timeout=900).stdout
    assert "the patch: [PATCH 3/6] lib: scale the work up (3) (3 of 6)" in out, out
    assert "revert check: reverting [PATCH 3/6] lib: scale the work up (3) on the head restores time.elapsed_time" in out
    assert "kind of change: code path: valgrind.instructions +" in out, out
    text = mail.read_text()
    assert text.startswith("Subject: [perflab] [PATCH 3/6] lib: scale the work up (3): time.elapsed_time +"), text
    for needle in ("regression", "due to the patch:", "(3 of 6)", f"base commit: {base}",
                   "series: [PATCH 0/6] *** SUBJECT HERE ***, 6 patches", "kind of change: code path",
                   "revert check: reverting [PATCH 3/6]", "| Reported-by: ", "git am ", "perflab series --repo ",
                   "time.elapsed_time", "where (instructions counted per function", "work"):
        assert needle in text, (needle, text)
    rec = _record(cli.db)
    assert rec["result"]["revert"]["verdict"] == "restores" and rec["result"]["kind"]["label"] == "code path"
    # compare finds the counted runs at the two commits: the same label as a footnote
    tag = rec["tag"]
    shown = cli("compare", f"tag={tag},commit={rec['good'][:12]}", f"tag={tag},commit={rec['bad'][:12]}").stdout
    assert "kind of change, time.elapsed_time" in shown and ": code path: valgrind.instructions" in shown, shown


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind")
def test_a_sleep_is_timing_only_and_a_later_patch_can_keep_the_change_after_the_revert(cli, tmp_path):
    # Patch 2 waits 300 ms instead of 30: the time grows ~9 times, the instructions do not move.
    sleepy = TIMED % ("SCALE * 2000000L", 1, 300000)
    repo, mails, _base = _project(tmp_path, [_notes(1), ("prog: wait for the device (2)", {"prog.c": sleepy}),
                                             _notes(3)])
    job = tmp_path / "job.yaml"
    job.write_text("benchmark: cmd\ncommand: ./prog\n")
    out = cli("series", "--repo", repo, "--mbox", mails, "--job", job, "--build", "cc -O1 -o prog prog.c",
              "--metric", "time.elapsed_time", "--no-revert", timeout=900).stdout
    assert "the patch: [PATCH 2/3] prog: wait for the device (2)" in out, out
    assert "kind of change: timing only: valgrind.instructions" in out and "timed again in 6 pairs" in out, out
    assert "revert check" not in out
    # Counted, and patch 5 hard-codes what patch 3 made the scale: reverting patch 3 on the head
    # leaves the work as it is.
    hard = TIMED % ("12 * 2000000L", 1, 30000)
    repo2 = tmp_path / "two"
    repo2.mkdir()
    repo, mails, _base = _project(repo2, [_notes(1), _notes(2), ("lib: scale the work up (3)",
                                                                   {"scale.h": "#define SCALE 12\n"}),
                                            _notes(4), ("prog: a fixed amount of work (5)", {"prog.c": hard})])
    job2 = tmp_path / "counted.yaml"
    job2.write_text("benchmark: cmd\ncommand: ./prog\nmeasure: instructions\n")
    out = cli("series", "--repo", repo, "--mbox", mails, "--job", job2, "--build", "cc -O1 -o prog prog.c",
              "--metric", "valgrind.instructions", timeout=900).stdout
    assert "the patch: [PATCH 3/5] lib: scale the work up (3)" in out, out
    assert ("revert check: reverting [PATCH 3/5] lib: scale the work up (3) on the head does not restore "
            "valgrind.instructions: the culprit is interacting with later patches") in out, out
    assert "kind of change: valgrind.instructions is exact here (counted)" in out


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind")
def test_bisect_kind_labels_the_culprit_against_its_parent(cli, tmp_path):
    sleepy = TIMED % ("SCALE * 2000000L", 1, 300000)
    repo, _mails, base = _project(tmp_path, [_notes(1), ("prog: wait for the device (2)", {"prog.c": sleepy}),
                                             _notes(3)])
    head_before = _git(repo, "rev-parse", "HEAD")
    out = cli("bisect", "--repo", repo, "--good", base, "--bad", "topic", "--build", "cc -O1 -o prog prog.c",
              "--metric", "time.elapsed_time", "--kind", "--revert", "--", "./prog", timeout=900).stdout
    assert "subject: prog: wait for the device (2)" in out, out
    assert "  kind of change: timing only: valgrind.instructions" in out and "timed again in 6 pairs" in out, out
    assert "  revert check: reverting " in out and "(\"prog: wait for the device (2)\") on the bad end restores " \
        "time.elapsed_time" in out, out
    result = _record(cli.db)["result"]
    assert result["kind"]["label"] == "timing only" and result["revert"]["verdict"] == "restores"
    # the revert is a commit object only: the user's branches, checkout and worktrees are as they were
    assert _git(repo, "rev-parse", "HEAD") == head_before and _git(repo, "status", "--porcelain") == ""
    assert _git(repo, "branch", "--format=%(refname:short)").split() == ["main", "topic"]
    assert len(_git(repo, "worktree", "list").splitlines()) == 1


# -- a kernel tree's builds are kept for the next series (issue 47, Deliver 4) ---------------------

FAKE_KERNEL_BUILD = """mkdir -p "$KBUILD_OUTPUT/arch/x86/boot"
echo "$(cat version)" >> "$KBUILD_OUTPUT/builds.log"
cp version "$KBUILD_OUTPUT/arch/x86/boot/bzImage"
"""


def test_a_series_kernel_builds_are_kept_for_the_next_series_not_removed(tmp_path, monkeypatch, capsys):
    # Removing a kernel tree's checkout and build directory at the end of each series took 25-40 s,
    # and the next series built everything again (516 s): they stay beside the clone now.
    from perflab.automate import series
    from perflab.automate.measurer import KernelBuilds
    from perflab.execution.vm import kbuild

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("PERFLAB_STEP_AFTER", "0")      # every step speaks: no timing here
    repo = tmp_path / "linux"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "build.sh").write_text(FAKE_KERNEL_BUILD)
    shas = []
    for version in ("base", "patched", "v2"):
        (repo / "version").write_text(version + "\n")
        _git(repo, "add", ".")
        _git(repo, "commit", "-qm", version)
        shas.append(_git(repo, "rev-parse", "HEAD"))
    clone = series.clone_of(repo)
    clone.parent.mkdir(parents=True)
    image = "arch/x86/boot/bzImage"

    def one_series(*commits: str) -> list[str]:
        kbuild.Clone(repo, clone).at(shas[0], lambda _l: None)
        dirs = series.kernel_dirs(clone)
        builds = KernelBuilds(dirs.repo, dirs.src, dirs.out, dirs.images, "sh build.sh", image, owned=dirs.owned)
        try:
            return [builds.image_of(c).read_text().strip() for c in commits]
        finally:
            builds.close()

    dirs = series.kernel_dirs(clone)
    assert one_series(shas[0], shas[1]) == ["base", "patched"]
    assert dirs.src.is_dir() and (dirs.images / shas[0] / "bzImage").is_file()
    # The next series on the same base: the base's image is taken as it is, not built again.
    assert one_series(shas[0], shas[2]) == ["base", "v2"]
    assert (dirs.out / "builds.log").read_text().split() == ["base", "patched", "v2"]
    # Each build step said what it built and for how long, on stderr.
    said = capsys.readouterr()
    for sha in shas:
        assert f"\nkernel {sha[:12]}: --build 'sh build.sh' ...\n" in "\n" + said.err, said.err
        assert f"\nkernel {sha[:12]}: --build 'sh build.sh': done in " in "\n" + said.err, said.err
    assert said.out == ""
    # perflab's clone made again (its objects lost): the kept checkout is a worktree of the new one.
    import shutil as _shutil

    _shutil.rmtree(clone)
    _shutil.rmtree(dirs.images / shas[2])
    assert one_series(shas[2]) == ["v2"]
    # Old images beyond the ones kept are removed; the newest stay.
    series._prune_images(dirs.images, keep=1)
    assert [p.name for p in dirs.images.iterdir() if not p.name.startswith(".")] == [shas[2]]

"""The Measurer seam: bisection and robot logic driven by a fake that returns scripted samples.

No git, no builds, no processes (but the last test, which checks that the local Measurer runs
a job in its worktree, `./prog` being the program there, without changing perflab's own directory).
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from perflab.automate import bisect, robot
from perflab.automate.measurer import LocalMeasurer, Measured
from perflab.core.git import BuildFailed

GOOD_SHA, BAD_SHA = "a" * 40, "b" * 40
METRIC = "loop.ms"


class FakeMeasurer:
    """Each commit's level, with a little noise; BuildFailed for the commits named unbuildable."""

    def __init__(self, levels: dict[str, float], unbuildable=(), failing=(), place: str = ""):
        self.levels, self.unbuildable, self.failing, self.place = levels, set(unbuildable), set(failing), place
        self.rng = random.Random(7)
        self.calls: list[tuple[str, str, int]] = []

    def measure(self, commit: str, jobs: list, *, slot: str = "") -> list[Measured]:
        self.calls.append((commit, slot, sum(j.runs for j in jobs)))
        if commit in self.unbuildable:
            raise BuildFailed("--build failed: exited with status 2", "exited with status 2")
        if commit in self.failing:
            return [Measured("failed", "./prog exited with status 1", [1]) for _ in jobs]
        return [Measured("done", None, [1], {METRIC: [self.levels[commit] * (1 + self.rng.gauss(0, 0.005))
                                                      for _ in range(j.runs)]}, j.runs) for j in jobs]

    def summary(self, measured: list[Measured]) -> str:
        return f"{sum(m.samples for m in measured)} samples"


class NoStore:
    """A store with no runs yet (a fresh bisection)."""

    def find_runs(self, **_kw):
        return []

    def samples(self, _ids):
        return []


def bisection(tmp_path: Path, measurer: FakeMeasurer) -> bisect.Bisection:
    rec = bisect.Record(id="cafe0001", repo=str(tmp_path), good=GOOD_SHA, bad=BAD_SHA, build="make",
                        job=bisect.command_job(["./prog"]), metric=METRIC, tag="bisect-cafe0001",
                        settings=vars(bisect.Settings(pairing="off")), path=str(tmp_path / "rec.json"))
    return bisect.Bisection(NoStore(), rec, measurer=measurer)


def test_bisection_judges_steps_from_a_fake_measurers_samples(tmp_path):
    step_bad, step_good = "c" * 40, "d" * 40
    fake = FakeMeasurer({GOOD_SHA: 100.0, BAD_SHA: 110.0, step_bad: 110.0, step_good: 100.0})
    b = bisection(tmp_path, fake)
    ends = b.check_ends()
    assert ends.differ and 0.08 < ends.change < 0.12
    assert b.decide(step_bad).verdict == "bad"
    assert b.decide(step_good).verdict == "good"
    # The ends are measured in their own slots, the steps in the step's.
    assert {slot for commit, slot, _ in fake.calls if commit == GOOD_SHA} == {"good"}
    assert {slot for commit, slot, _ in fake.calls if commit == BAD_SHA} == {"bad"}
    assert {slot for commit, slot, _ in fake.calls if commit in (step_bad, step_good)} == {"step"}
    assert b.runs_used == sum(n for _, _, n in fake.calls)


def test_bisection_refuses_an_end_that_does_not_build_or_run(tmp_path):
    b = bisection(tmp_path, FakeMeasurer({GOOD_SHA: 100.0, BAD_SHA: 110.0}, unbuildable=[GOOD_SHA]))
    with pytest.raises(bisect.BisectError, match=r"--build 'make' fails at the good end a{12}: exited with status 2"):
        b.check_ends()
    b = bisection(tmp_path, FakeMeasurer({GOOD_SHA: 100.0, BAD_SHA: 110.0}, failing=[BAD_SHA]))
    with pytest.raises(bisect.BisectError, match=r"the job fails at the bad end b{12}: ./prog exited with status 1"):
        b.check_ends()


def test_robot_says_what_a_measurer_did_here_and_on_a_box():
    said: list[str] = []
    jobs = [bisect.command_job(["./prog"])]
    fake = FakeMeasurer({GOOD_SHA: 1.0}, unbuildable=[BAD_SHA])
    assert robot._measure(fake, GOOD_SHA, jobs, "robot-x", said.append)
    assert not robot._measure(fake, BAD_SHA, jobs, "robot-x", said.append)
    boxed = FakeMeasurer({}, failing=[GOOD_SHA], place=" on box b1")
    assert robot._measure(boxed, GOOD_SHA, jobs, "robot-x", said.append)
    assert said == [f"{GOOD_SHA[:12]}: measured (1 samples)",
                    f"{BAD_SHA[:12]}: build failed, not measured: exited with status 2",
                    f"{GOOD_SHA[:12]}: 1 job(s) failed on box b1: ./prog exited with status 1",
                    f"{GOOD_SHA[:12]}: measured on box b1 (0 samples)"]


class DirectoryTrees:
    """Trees that hand out one ready directory (no git, no build)."""

    def __init__(self, path: Path):
        self.path = path

    def checkout(self, commit: str, slot: str = ""):
        from contextlib import nullcontext

        return nullcontext(self.path)


def test_local_measurer_runs_the_job_in_the_worktree_without_changing_directory(tmp_path):
    from perflab.store import open_store

    tree = tmp_path / "tree"
    tree.mkdir()
    prog = tree / "prog"
    prog.write_text('#!/bin/sh\necho "{\\"here\\": \\"$(pwd)\\"}"\necho 42 > ran-here\n')
    prog.chmod(0o755)
    import subprocess

    env = dict(os.environ, GIT_AUTHOR_NAME="A", GIT_AUTHOR_EMAIL="a@example.org", GIT_COMMITTER_NAME="A",
               GIT_COMMITTER_EMAIL="a@example.org")
    for args in (["init", "-q"], ["add", "prog"], ["commit", "-q", "-m", "prog"]):
        subprocess.run(["git", "-C", str(tree), *args], check=True, env=env, capture_output=True)
    store = open_store(str(tmp_path / "perflab.db"))
    before = os.getcwd()
    job = bisect.command_job(["./prog"]).with_(tag="t")
    (got,) = LocalMeasurer(store, DirectoryTrees(tree), box=None).measure(GOOD_SHA, [job])
    assert os.getcwd() == before
    assert got.status == "done", got.error
    assert (tree / "ran-here").read_text() == "42\n"
    assert got.runs and got.values["time.elapsed_time"]


def test_a_failed_parallel_build_says_the_compilers_error_not_makes_last_words(tmp_path):
    """Issue 44, finding 9: `make -j` ends with "Waiting for unfinished jobs" and the other jobs'
    output; the message keeps the compiler's first error and its source line."""
    import shutil

    from perflab.automate import measurer
    from perflab.core.buildlog import first_errors

    if not (shutil.which("make") and shutil.which("cc")):
        pytest.skip("needs make and cc")
    (tmp_path / "bad.c").write_text("int main(void) { return undeclared_thing; }\n")
    # The other job prints after the error: the build's last lines are make's and its.
    (tmp_path / "Makefile").write_text("all: bad.o slow\nbad.o: bad.c\n\tcc -c bad.c -o bad.o\n"
                                       "slow:\n\tsleep 1; echo '  CC      other/file.o' >&2\n")
    why = measurer.build(tmp_path, "make -j2", None)
    assert why is not None and why.startswith("exited with status 2: "), why
    assert "bad.c:1:" in why and "error:" in why and "undeclared_thing" in why, why
    assert "Waiting for unfinished jobs" not in why and "other/file.o" not in why, why
    # A link error is the linker's line; a log with no diagnostic keeps its last lines but make's.
    link = ("  LD      vmlinux.o\nld: fs/x.o: in function `f':\nx.c:(.text+0x5): undefined reference to `g'\n"
            "make[2]: *** [scripts/Makefile.vmlinux_o:61: vmlinux.o] Error 1\n"
            "make[1]: *** Waiting for unfinished jobs....\n")
    assert first_errors(link)[0] == "ld: fs/x.o: in function `f':", first_errors(link)
    assert "undefined reference to `g'" in " ".join(first_errors(link)), first_errors(link)
    assert first_errors("  CC a.o\nsegfault in script\nmake: *** [all] Error 2\n") == ["CC a.o", "segfault in script"]

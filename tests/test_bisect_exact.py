"""Bisection that knows when its error claim is void, and bisection of exact metrics.

The real git (a repository of 16 commits made here, nothing built) and the real
bisection, measured through a fake Measurer that returns scripted samples
(tests/test_measurer.py shows the seam):

- a machine that switches between two speeds (2.3x apart, as this 2-vCPU guest
  does) for stretches of runs: the steps' sequential test can be fooled into a
  wrong first bad commit; before a culprit is named it is confirmed against its
  parent in randomly ordered pairs, and a wrong one is reported as "could not
  confirm" (issue 21 item 5, issue 23's third high defect);
- hostile commit subjects (terminal escapes) never reach the terminal raw
  (issue 23 H2).
"""

from __future__ import annotations

import random
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from perflab.automate import bisect
from perflab.automate.measurer import Measured
from perflab.stats import stationarity

METRIC = "loop.ms"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def make_repo(path: Path, n: int = 16, subject=lambda i: f"commit {i}", author: str = "A Developer") -> list[str]:
    """A repository of `n` commits, the i-th setting file f to "i": written by one `git fast-import`
    (the commits `git add` and `git commit` would make, without 4 processes a commit)."""
    path.mkdir()
    _git(path, "init", "-q", "-b", "main")
    _git(path, "config", "user.email", "dev@example.com")
    _git(path, "config", "user.name", author)
    who = f"{author} <dev@example.com> {int(time.time())} +0000".encode()
    stream = b""
    for i in range(1, n + 1):
        message, content = f"{subject(i)}\n".encode(), f"{i}\n".encode()
        stream += (b"commit refs/heads/main\nauthor %s\ncommitter %s\ndata %d\n%s" % (who, who, len(message), message)
                   + b"M 100644 inline f\ndata %d\n%s\n" % (len(content), content))
    subprocess.run(["git", "-C", str(path), "fast-import", "--quiet"], input=stream, check=True, capture_output=True)
    _git(path, "reset", "-q", "--hard", "main")
    return _git(path, "rev-list", "--reverse", "main").split()


class TwoSpeedMachine:
    """Each commit's level (x1.05 from `slow_at` on), times the machine's speed of the moment: before
    each run it switches between 1x and `factor` with probability `switch` (scripted by `seed`)."""

    def __init__(self, shas, slow_at, seed, factor=2.3, switch=0.1, cov=0.005, pct=0.05):
        self.level = {s: 10.0 * (1 + pct if i + 1 >= slow_at else 1.0) for i, s in enumerate(shas)}
        self.rng, self.slow = random.Random(seed), False
        self.factor, self.switch, self.cov = factor, switch, cov
        self.place = ""
        self.calls: list[tuple[str, str, int]] = []

    def measure(self, commit, jobs, *, slot=""):
        out = []
        for job in jobs:
            values = []
            for _ in range(job.runs):
                if self.rng.random() < self.switch:
                    self.slow = not self.slow
                values.append(self.level[commit] * (self.factor if self.slow else 1) * (1 + self.rng.gauss(0, self.cov)))
            self.calls.append((commit, slot, job.runs))
            out.append(Measured("done", None, [1], {METRIC: values}, job.runs))
        return out

    def summary(self, measured):
        return f"{sum(m.samples for m in measured)} samples"


class NoStore:
    def find_runs(self, **_kw):
        return []

    def samples(self, _ids):
        return []


def _bisection(tmp_path, shas, measurer, rid="cafe0001", pairing="auto", say=lambda _m: None, **settings):
    rec = bisect.Record(id=rid, repo=str(tmp_path / "repo"), good=shas[0], bad=shas[-1], build="",
                        job=bisect.command_job(["./prog"]), metric=METRIC, tag=f"bisect-{rid}",
                        settings=vars(bisect.Settings(pairing=pairing, **settings)), path=str(tmp_path / f"{rid}.json"))
    return bisect.Bisection(NoStore(), rec, say, measurer=measurer)


# Scripted machines (seeds of TwoSpeedMachine) on which the steps' sequential test, left alone,
# walks to a wrong first bad commit: found by running 60 seeds (2 of them did).
FOOLING = [(32, 3), (46, 16)]


@pytest.mark.parametrize("seed,slow_at", FOOLING)
def test_a_two_speed_machine_fools_the_steps_and_the_recheck_finds_the_right_culprit(tmp_path, seed, slow_at):
    shas = make_repo(tmp_path / "repo")
    said: list[str] = []
    result = _bisection(tmp_path, shas, TwoSpeedMachine(shas, slow_at, seed), rid=f"e{seed:07d}",
                        say=said.append).run()
    right = shas[slow_at - 1]
    # git bisect, driven by the step decisions, named a wrong commit first (what was printed with
    # "P(bad)=0.99... error rate per step <= 0.5%" before), which the confirmation against its
    # parent did not hold up ...
    first = next(line for line in said if line.startswith("confirmation: "))
    assert first.startswith("confirmation: refuted") or first.startswith("confirmation: undecided"), said
    # ... so the step it came from was measured again in pairs, corrected, and the bisection went
    # on to the right commit, confirmed against its parent (docs/bisect.md, "Confirming the culprit").
    assert any("measured again" in line and "bisecting again with it" in line for line in said), said
    assert result.culprit is not None and result.culprit.sha == right
    assert result.confirmation.verdict == "confirmed" and result.confirmation.pairs >= 3
    assert [s.commit for s in result.steps if s.corrected]
    # The samples' two speeds are said in the result.
    assert any("two clusters" in finding for finding in result.noise)


def test_on_a_two_speed_machine_a_named_culprit_is_the_right_one(tmp_path):
    shas = make_repo(tmp_path / "repo")
    named = right = 0
    for seed in range(4):
        slow_at = random.Random(seed).randint(2, 16)
        result = _bisection(tmp_path, shas, TwoSpeedMachine(shas, slow_at, seed), rid=f"s{seed:07d}").run()
        if result.culprit is not None:
            named += 1
            right += result.culprit.sha == shas[slow_at - 1]
            assert result.confirmation.verdict == "confirmed"
    assert named >= 3 and right == named


def test_steady_noise_is_confirmed_and_says_nothing_about_noise(tmp_path):
    shas = make_repo(tmp_path / "repo")
    machine = TwoSpeedMachine(shas, 9, seed=1, switch=0.0)
    result = _bisection(tmp_path, shas, machine).run()
    assert result.culprit.sha == shas[8]
    assert result.noise == []
    conf = result.confirmation
    assert conf.verdict == "confirmed" and conf.parent == shas[7]
    assert 0.03 < conf.change < 0.07
    # The confirmation's runs are the culprit's and its parent's, in worktrees of their own.
    slots = {(commit, slot) for commit, slot, _ in machine.calls}
    assert (shas[8], "culprit") in slots and (shas[7], "parent") in slots


def test_paired_runs_are_in_random_order_within_each_pair(tmp_path):
    shas = make_repo(tmp_path / "repo")
    machine = TwoSpeedMachine(shas, 9, seed=1, switch=0.0)
    b = _bisection(tmp_path, shas, machine, pairing="on")
    b.measurer = machine
    b.check_ends()
    firsts = [machine.calls[i][0] for i in range(0, len(machine.calls), 2)]
    # Not the old strict alternation: both ends come first in some pairs, in no fixed pattern.
    assert {shas[0], shas[-1]} == set(firsts)
    alternating = [shas[0] if i % 2 == 0 else shas[-1] for i in range(len(firsts))]
    assert firsts != alternating


def test_stationarity_functions_on_known_samples():
    rng = np.random.default_rng(5)
    steady = 10 * np.exp(rng.normal(0, 0.01, 30))
    two = np.where(rng.random(30) < 0.4, 23.0, 10.0) * np.exp(rng.normal(0, 0.01, 30))
    assert not stationarity.bimodal(steady)
    split = stationarity.bimodal(two)
    assert split and 1.2 < split.factor < 1.4 and split.n_low + split.n_high == 30
    shifted = np.r_[steady[:15], steady[15:] * 1.1]
    (shift,) = stationarity.level_shifts(shifted)
    assert shift.index == 15 and 0.08 < shift.change < 0.12
    assert stationarity.level_shifts(steady) == []
    assert stationarity.serial_correlation(shifted) > 0.5
    assert abs(stationarity.serial_correlation(steady)) < 0.5
    assert stationarity.drift(steady[:10], steady[10:] * 1.05).drifted
    assert not stationarity.drift(steady[:10], steady[10:]).drifted


HOSTILE = "\x1b]0;TITLE\x07 \x1b[31mred\x1b[0m"


def test_hostile_subjects_never_reach_the_terminal_raw(tmp_path, capfd):
    from perflab.cli import bisect as cli

    shas = make_repo(tmp_path / "repo", 8, subject=lambda i: f"commit {i} {HOSTILE}", author=f"Evil {HOSTILE}")
    machine = TwoSpeedMachine(shas, 5, seed=2, switch=0.0)
    result = _bisection(tmp_path, shas, machine, say=cli._say).run()
    cli._print(result)
    out, err = capfd.readouterr()
    for stream in (out, err):
        assert "\x1b" not in stream and "\x07" not in stream
    assert "subject: commit 5 \\x1b]0;TITLE\\x07" in out
    assert "git bisect log:" in out and "# first bad commit: [" in out and "\\x1b[31mred" in out
    assert "step 1: " in err and "\\x1b" in err


class ExactMachine:
    """Scripted instruction counts: 1,000,000 up to `slow_at`, `bad_level` from there; `wobble` maps a
    commit to extra counts added to every other run of it (a program that is not deterministic)."""

    def __init__(self, shas, slow_at, bad_level=1_030_000, wobble=None):
        self.level = {s: float(bad_level if i + 1 >= slow_at else 1_000_000) for i, s in enumerate(shas)}
        self.wobble, self.place = wobble or {}, ""
        self.calls: list[tuple[str, str, int]] = []
        self.seen: dict[str, int] = {}

    def measure(self, commit, jobs, *, slot=""):
        out = []
        for job in jobs:
            values = []
            for _ in range(job.runs):
                k = self.seen[commit] = self.seen.get(commit, 0) + 1
                values.append(self.level[commit] + (self.wobble.get(commit, 0) if k % 2 == 0 else 0))
            self.calls.append((commit, slot, job.runs))
            out.append(Measured("done", None, [1], {METRIC: values}, job.runs))
        return out

    def summary(self, measured):
        return ""


def _exact_bisection(tmp_path, shas, machine, **kw):
    b = _bisection(tmp_path, shas, machine, **kw)
    b.rec.exact = True                 # an instruction count: exact by construction
    return b


def test_an_exact_metric_takes_one_run_per_commit_and_two_at_each_end(tmp_path, capfd):
    from perflab.cli import bisect as cli

    shas = make_repo(tmp_path / "repo")
    machine = ExactMachine(shas, 11)
    result = _exact_bisection(tmp_path, shas, machine).run()
    assert result.culprit.sha == shas[10]
    assert result.exact and result.exact.by_unit
    per_commit: dict[str, int] = {}
    for commit, _slot, runs in machine.calls:
        per_commit[commit] = per_commit.get(commit, 0) + runs
    assert per_commit.pop(shas[0]) == 2 and per_commit.pop(shas[-1]) == 2
    assert set(per_commit.values()) == {1}          # every step commit: one run, the confirmation none
    assert result.runs_used == 4 + len(per_commit)
    assert all(s.exact and s.n == 1 for s in result.steps)
    assert result.confirmation.verdict == "confirmed" and result.noise == []
    cli._print(result)
    out = capfd.readouterr().out
    assert "(exact: resolution 0.01%" in out and "first bad commit: " + shas[10] in out
    assert "+3.00% ± 0.01% (regression, exact)" in out


def test_exact_ends_that_disagree_fall_back_to_the_statistical_test(tmp_path):
    shas = make_repo(tmp_path / "repo")
    said: list[str] = []
    machine = ExactMachine(shas, 11, wobble={shas[0]: 5_000})   # the good end's 2nd run: +0.5%
    result = _exact_bisection(tmp_path, shas, machine, say=said.append).run()
    assert result.exact is None
    assert "disagree beyond 0.2%" in result.exact_note and "good 0.499%" in result.exact_note
    assert any("falling back to the statistical test" in line for line in said)
    # The statistical path: the sequential test on several runs per step, then the confirmation pairs.
    assert result.culprit.sha == shas[10]
    assert not any(s.exact for s in result.steps) and max(s.n for s in result.steps) >= 2
    assert result.confirmation.pairs >= 3


def test_exact_ends_within_the_resolution_are_refused(tmp_path):
    shas = make_repo(tmp_path / "repo")
    machine = ExactMachine(shas, 11, bad_level=1_000_100)   # +0.01%: not beyond 3 x the resolution
    with pytest.raises(bisect.BisectError, match=r"do not differ in loop.ms: \+0.0100% \(exact: within 3 x"):
        _exact_bisection(tmp_path, shas, machine).run()
    assert len(machine.calls) == 4


def test_a_metric_measured_exact_needs_three_runs_at_each_end(tmp_path):
    shas = make_repo(tmp_path / "repo")
    machine = ExactMachine(shas, 6)
    result = _bisection(tmp_path, shas, machine).run()   # unit unknown: exact only by measurement
    assert result.exact and not result.exact.by_unit
    assert result.culprit.sha == shas[5]
    assert sum(r for c, _s, r in machine.calls if c == shas[0]) == 3


def test_the_command_on_a_repository_full_of_escapes_prints_none(tmp_path, capfd):
    """The real `perflab bisect` (real git, the runner, the store) on commits whose subjects and author
    hold terminal escapes; the job prints a deterministic count, so the bisection is exact and cheap."""
    import os

    from perflab.cli import main

    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "dev@example.com")
    _git(repo, "config", "user.name", f"Evil {HOSTILE}")
    shas = []
    for i in range(1, 9):
        (repo / "count").write_text(f"{1_030_000 if i >= 6 else 1_000_000}\n")
        (repo / "notes").write_text(f"{i}\n")
        _git(repo, "add", "count", "notes")
        _git(repo, "commit", "-q", "-m", f"change {i} {HOSTILE}")
        shas.append(_git(repo, "rev-parse", "HEAD").strip())
    job = tmp_path / "count.yaml"
    job.write_text('benchmark: cmd\nargv: [cat, count]\n'
                   'metrics:\n  - {name: prog.instructions, pattern: "^(\\\\d+)", unit: instructions}\n')
    os.environ["TMPDIR"] = str(tmp_path)
    try:
        rc = main(["bisect", "--db", str(tmp_path / "store.db"), "--repo", str(repo), "--good", shas[0],
                   "--bad", shas[-1], "--job", str(job), "--metric", "prog.instructions"])
    finally:
        del os.environ["TMPDIR"]
    out, err = capfd.readouterr()
    assert rc == 0, err
    assert f"first bad commit: {shas[5]}" in out
    for stream in (out, err):
        assert "\x1b" not in stream and "\x07" not in stream
    assert "subject: change 6 \\x1b]0;TITLE\\x07 \\x1b[31mred\\x1b[0m" in out
    assert "author:  Evil \\x1b]0;TITLE\\x07" in out
    assert "# first bad commit: [" in out and "change 6 \\x1b]0;TITLE" in out
    # Exact: two runs at each end, one per step commit (8 commits: 3 steps).
    assert "runs: 7 over 5 commits measured" in out


def test_a_jobs_measure_metrics_can_be_bisected():
    job = bisect.command_job(["./prog"]).with_(measure="instructions")
    assert bisect.check_metric(job, "valgrind.instructions") == (-1, "instructions")
    with pytest.raises(Exception, match="does not produce it"):
        bisect.check_metric(bisect.command_job(["./prog"]), "valgrind.instructions")

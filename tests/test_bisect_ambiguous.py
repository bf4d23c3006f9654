"""A commit that does not build right before the culprit (issue 21).

git bisect then ends with "only 'skip'ped commits left to test" and lists the unbuildable commit
beside the first bad commit it measured. The bisection names the measured one, says which untested
commits could also be the cause, and still confirms it against its nearest measured good ancestor,
so a wrong one is not named. The real git (a 16-commit repository made here) and the real
bisection, measured through scripted Measurers (tests/test_bisect_exact.py's seam).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from perflab.automate.measurer import Measured
from perflab.core.git import BuildFailed
from test_bisect_exact import METRIC, ExactMachine, _bisection, _exact_bisection, make_repo

BROKEN = 10          # commit 10 does not compile (fixed by commit 11)
CULPRIT = 11         # and commit 11 is the slowdown


class Unbuildable:
    """Wraps a scripted machine: the commits in `broken` fail to build, as `cc` on bad C does."""

    def __init__(self, machine, broken: set[str]):
        self.machine, self.broken, self.place = machine, broken, ""
        self.calls = machine.calls

    def measure(self, commit, jobs, *, slot=""):
        if commit in self.broken:
            raise BuildFailed("--build failed: exit status 1: prog.c:2:1: error: unknown type name 'this'",
                              "exit status 1")
        return self.machine.measure(commit, jobs, slot=slot)

    def summary(self, measured):
        return ""


class SteadyMachine:
    """Steady 0.5% noise; commits from `slow_at` on 5% slower. In the step slot, commits from `lies_from`
    on look slow too (a disturbance during the steps that the confirmation's own runs do not have)."""

    def __init__(self, shas, slow_at, lies_from=None, seed=1):
        self.index = {s: i + 1 for i, s in enumerate(shas)}
        self.slow_at, self.lies_from = slow_at, lies_from or slow_at
        self.rng, self.calls, self.place = random.Random(seed), [], ""

    def measure(self, commit, jobs, *, slot=""):
        out = []
        for job in jobs:
            i = self.index[commit]
            slow = i >= self.slow_at or (slot == "step" and i >= self.lies_from)
            values = [10.0 * (1.05 if slow else 1.0) * (1 + self.rng.gauss(0, 0.005)) for _ in range(job.runs)]
            self.calls.append((commit, slot, job.runs))
            out.append(Measured("done", None, [1], {METRIC: values}, job.runs))
        return out

    def summary(self, measured):
        return ""


def test_an_unbuildable_commit_before_the_culprit_is_listed_beside_it(tmp_path, capfd):
    from perflab.cli import bisect as cli

    shas = make_repo(tmp_path / "repo")
    machine = Unbuildable(ExactMachine(shas, CULPRIT), {shas[BROKEN - 1]})
    result = _exact_bisection(tmp_path, shas, machine).run()
    # git alone could not name one commit: it listed the skipped one and the measured one.
    assert {c.sha for c in result.candidates} == {shas[BROKEN - 1], shas[CULPRIT - 1]}
    # The first measured bad commit is named, the unbuildable one beside it listed with why.
    assert result.culprit.sha == shas[CULPRIT - 1]
    assert [c.sha for c in result.ambiguous_with] == [shas[BROKEN - 1]]
    assert result.ambiguous_with[0].why.startswith("--build failed")
    # Confirmed against its nearest measured good ancestor (commit 9), not its unbuildable parent.
    assert result.confirmation.verdict == "confirmed"
    assert result.confirmation.parent == shas[BROKEN - 2]
    # The stored result says it in a field of its own.
    stored = json.loads(Path(result.record.path).read_text())["result"]
    assert stored["state"] == "ambiguous" and stored["culprit"]["sha"] == shas[CULPRIT - 1]
    assert [c["sha"] for c in stored["ambiguous_with"]] == [shas[BROKEN - 1]]
    cli._print(result)
    out = capfd.readouterr().out
    assert f"first bad commit: {shas[CULPRIT - 1]} (the first measured bad one)" in out
    assert f"  could also be: {shas[BROKEN - 1][:12]} commit {BROKEN} (does not build: exit status 1: prog.c:2:1" in out
    assert f"against its nearest measured good ancestor {shas[BROKEN - 2][:12]}" in out


def test_without_an_unbuildable_neighbour_nothing_is_ambiguous(tmp_path):
    shas = make_repo(tmp_path / "repo")
    result = _exact_bisection(tmp_path, shas, Unbuildable(ExactMachine(shas, CULPRIT), {shas[4]})).run()
    assert result.culprit.sha == shas[CULPRIT - 1] and result.ambiguous_with == []
    assert json.loads(Path(result.record.path).read_text())["result"]["state"] == "culprit"


def test_a_timing_culprit_next_to_an_unbuildable_commit_is_confirmed_in_pairs(tmp_path):
    shas = make_repo(tmp_path / "repo")
    machine = Unbuildable(SteadyMachine(shas, CULPRIT), {shas[BROKEN - 1]})
    result = _bisection(tmp_path, shas, machine, rid="a0000001").run()
    assert result.culprit.sha == shas[CULPRIT - 1]
    assert [c.sha for c in result.ambiguous_with] == [shas[BROKEN - 1]]
    assert result.confirmation.verdict == "confirmed" and result.confirmation.pairs >= 3
    assert result.confirmation.parent == shas[BROKEN - 2]
    # The pairs were taken in the confirmation's own worktrees.
    assert {slot for _c, slot, _n in machine.calls} >= {"culprit", "parent"}


def test_a_refuted_culprit_sends_the_bisection_on_with_the_misjudged_step_corrected(tmp_path, capfd):
    """Really slower from commit 13; during the steps commits 11 and 12 looked slow as well (a
    disturbance that the confirmation's own pairs, and pairs of the commit with the good end
    taken after it, do not have). Each refuted confirmation has the culprit measured again in
    pairs with the good end: good, so its step was misjudged bad. The bisection goes on from
    there with it good, twice, and names commit 13, confirmed."""
    from perflab.cli import bisect as cli

    shas = make_repo(tmp_path / "repo")
    machine = Unbuildable(SteadyMachine(shas, 13, lies_from=CULPRIT), {shas[BROKEN - 1]})
    said: list[str] = []
    result = _bisection(tmp_path, shas, machine, rid="a0000002", say=said.append).run()
    assert result.culprit.sha == shas[12] and result.confirmation.verdict == "confirmed"
    assert result.confirmation.parent == shas[11]
    corrected = [s for s in result.steps if s.corrected]
    assert [(s.commit, s.verdict) for s in corrected] == [(shas[11], "good")]     # this pass's path
    text = "\n".join(said)
    for commit in (shas[CULPRIT - 1], shas[11]):
        assert f"the confirmation refuted {commit[:12]} against " in text, text
        assert f"{commit[:12]} measured again: good (P(bad)=" in text, text
        assert "its step said bad; bisecting again with it good" in text
    assert text.count("confirmation: refuted") == 2 and text.count("confirmation: confirmed") == 1
    # The skipped commit is not tried again, nor said again.
    assert text.count("skipped (--build failed") == 1
    stored = json.loads(Path(result.record.path).read_text())
    assert stored["result"]["state"] == "culprit"
    assert any(s["corrected"] and s["commit"] == shas[11] for s in stored["steps"])
    cli._print(result)
    out = capfd.readouterr().out
    assert f"first bad commit: {shas[12]}" in out
    assert (f"  {shas[11][:12]} measured again in pairs with good after a refuted confirmation: good (P(bad)="
            in out and "its first runs said bad" in out), out
    assert f"its parent {shas[11][:12]} judged good: P(bad)=0.00" in out, out


def test_the_confirmation_still_refuses_a_wrong_first_measured_bad_commit(tmp_path, capfd):
    """Really slower only at the bad end (commit 16); during the steps commits 11 on looked slow.
    Two passes after the first correct commits 11 and 12; the third pass's culprit, 13, is refuted
    as well, and no more passes are made: nothing is named."""
    from perflab.cli import bisect as cli

    shas = make_repo(tmp_path / "repo")
    machine = Unbuildable(SteadyMachine(shas, 16, lies_from=CULPRIT), {shas[BROKEN - 1]})
    result = _bisection(tmp_path, shas, machine, rid="a0000003").run()
    assert result.culprit is None
    assert result.unconfirmed.sha == shas[12]
    assert result.confirmation.verdict == "refuted"
    assert json.loads(Path(result.record.path).read_text())["result"]["state"] == "unconfirmed"
    cli._print(result)
    out = capfd.readouterr().out
    assert f"could not confirm a first bad commit: git bisect named {shas[12]}" in out
    assert "refuted: it is at its parent's level" in out


def test_the_robot_names_the_culprit_and_says_in_one_line_what_it_could_also_be(tmp_path):
    from perflab.automate import robot
    from perflab.jobs.job import AtomicJob
    from perflab.store import open_store

    shas = make_repo(tmp_path / "repo")
    store = open_store(str(tmp_path / "perflab.db"))
    job = AtomicJob("cmd", {"argv": ["./prog"], "metrics": [{"name": METRIC, "pattern": "json:ms", "unit": "ms"}]},
                    runs=3)
    machine = Unbuildable(ExactMachine(shas, CULPRIT), {shas[BROKEN - 1]})
    finding = robot.Finding("cmd", METRIC, shas[0], shas[-1], 0.03, "change point")
    said: list[str] = []
    sha, base, head, also, _kind, _exact = robot._culprit(store, tmp_path / "repo", finding, shas, [job], "", "robot-t", None,
                                           said.append, None, machine, given=machine)
    assert sha == shas[CULPRIT - 1] and base.endswith(f"commit={shas[0]}") and head.endswith(f"commit={sha}")
    assert also == (f"The bisection could not test {shas[BROKEN - 1][:12]} (it did not build or run): the first "
                    "bad commit could also be that one.")
    assert "\n" not in also and any(line.endswith(also) for line in said)


def test_the_robot_says_why_it_names_no_culprit_when_the_confirmation_did_not_hold_up(tmp_path):
    """Review of the rechecks: a robot whose bisection ended unconfirmed said "without a single
    culprit (0 candidates left by skipped commits)", as if skips were why."""
    from perflab.automate import robot
    from perflab.jobs.job import AtomicJob
    from perflab.store import open_store

    shas = make_repo(tmp_path / "repo")
    store = open_store(str(tmp_path / "perflab.db"))
    job = AtomicJob("cmd", {"argv": ["./prog"], "metrics": [{"name": METRIC, "pattern": "json:ms", "unit": "ms"}]},
                    runs=3)
    machine = Unbuildable(SteadyMachine(shas, 16, lies_from=CULPRIT), {shas[BROKEN - 1]})
    finding = robot.Finding("cmd", METRIC, shas[0], shas[-1], 0.05, "change point")
    said: list[str] = []
    sha, *_ = robot._culprit(store, tmp_path / "repo", finding, shas, [job], "", "robot-u", None, said.append, None,
                             machine, given=machine)
    assert sha is None
    line = next(line for line in said if "ended without a culprit" in line)
    assert f"git bisect named {shas[12][:12]}, which its confirmation did not hold up (refuted)" in line, said

"""The bisection's result as values (perflab.core.bisection), its text (perflab.report.bisect), the
records of earlier versions, and "did not boot" carried as a type from the runner and a lab box.

No git, no builds, no processes: hand-made values, a record written as an earlier version wrote
it, and the runner's and the lab's answers faked at their seams.
"""

from __future__ import annotations

import json
import math

import pytest

from perflab.automate import bisect
from perflab.automate.lab import client
from perflab.automate.measurer import BoxMeasurer, KernelFailed, KernelSpec, Measured, run_in_guest
from perflab.core.bisection import (
    BisectionResult,
    Commit,
    Confirmation,
    EndsChange,
    Evidence,
    ExactEnds,
    Skip,
    SkipCause,
    StepRecord,
    UntestedCommit,
)
from perflab.execution.targets import BootFailure
from perflab.report.bisect import render, step_line

GOOD, BAD, C1, C2, C3 = ("a" * 40, "b" * 40, "c" * 40, "d" * 40, "e" * 40)

# A record as the version before typed skips wrote it (f6ad2fe .. 176fcd1): skips are their
# messages alone, steps carry no cause, the result is a dict of dicts.
OLD_RECORD = {
    "id": "0ld0ld00", "repo": "/src/linux", "good": GOOD, "bad": BAD, "build": "make -j2 bzImage",
    "job": {"benchmark": "cmd", "params": {"argv": ["./prog"]}, "runs": 1}, "metric": "loop.ms",
    "tag": "bisect-0ld0ld00", "direction": -1, "unit": "ms", "box": None, "build_timeout": None,
    "broker": None, "source_url": None, "kernel": None,
    "settings": {"alpha": 0.005, "threshold": 0.01, "pairing": "auto"}, "status": "running",
    "skips": {
        C1: "--build failed: exit status 2: error: unknown type name 'x'",
        C2: "kernel of dddddddddddd did not boot: QEMU could not boot kernel bzImage: no HELLO in 60 s",
        C3: "./prog exited with status 1\nSegmentation fault",
    },
    "steps": [
        {"commit": C1, "verdict": "skip", "n": 0, "llr": 0.0, "p_bad": None, "position": None, "forced": False,
         "drift": False, "why": "--build failed: exit status 2: error: unknown type name 'x'"},
        {"commit": C2, "verdict": "skip", "why": "kernel of dddddddddddd did not boot: QEMU could not boot kernel "
         "bzImage: no HELLO in 60 s", "console": "Kernel panic - not syncing"},
        {"commit": C3, "verdict": "good", "n": 3, "llr": -6.1, "p_bad": 0.002, "position": 0.01, "local": True},
    ],
    "result": None, "created": "2026-11-20T10:00:00",
}


def test_a_record_of_an_earlier_version_loads_with_typed_skips_and_steps(tmp_path):
    path = tmp_path / "0ld0ld00.json"
    path.write_text(json.dumps(OLD_RECORD))
    rec = bisect.Record.load(path)
    # What failed is derived once, here, from the messages an earlier version kept.
    assert rec.skips[C1] == Skip(OLD_RECORD["skips"][C1], SkipCause.BUILD)
    assert rec.skips[C2].cause == SkipCause.BOOT
    assert rec.skips[C3].cause == SkipCause.RUN and rec.skips[C3].why.startswith("./prog exited")
    assert [type(s) for s in rec.steps] == [StepRecord] * 3
    assert [s.cause for s in rec.steps] == [SkipCause.BUILD, SkipCause.BOOT, None]
    assert rec.steps[1].console == "Kernel panic - not syncing" and rec.steps[2].n == 3
    # Saved again, it is in the new form, and reads back the same.
    rec.save()
    saved = json.loads(path.read_text())
    assert saved["skips"][C2] == {"why": OLD_RECORD["skips"][C2], "cause": "boot", "console": ""}
    assert saved["steps"][0]["cause"] == "build" and "local" not in saved["steps"][2]
    again = bisect.Record.load(path)
    assert again.skips == rec.skips and again.steps == rec.steps


def _result(**changes) -> BisectionResult:
    base = dict(
        id="cafe0001", repo="/src/prog", metric="loop.ms", tag="bisect-cafe0001", good=GOOD, bad=BAD, alpha=0.005,
        ends=EndsChange(0.05, (0.03, 0.07), 2e-6, 0.02, 5, 5), culprit=None, candidates=[], evidence=None,
        log="git bisect start\n# good: [aaaa] c0\n", runs_used=24, commits_measured=5, steps=[], skipped=2)
    return BisectionResult(**{**base, **changes})


def test_no_single_first_bad_commit_lists_the_candidates():
    result = _result(candidates=[Commit(C1, "change 1", "A <a@example.org>", "2026-11-01"),
                                 Commit(C2, "change \x1b[31m2", "B <b@example.org>", "2026-11-02")])
    assert result.state == "candidates"
    assert render(result) == (
        "bisection cafe0001 of loop.ms in /src/prog (runs tagged bisect-cafe0001)\n"
        f"ends: good {GOOD[:12]} -> bad {BAD[:12]}: +5.00% [+3.00%, +7.00%] (p=2e-06, n=5+5; could detect "
        "2% with 90% power)\n"
        "no single first bad commit: only skipped commits are left; the first bad commit is one of:\n"
        f"  {C1[:12]} change 1 (A <a@example.org>)\n"
        f"  {C2[:12]} change \\x1b[31m2 (B <b@example.org>)\n"
        "runs: 24 over 5 commits measured (a fixed 10 runs per commit would take 50); 2 commits skipped\n"
        "git bisect log:\n"
        "  git bisect start\n"
        "  # good: [aaaa] c0\n")


def test_what_an_untested_commit_could_not_do_is_its_cause_not_its_message():
    culprit = Commit(C3, "change 3", "A <a@example.org>", "2026-11-03")
    # A lab box's or a resumed message need not say "did not boot": the cause does.
    also = [UntestedCommit(C1, "change 1", "A", "d", why="QEMU: no HELLO in 60 s", cause=SkipCause.BOOT),
            UntestedCommit(C2, "change 2", "A", "d", why="--build failed: exit status 2\nmore", cause=SkipCause.BUILD)]
    exact = ExactEnds(0.0001, 0.0003, True, 1e6, 1.03e6)
    evidence = Evidence(2, 1, [1.03e6], 1e6, 1.03e6, 0.03, (0.0299, 0.0301), math.nan, "regression", 0.0003,
                        C2, False, exact=True, resolution=0.0001)
    refuted = Confirmation("refuted", C2, C3, change=0.0001, ends_change=0.03, exact=True, bar=0.0003)
    result = _result(culprit=None, unconfirmed=culprit, ambiguous_with=also, evidence=evidence, exact=exact,
                     confirmation=refuted, ends=EndsChange(0.03, (0.0299, 0.0301), math.nan, 0.01, 2, 2))
    assert result.state == "unconfirmed"
    lines = render(result).splitlines()
    assert lines[1] == (f"ends: good {GOOD[:12]} -> bad {BAD[:12]}: +3.00% (exact: resolution 0.01%, a change is "
                        "called beyond 1%; n=2+2)")
    assert lines[2] == f"could not confirm a first bad commit: the first measured bad commit is {C3}"
    assert lines[5] == f"  could also be: {C1[:12]} change 1 (does not boot: QEMU: no HELLO in 60 s)"
    assert lines[6] == f"  could also be: {C2[:12]} change 2 (does not build: exit status 2)"
    assert lines[7] == "  loop.ms: good 1000000 (n=2) -> 1030000 (n=1): +3.00% ± 0.01% (regression, exact)"
    assert lines[8] == f"  its nearest measured good ancestor {C2[:12]} judged good"
    assert lines[9] == (f"  against its nearest measured good ancestor {C2[:12]}: +0.01% (exact: a change is called "
                        "beyond 0.03%; the ends differ by +3.00%): not beyond the resolution in the ends' direction")


def test_a_step_line_says_the_verdict_and_the_evidence_for_it():
    commit = Commit(C1, "change \x1b]0;x\x07 1", "A", "d")
    step = StepRecord(C1, "bad", 4, 6.2, 0.998, 0.97, forced=True, paired=True)
    assert step_line(3, commit, step, (10, 12)) == (
        f"step 3: {C1[:12]} 'change \\x1b]0;x\\x07 1': bad after 4 runs (P(bad)=0.9980, position +0.97; ends now "
        "n=10+12) (undecided at the run limit: the closer end wins) (paired with good)")
    skipped = StepRecord(C1, "skip", why="kernel of c did not boot", cause=SkipCause.BOOT)
    assert step_line(4, commit, skipped, (10, 12)).endswith(": skipped (kernel of c did not boot)")


# -- "did not boot", typed from the runner and from a lab box -------------------------------

def test_a_guest_that_never_came_up_is_a_kernel_failure_from_the_runners_outcome(monkeypatch, tmp_path):
    from perflab import jobs
    from perflab.runner import loop

    job = bisect.command_job(["./prog"])
    failure = BootFailure("QEMU could not boot kernel bzImage: no HELLO in 60 s", "[    0.1] Kernel panic\n")
    monkeypatch.setattr(jobs, "placed", lambda j, *_a: j)
    monkeypatch.setattr(loop, "run_jobs", lambda *_a, **_k: [loop.JobOutcome(job, error=str(failure),
                                                                             boot_failure=failure)])
    with pytest.raises(KernelFailed) as failed:
        run_in_guest(None, C1, [job], tmp_path / "bzImage", KernelSpec("bzImage", {"mode": "tcg"}), box=None,
                     path=tmp_path)
    assert str(failed.value) == f"kernel of {C1[:12]} did not boot: QEMU could not boot kernel bzImage: no HELLO in 60 s"
    assert failed.value.console_tail == "[    0.1] Kernel panic"
    # A job that failed in a guest that did boot is the benchmark's failure, not the kernel's.
    monkeypatch.setattr(loop, "run_jobs", lambda *_a, **_k: [loop.JobOutcome(job, error="./prog exited with 1")])
    (got,) = run_in_guest(None, C1, [job], tmp_path / "bzImage", KernelSpec("bzImage", {}), box=None, path=tmp_path)
    assert got == Measured("failed", "./prog exited with 1", [], {}, 0)


def test_a_lab_result_carries_the_console_tail_in_a_key_of_its_own_and_the_old_form_still_reads():
    new = {"status": "build-failed", "error": "kernel of cccccccccccc did not boot: panic", "runs": [],
           "boot_failure": {"message": "kernel of cccccccccccc did not boot: panic", "console_tail": "Oops\nend"}}
    got = client.task_result(new, [])
    assert got.boot_failure == BootFailure("kernel of cccccccccccc did not boot: panic", "Oops\nend")
    assert got.error == "kernel of cccccccccccc did not boot: panic"
    # A worker of the version before wrote the tail into the error, after a mark.
    old = {"status": "build-failed", "runs": [],
           "error": "kernel of cccccccccccc did not boot: panic\n--- console tail ---\nOops\nend"}
    assert client.task_result(old, []) == got
    built = client.task_result({"status": "build-failed", "error": "--build failed: exit status 2", "runs": []}, [])
    assert built.boot_failure is None and built.error == "--build failed: exit status 2"


def test_a_box_measurer_raises_a_kernel_failure_from_the_typed_boot_failure(monkeypatch):
    failure = BootFailure("kernel of cccccccccccc did not boot: panic", "Oops")
    answers = [client.TaskResult("build-failed", failure.message, [], failure),
               client.TaskResult("build-failed", "--build failed at cccccccccccc: exit status 2", [])]
    monkeypatch.setattr(client, "run_on_box", lambda *_a, **_k: [answers.pop(0)])
    box = BoxMeasurer(None, broker="redis://x", box="b1", source_url="/src", build_cmd="make",
                      kernel=KernelSpec("bzImage", {}))
    with pytest.raises(KernelFailed) as failed:
        box.measure(C1, [bisect.command_job(["./prog"])])
    assert str(failed.value) == failure.message and failed.value.console_tail == "Oops"
    with pytest.raises(bisect.BuildFailed) as built:
        box.measure(C1, [bisect.command_job(["./prog"])])
    assert not isinstance(built.value, KernelFailed)


def test_a_bisection_records_what_failed_at_a_skipped_commit_by_its_exception(tmp_path):
    from perflab.report.bisect import render as render_text
    from test_bisect_exact import ExactMachine, _exact_bisection, make_repo

    shas = make_repo(tmp_path / "repo")

    class NoBoot:
        """Commit 10's kernel does not boot, and its message does not say so in words."""

        def __init__(self, machine):
            self.machine, self.place = machine, ""

        def measure(self, commit, jobs, *, slot=""):
            if commit == shas[9]:
                raise KernelFailed("QEMU: no HELLO from the agent in 60 s", "[ 0.2] Kernel panic")
            return self.machine.measure(commit, jobs, slot=slot)

        def summary(self, measured):
            return ""

    result = _exact_bisection(tmp_path, shas, NoBoot(ExactMachine(shas, 11))).run()
    assert result.record.skips[shas[9]] == Skip("QEMU: no HELLO from the agent in 60 s", SkipCause.BOOT,
                                                "[ 0.2] Kernel panic")
    (skipped,) = [s for s in result.steps if s.verdict == "skip"]
    assert skipped.cause == SkipCause.BOOT and skipped.console == "[ 0.2] Kernel panic"
    assert [(c.sha, c.cause) for c in result.ambiguous_with] == [(shas[9], SkipCause.BOOT)]
    assert f"  could also be: {shas[9][:12]} commit 10 (does not boot: QEMU: no HELLO" in render_text(result)
    stored = json.loads((tmp_path / "cafe0001.json").read_text())
    assert stored["skips"][shas[9]]["cause"] == "boot" and stored["result"]["ambiguous_with"][0]["cause"] == "boot"

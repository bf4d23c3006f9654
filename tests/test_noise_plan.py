"""The runs `check`, `robot` and `bisect` take, chosen from the stored noise (issue 21 item 3).

An A/A stored through the one runner with a scripted executor (known spread), then
analysis.noise.plan_runs and the bisection's settings from it; and `perflab check` with a real
command, whose stored A/A (made by `perflab noise` itself) changes the runs it takes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from perflab.analysis import noise as stored
from perflab.automate.bisect import Settings
from perflab.automate.bisect.session import _planned
from perflab.runner import loop, recorder
from perflab.store import open_store
from test_noise import BOX, MachineExecutor, fake_job
from test_runner_fast import FakeFamily


@pytest.fixture(autouse=True)
def fixed_environment(monkeypatch):
    monkeypatch.setattr(recorder.environment, "capture", lambda box=None, cc=None: {"testbox": BOX})


@pytest.fixture
def store(tmp_path):
    return open_store(str(tmp_path / "perflab.db"))


def _aa(store, cov: float, rounds: int = 20, noise_id: str = "0000feed"):
    """An A/A of fake.a with independent noise of `cov`, stored as `perflab noise` stores it."""
    base = fake_job(FakeFamily())
    rng = np.random.default_rng(4)
    values = list(1 + cov * rng.standard_normal(2 * rounds))
    sides = [stored.noise_job(base, noise_id, side, rounds) for side in "AB"]
    loop.run_jobs(store, sides, interleave=True, randomise=True, seed=1, executor=MachineExecutor(values), box=BOX)
    return base, stored.latest(store, base, BOX)


def test_the_fewest_offered_runs_that_see_the_change_are_chosen(store):
    base, report = _aa(store, 0.01)
    m = report.metric("fake.a")
    detectable = dict(m.detectable)
    assert detectable[5] > 0.02 > detectable[10]          # 1% noise: 2% needs 10 runs per side
    plan = stored.plan_runs(store, base.with_(runs=3), 0.02, box=BOX)
    assert plan.runs == 10 and not plan.explicit
    assert plan.lines[0].startswith("noise of ") and "with 10 runs per side a 2% change is seen by: fake.a" in plan.lines[0]
    assert plan.lines[1].startswith("10 runs per side, chosen from the stored noise: the fewest of 5/10/20 at "
                                    "which fake.a sees 2%")
    assert stored.plan_runs(store, base, detectable[5] * 1.01, box=BOX).runs == 5
    # No offered count sees 0.3%: the job's own runs stay, and it says so.
    blind = stored.plan_runs(store, base.with_(runs=3), 0.003, box=BOX)
    assert blind.runs is None
    assert any(line.startswith("no run count of 5/10/20 per side lets fake.a (smallest ") for line in blind.lines)
    # An explicit --runs wins, and the line says what the noise would have taken.
    given = stored.plan_runs(store, base, 0.02, runs=7, box=BOX)
    assert given.runs is None and given.explicit
    assert given.lines[1] == "7 runs per side (--runs); the stored noise would take 10"


def test_without_a_stored_aa_it_says_how_to_measure_one(store):
    plan = stored.plan_runs(store, fake_job(FakeFamily()), 0.02, box=BOX, how="perflab noise bench.yaml")
    assert plan.runs is None and plan.report is None
    assert plan.lines == [f"no noise measurement of this job on {BOX}: `perflab noise bench.yaml` would measure "
                          "which metrics can see a 2% change, and how many runs that takes"]


def test_wall_time_that_cannot_see_the_change_points_at_cpu_time_and_instructions():
    m = {name: stored.measure(name, "s", a, b) for name, a, b in (
        ("time.elapsed_time", [1, 1.3, 0.8, 1.2, 0.9] * 4, [1.1, 0.7, 1.3, 0.9, 1.0] * 4),
        ("time.cpu_time", [1, 1.001, 0.999, 1.0005, 0.9995] * 4, [1.0002, 0.9998, 1.001, 0.999, 1] * 4))}
    report = stored.NoiseReport("x", "prog", BOX, 20, 1, 2, None, 0.01, list(m.values()))
    line = stored._blind_line(report, [m["time.elapsed_time"]], 0.01, "bisect")
    assert line.startswith("no run count of 5/10/20 per side lets time.elapsed_time (smallest ")
    assert "time.cpu_time does with 5 (--metric)" in line
    assert "instruction counts see any change with one run (`measure: instructions`" in line


def test_bisect_looks_at_the_ends_when_the_stored_noise_says_it_can_see(store):
    base, _report = _aa(store, 0.01)
    said: list[str] = []
    # --threshold 2%: the look at 5 runs per end cannot see it; the ends are looked at after 10 and 20.
    s = _planned(store, base, "fake.a", Settings(threshold=0.02), None, BOX, said.append, "perflab noise J")
    assert (s.ends_start, s.ends_looks) == (10, 2)
    assert said[0].startswith("stored noise: noise of ") and said[1].startswith("stored noise: 10 runs per side")
    # --runs wins: looks at 7 and 14 runs per end.
    s = _planned(store, base, "fake.a", Settings(threshold=0.02), 7, BOX, said.append, "perflab noise J")
    assert (s.ends_start, s.ends_looks) == (7, 2)
    # No A/A of that job: today's looks (5, 10, 20), and how to measure it.
    said.clear()
    other = fake_job(FakeFamily(), ("b",))
    s = _planned(store, other, "fake.b", Settings(threshold=0.02), None, BOX, said.append, "perflab noise -- ./prog")
    assert (s.ends_start, s.ends_looks) == (5, 3)
    assert said == ["stored noise: no noise measurement of this job on noisebox: `perflab noise -- ./prog` would "
                    "measure which metrics can see a 2% change, and how many runs that takes"]


def test_check_takes_the_runs_its_stored_noise_asks_for(cli, tmp_path):
    job = tmp_path / "job.yaml"
    # A figure the program prints, the same every run: exact, so 2 runs per side see any change.
    job.write_text("benchmark: cmd\nargv: [echo, '{\"v\": 5}']\nruns: 3\n"
                   "metrics:\n  - {name: prog.v, pattern: \"json:v\", unit: ms}\n")
    cli("run", job, "--tag", "base")
    before = cli("check", "--baseline", "base", "--job", job, "--metric", "prog.v").stdout.splitlines()
    assert before[0] == (f"check: no noise measurement of this job on this machine: `perflab noise {job}` would "
                         "measure which metrics can see a 1% change, and how many runs that takes")
    cli("noise", job, "--rounds", "3", "--warmup", "0")
    out = cli("check", "--baseline", "base", "--job", job, "--metric", "prog.v", "--threshold", "2").stdout
    lines = out.splitlines()
    assert lines[0].startswith("check: noise of ") and "prog.v (smallest seen exact" in lines[0]
    assert lines[1] == ("check: 2 runs per side, chosen from the stored noise: the fewest of 5/10/20 at which "
                        "prog.v sees 2% (--runs N to choose)")
    heads = cli.sql("SELECT job FROM run WHERE tag LIKE 'check-%' ORDER BY id")
    assert [json.loads(j)["runs"] for (j,) in heads] == [3, 2]
    # --runs wins over the stored noise.
    out = cli("check", "--baseline", "base", "--job", job, "--metric", "prog.v", "--runs", "4").stdout
    assert "check: 4 runs per side (--runs); the stored noise would take 2" in out
    heads = cli.sql("SELECT job FROM run WHERE tag LIKE 'check-%' ORDER BY id")
    assert json.loads(heads[-1][0])["runs"] == 4


def test_a_parameter_at_its_default_matches_a_job_that_leaves_it_out():
    # `perflab noise -- ./prog` stores shell: false; `perflab bisect -- ./prog` leaves it out.
    spelled = {"benchmark": "cmd", "params": {"argv": ["./prog"], "shell": False}}
    left_out = {"benchmark": "cmd", "params": {"argv": ["./prog"]}}
    assert stored._measured(spelled) == stored._measured(left_out)
    assert stored._measured({"benchmark": "cmd", "params": {"argv": ["./prog"], "shell": True}}) \
        != stored._measured(left_out)

"""`perflab noise`: the A/A statistics on scripted samples, the A/A through the one runner with a
fake executor, the randomised order within rounds (RMIT), and the command once for real."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np
import pytest

from perflab import jobs
from perflab.analysis import noise as stored
from perflab.jobs.job import AtomicJob
from perflab.runner import loop, recorder
from perflab.stats import noise, power
from perflab.store import open_store
from test_runner_fast import FakeFamily, result

BOX = "noisebox"


# -- the statistics ----------------------------------------------------------------

def test_constant_noise_gives_its_cov_no_correlation_no_stretches():
    rng = np.random.default_rng(7)
    a, b = 100 * (1 + 0.02 * rng.standard_normal(40)), 100 * (1 + 0.02 * rng.standard_normal(40))
    m = noise.measure("t", "s", a, b)
    assert 0.015 < m.cov < 0.025
    assert abs(m.serial_correlation) < 0.3 and not m.correlated and m.inflation == 1.0
    assert m.shifts == 0 and not m.stretches and not m.bimodal
    assert abs(m.aa_change) < 0.02
    # The detectable change is stats.power's, from the spread of the logarithms, and falls with n.
    assert dict(m.detectable)[10] == pytest.approx(power.detectable_change(10, 10, m.spread))
    five, ten, twenty = (d for _, d in m.detectable)
    assert five > ten > twenty > 0
    # The runs needed for a change are the fewest that detect it.
    need = m.runs_needed(0.02)
    assert m.detectable_with(need) <= 0.02 < m.detectable_with(need - 1)
    assert m.runs_needed(1e-6) is None   # more than MOST_RUNS


def test_a_level_that_moves_in_stretches_is_detected():
    rng = np.random.default_rng(3)
    level = np.repeat([10.0, 12.0, 10.0], [10, 10, 10])     # the machine switches speed for a while
    a = level * (1 + 0.005 * rng.standard_normal(30))
    b = level * (1 + 0.005 * rng.standard_normal(30))
    m = noise.measure("t", "s", a, b)
    assert m.stretches and m.shifts >= 2
    assert 0.15 < m.shift_size < 0.25
    assert m.bimodal and 0.15 < m.modes_apart < 0.25     # two speeds, 20% apart
    # Without the stretches, the same noise has none.
    flat = noise.measure("t", "s", a / level, b / level)
    assert flat.shifts == 0 and not flat.bimodal


def test_serial_correlation_is_measured_and_widens_the_detectable_change():
    rng = np.random.default_rng(11)

    def ar1(n, phi):
        x = np.zeros(n)
        for i in range(1, n):
            x[i] = phi * x[i - 1] + rng.standard_normal()
        return 100 * (1 + 0.01 * x)

    m = noise.measure("t", "s", ar1(200, 0.8), ar1(200, 0.8))
    assert 0.6 < m.serial_correlation < 0.95 and m.correlated
    assert m.inflation == pytest.approx((1 + m.serial_correlation) / (1 - m.serial_correlation))
    iid = power.detectable_change(10, 10, m.spread)
    assert m.detectable_with(10) == pytest.approx(power.detectable_change(10, 10, m.spread * math.sqrt(m.inflation)))
    assert m.detectable_with(10) > 2 * iid


def test_an_exact_metric_sees_any_change_with_one_run():
    m = noise.measure("instructions", "", [1_234_567.0] * 5, [1_234_567.0] * 5)
    assert m.exact and m.cov == 0 and m.runs_needed(0.001) == 1
    assert all(d == 0 for _, d in m.detectable)
    assert m.serial_correlation == 0 and m.shifts == 0


# -- through the runner, with a fake executor ---------------------------------------

@dataclass
class MachineExecutor:
    """The machine's state over time: the k-th process started gets values[k], whichever side it is."""

    values: list[float]
    calls: list[str] = field(default_factory=list)

    def __call__(self, spec, hooks=None):
        self.calls.append(spec.argv[1])
        return result(self.values[len(self.calls) - 1])


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return open_store(str(tmp_path_factory.mktemp("noise") / "perflab.db"))


@pytest.fixture(autouse=True)
def fixed_environment(monkeypatch):
    monkeypatch.setattr(recorder.environment, "capture", lambda box=None, cc=None: {"testbox": BOX})


def fake_job(family: FakeFamily, items=("a",)) -> AtomicJob:
    return jobs.resolve(AtomicJob("fake", {"items": list(items)}, family=family))


def aa(store, values, rounds, noise_id, items=("a",), seed=1):
    fam = FakeFamily()
    base = fake_job(fam, items)
    sides = [stored.noise_job(base, noise_id, side, rounds) for side in "AB"]
    ex = MachineExecutor(values)
    a, b = loop.run_jobs(store, sides, interleave=True, randomise=True, seed=seed, executor=ex, box=BOX)
    return base, stored.from_runs(store, a.run_id, b.run_id, change=0.05), ex


def test_an_aa_runs_through_the_loop_is_stored_tagged_and_found_again(store):
    rng = np.random.default_rng(5)
    base, report, ex = aa(store, list(1 + 0.01 * rng.standard_normal(24)), 12, "feedc0de")
    assert len(ex.calls) == 24
    runs = store.find_runs(tag="noise-feedc0de")
    assert [r.job["noise"]["side"] for r in runs] == ["A", "B"]
    assert all(r.job["runs"] == 12 for r in runs)
    (m,) = [m for m in report.metrics if m.metric == "fake.a"]
    assert m.rounds == 12 and 0.005 < m.cov < 0.02 and not m.stretches
    assert report.needs["fake.a"] == m.runs_needed(0.05)
    # Found again by the job it measured (any run count), for this box only.
    found = stored.stored_noise(store, base.with_(runs=3), "fake.a", box=BOX)
    assert found is not None and found.cov == m.cov
    assert stored.stored_noise(store, base, "fake.a", box="elsewhere") is None
    assert stored.stored_noise(store, fake_job(FakeFamily(), ("b",)), "fake.b", box=BOX) is None
    lines = stored.before_start(store, [base.with_(runs=10)], 0.05, box=BOX)
    assert len(lines) == 1 and "noise-feedc0de" in lines[0] and "with 10 runs per side" in lines[0]


def test_the_machine_switching_speed_for_a_stretch_shows_on_both_sides(store):
    # 40 processes: the machine is 20% slower for the middle 16, whichever side runs then.
    values = [1.0] * 12 + [1.2] * 16 + [1.0] * 12
    values = [v * (1 + 0.002 * ((i * 7) % 5 - 2)) for i, v in enumerate(values)]
    _, report, _ = aa(store, values, 20, "5eed5eed")
    (m,) = [m for m in report.metrics if m.metric == "fake.a"]
    assert m.stretches and m.shift_size > 0.1
    # The latest A/A of a job is the one returned.
    _, later, _ = aa(store, [1.0 + 0.01 * (i % 3) for i in range(12)], 6, "1a7e1a7e")
    assert stored.latest(store, fake_job(FakeFamily()), box=BOX).noise_id == "1a7e1a7e"


# -- RMIT: the order within rounds ---------------------------------------------------

def test_interleaved_jobs_run_in_a_random_order_within_each_round_both_every_round(store):
    def run(seed):
        fam = FakeFamily()
        both = [fake_job(fam, ("a",)).with_(runs=12), fake_job(fam, ("b",)).with_(runs=12)]
        ex = MachineExecutor([1.0] * 24)
        loop.run_jobs(store, both, interleave=True, randomise=True, seed=seed, executor=ex)
        return [tuple(ex.calls[i:i + 2]) for i in range(0, 24, 2)]

    rounds = run(42)
    assert all(sorted(r) == ["a", "b"] for r in rounds)          # both sides in every round
    assert {r[0] for r in rounds} == {"a", "b"}                  # neither always first
    assert run(42) == rounds                                     # a seed repeats its order
    assert any(run(s) != rounds for s in (1, 2, 3))
    # Without randomise the order is as given, every round.
    fam = FakeFamily()
    ex = MachineExecutor([1.0] * 6)
    loop.run_jobs(store, [fake_job(fam, ("a",)).with_(runs=3), fake_job(fam, ("b",)).with_(runs=3)],
                  interleave=True, executor=ex)
    assert ex.calls == ["a", "b"] * 3


# -- the command, once for real --------------------------------------------------------

def test_perflab_noise_of_a_command(cli):
    out = cli("noise", "--rounds", "3", "--warmup", "0", "--change", "5", "--seed", "1", "--", "true").stdout
    lines = out.splitlines()
    assert lines[0].startswith("noise: A/A of true: runs #1 (A) and #2 (B), tag noise-")
    assert "3 rounds, order randomised within each round" in lines[0]
    header = lines[2].split()
    assert header == ["metric", "mean", "CoV", "lag-1", "stretches", "modes", "A/A", "n=5", "n=10", "n=20"]
    metrics = [line.split()[0] for line in lines[3:8]]
    assert metrics[:2] == ["time.elapsed_time", "time.cpu_time"]
    assert set(metrics) == {"time.elapsed_time", "time.cpu_time", "time.user_time", "time.system_time",
                            "time.maximum_resident_set_size"}
    assert any(line.startswith("for a 5% change, runs per side needed at 90% power: time.elapsed_time ")
               for line in lines)
    tags = cli.sql("SELECT tag, status FROM run ORDER BY id")
    assert len(tags) == 2 and tags[0] == tags[1] and tags[0][0].startswith("noise-") and tags[0][1] == "finished"
    assert cli.sql("SELECT COUNT(*) FROM sample WHERE metric = 'time.elapsed_time'") == [(6,)]


def test_perflab_noise_bad_input_is_one_line(cli, tmp_path):
    from conftest import assert_one_line_error

    assert_one_line_error(cli("noise", check=False), "give a job file")
    assert_one_line_error(cli("noise", "--", "no-such-program-xyz", check=False), "no-such-program-xyz")
    assert_one_line_error(cli("noise", "missing.yaml", check=False), "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("benchmark: cmd\ncommand: true\nrunz: 3\n")
    assert_one_line_error(cli("noise", bad, check=False), "bad.yaml:3", "runz")
    assert_one_line_error(cli("noise", "--rounds", "2", "--", "true", check=False), "--rounds")
    # Nothing half-written: no run was stored by any of them.
    assert not (tmp_path / "perflab.db").exists() or cli.sql("SELECT COUNT(*) FROM run") == [(0,)]


def test_check_says_before_it_starts_what_the_stored_noise_lets_it_see(cli, tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("benchmark: cmd\ncommand: true\nruns: 3\n")
    cli("run", job, "--tag", "base")

    def check(*args):
        # The verdict is on the wall time of `true`, which load moves by far more than 2% (a head of
        # 4.7 ms against a base of 0.96 ms was seen): either verdict is right here, and what this test
        # is about is what check says before it starts. So: exit 0 or 1, a verdict, no traceback.
        proc = cli("check", "--baseline", "base", "--job", job, *args, check=False)
        assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, (proc.returncode, proc.stdout, proc.stderr)
        verdict = "check: REGRESSION in " if proc.returncode else "check: no significant regression in "
        assert any(line.startswith(verdict) for line in proc.stdout.splitlines()), proc.stdout
        return proc.stdout

    before = check()
    assert "noise of" not in before          # no A/A stored: how to measure one, in one line
    assert before.startswith(f"check: no noise measurement of this job on this machine: `perflab noise {job}`")
    cli("noise", job, "--rounds", "3", "--warmup", "0")
    out = check("--threshold", "2").splitlines()
    assert out[0].startswith("check: noise of true (noise-")
    assert re.search(r"with (3|5|10|20) runs per side a 2% change is seen by: ", out[0])
    assert "time.elapsed_time (smallest seen " in out[0] and "time.cpu_time (smallest seen " in out[0]
    first_run = next(i for i, line in enumerate(out) if line.startswith("run #"))
    assert first_run >= 2 and all(line.startswith("check: ") for line in out[:first_run])   # said before the work

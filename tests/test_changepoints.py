"""Change points: the method on fixtures with known answers, and `perflab detect` on real stores."""

from __future__ import annotations

import json
import math
import subprocess

import numpy as np
import pytest

from conftest import assert_one_line_error
from perflab.core.model import HIGHER_IS_BETTER, LOWER_IS_BETTER, Sample
from perflab.analysis.series import IMPROVEMENT, REGRESSION, kind
from perflab.stats import changepoints
from perflab.stats.changepoints import detect
from perflab.store import open_store


def noisy(levels, cov=0.02, seed=0):
    """The levels with multiplicative noise of the given CoV (deterministic)."""
    rng = np.random.default_rng(seed)
    levels = np.asarray(levels, dtype=float)
    return levels * (1 + cov * rng.standard_normal(levels.size))


def steps(n, at, factors, base=100.0):
    """A piecewise-constant level: `base` until at[0], then times each factor in turn."""
    level = np.full(n, base)
    for i, f in zip(at, factors):
        level[i:] *= f
    return level


def indices(found):
    return [c.index for c in found.change_points]


# -- the method -----------------------------------------------------------------

def test_one_step_found_with_its_figures():
    x = noisy(steps(120, [70], [1.08]), seed=1)
    found = detect(x)
    assert len(found.change_points) == 1
    c = found.change_points[0]
    assert abs(c.index - 70) <= 2
    assert 0.06 < c.change < 0.10 and c.ci[0] < c.change < c.ci[1]
    assert c.ci[0] > 0.03                      # the interval excludes no change by a margin
    assert c.p_value < 1e-6
    assert c.before.n + c.after.n == 120 and abs(c.before.n - 70) <= 2
    assert 95 < c.before.mean < 105 and 103 < c.after.mean < 113
    assert 0.5 < c.before.stddev < 4 and 0.5 < c.after.stddev < 4
    assert 0 < c.detectable < 0.03              # 2% noise, ~50 points a side: ~1.5% is visible
    assert c.test == "t-log"
    assert kind(c.change, LOWER_IS_BETTER) == REGRESSION
    assert kind(c.change, HIGHER_IS_BETTER) == IMPROVEMENT


def test_two_steps_close_together_and_opposite():
    # Up by 5% for 25 points and back: one split alone barely pays; both must be found.
    x = noisy(steps(300, [140, 165], [1.05, 1 / 1.05]), seed=2)
    assert [abs(i - t) <= 3 for i, t in zip(indices(detect(x)), (140, 165))] == [True, True]


def test_three_small_steps_at_two_percent_noise():
    x = noisy(steps(500, [100, 250, 400], [1.03, 0.97, 1.04]), seed=3)
    found = indices(detect(x))
    assert len(found) == 3
    assert all(abs(i - t) <= 5 for i, t in zip(found, (100, 250, 400)))


def test_spikes_are_never_change_points():
    x = noisy(np.full(300, 50.0), seed=4)
    for i, factor in ((10, 1.5), (80, 0.6), (81, 0.6), (150, 1.2), (299, 1.4), (0, 0.7), (220, 1.35)):
        x[i] *= factor                          # single spikes, a two-point spike, spikes at both ends
    found = detect(x)
    assert found.change_points == []
    assert {10, 80, 81, 150, 220, 299, 0} <= set(found.outliers)


def test_spike_beside_a_step_leaves_the_step():
    x = noisy(steps(200, [100], [0.9]), seed=5)
    x[97] *= 1.4
    x[103] *= 0.6
    assert [abs(i - 100) <= 2 for i in indices(detect(x))] == [True]


def test_a_level_needs_min_points():
    base = noisy(np.full(60, 10.0), cov=0.01, seed=6)
    three = base.copy()
    three[-3:] *= 1.3
    two = base.copy()
    two[-2:] *= 1.3
    assert indices(detect(three)) == [57]       # three points at a new level are a level
    assert indices(detect(two)) == []           # two are a spike
    assert indices(detect(two, min_size=2)) == [58]


def test_slow_drift_is_not_a_step():
    x = noisy(np.linspace(100, 110, 400), seed=7)
    assert indices(detect(x)) == []


def test_no_change_says_what_it_could_have_seen():
    found = detect(noisy(np.full(500, 3.0), seed=8))
    assert found.change_points == []
    assert 0.005 < found.detectable_mid < 0.02       # 250 points a side at 2% noise
    assert found.detectable_mid < found.detectable_end < 0.2
    assert not found.blind
    few = detect(noisy(np.full(8, 3.0), cov=0.05, seed=8))
    assert few.change_points == [] and few.blind and few.detectable_mid > 0.05


def test_null_series_give_no_false_alarms():
    calls = sum(len(detect(noisy(np.full(500, 100.0), seed=100 + s)).change_points) for s in range(20))
    assert calls == 0


def test_two_mode_noise_is_not_a_level():
    # Placement on a 2-CPU VM: each run lands at ~6 or ~11 us at random. Setting the
    # "minority" runs aside as spikes would invent levels; they are the noise.
    rng = np.random.default_rng(14)
    calls = 0
    for _ in range(10):
        x = np.where(rng.random(300) < 0.5, 6.0, 11.0) * (1 + 0.02 * rng.standard_normal(300))
        found = detect(x)
        calls += len(found.change_points)
        assert len(found.outliers) < 0.05 * 300
    assert calls == 0


def ar1(rng, n, rho):
    e = np.zeros(n)
    for i in range(1, n):
        e[i] = rho * e[i - 1] + rng.standard_normal()
    return e


def test_wandering_noise_is_not_a_level_but_a_step_in_it_is():
    rng = np.random.default_rng(15)
    calls = sum(len(detect(100 * (1 + 0.02 * ar1(rng, 500, 0.5))).change_points) for _ in range(10))
    assert calls == 0
    x = 100 * (1 + 0.02 * ar1(rng, 400, 0.5))
    x[250:] *= 1.06
    found = detect(x)
    assert [abs(i - 250) <= 2 for i in indices(found)] == [True]
    assert 0.2 < found.serial_correlation < 0.7
    assert detect(noisy(np.full(500, 1.0), seed=16)).serial_correlation == 0.0


@pytest.mark.parametrize("values", [[], [5.0], [5.0, 6.0], [1.0] * 5])
def test_tiny_series(values):
    found = detect(values)
    assert found.change_points == [] and found.n == len(values)


def test_constant_series_without_noise():
    found = detect([7.0] * 100)
    assert found.change_points == [] and found.noise == 0 and found.outliers == []
    assert found.detectable_mid == 0.0
    stepped = detect([7.0] * 60 + [7.7] * 40)
    assert indices(stepped) == [60]
    c = stepped.change_points[0]
    assert c.p_value == 0.0 and math.isclose(c.change, 0.1) and c.before.stddev == 0.0
    assert detect([0.0] * 50).change_points == []      # zero everywhere: no scale, no change


def test_values_not_all_positive_use_raw_values():
    x = noisy(steps(100, [50], [3.0], base=-1.0), cov=0.02, seed=9)   # -1 then -3
    found = detect(x)
    assert indices(found) == [50]
    assert found.change_points[0].test == "t"
    assert -2.2 < found.change_points[0].change < -1.8   # -1 to -3: down by twice |before|


def test_labelled_histories_meet_the_quality_target():
    """A small slice of tools/bench/changepoints.py's data: 20 series with steps and spikes."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent.parent / "tools" / "bench"))
    import changepoints as bench

    tp = fp = fn = 0
    for data in (bench.dataset(7, 5, spikes=False), bench.dataset(1007, 5, spikes=True)):
        for values, truth, spiked in data:
            a, b, c, _ = bench.score(truth, bench.perflab_method(values), spiked)
            tp, fp, fn = tp + a, fp + b, fn + c
    assert tp / (tp + fp) >= 0.97 and tp / (tp + fn) >= 0.97, (tp, fp, fn)


def test_cli_defaults_are_the_methods():
    from perflab.cli import detect as cli_detect

    assert cli_detect.ALPHA == changepoints.ALPHA
    assert cli_detect.MIN_POINTS == changepoints.MIN_SIZE
    assert cli_detect.THRESHOLD_PCT == changepoints.MIN_EFFECT * 100


# -- the command on real stores --------------------------------------------------

def add_run(store, metrics: dict, commit=None, dirty=None, params=None, box="box"):
    """One finished run; metrics: name -> (unit, direction, [samples])."""
    run = store.create_run(box=box, environment={"testbox": box}, benchmark="bench", name="bench",
                           params=params or {"mode": "process"}, commit=commit, dirty=dirty)
    for name, (unit, direction, values) in metrics.items():
        store.add_samples(run, 0, [Sample(name, float(v), unit, direction) for v in values])
    store.finish_run(run, "finished")
    return run


def test_detect_by_time(cli):
    store = open_store(str(cli.db))
    rng = np.random.default_rng(11)
    ids = []
    for i in range(40):
        slow = 1.12 if i >= 25 else 1.0
        ids.append(add_run(store, {
            "bench.time": ("s", LOWER_IS_BETTER, 2.0 * slow * (1 + 0.02 * rng.standard_normal(3))),
            "bench.ops": ("ops/s", HIGHER_IS_BETTER, 500 * (1 + 0.02 * rng.standard_normal(3))),
        }))
    out = json.loads(cli("detect", "--style", "json").stdout)
    assert out["order"] == "time" and out["runs"] == 40 and out["skipped"] == []
    by_metric = {s["metric"]: s for s in out["series"]}
    assert set(by_metric) == {"bench.time", "bench.ops"}
    assert by_metric["bench.ops"]["change_points"] == []
    assert 0 < by_metric["bench.ops"]["detectable_mid"] < 0.05
    (c,) = by_metric["bench.time"]["change_points"]
    assert c["kind"] == "regression" and c["index"] == 25
    assert c["at"]["runs"] == [ids[25]] and c["previous"]["runs"] == [ids[24]]
    assert 0.09 < c["change"] < 0.15 and c["ci95"][0] < c["change"] < c["ci95"][1]
    assert c["before"]["n"] == 25 and c["after"]["n"] == 15 and c["p_value"] < 1e-6
    assert 0 < c["detectable"] < 0.05

    text = cli("detect", "--metric", "bench.time").stdout
    assert "ordered by run start time" in text and "bench.ops" not in text
    assert "REGRESSION" in text and f"at run #{ids[25]}" in text and f"previous run #{ids[24]}" in text
    assert "p=" in text and "detectable" in text

    # --since later than every run: no series, said on stderr, not an error
    none = cli("detect", "--since", "2999-01-01")
    assert "0 series" in none.stdout and "no series" in none.stderr


def git(repo, *args) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org", "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout.strip()


def test_detect_by_first_parent_order(cli, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    shas = []
    for i in range(30):
        (repo / "f").write_text(f"{i}\n")
        git(repo, "add", "f")
        git(repo, "commit", "-q", "-m", f"change {i}")
        shas.append(git(repo, "rev-parse", "HEAD"))
    git(repo, "checkout", "-q", "-b", "side", shas[10])
    (repo / "g").write_text("side\n")
    git(repo, "add", "g")
    git(repo, "commit", "-q", "-m", "side work")
    side = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "main")

    store = open_store(str(cli.db))
    rng = np.random.default_rng(12)
    # Runs recorded in shuffled commit order: time order is meaningless, commit order is not.
    order = rng.permutation(30)
    for i in order:
        level = 1.0 if i < 20 else 0.9        # a 10% speed-up from commit 20 on
        add_run(store, {"bench.time": ("s", LOWER_IS_BETTER, level * (1 + 0.01 * rng.standard_normal(3)))},
                commit=shas[i])
    add_run(store, {"bench.time": ("s", LOWER_IS_BETTER, [1.0, 1.0, 1.0])}, commit=shas[5])   # a second run: pooled
    add_run(store, {"bench.time": ("s", LOWER_IS_BETTER, [1.0, 1.0])}, commit=shas[7][:10])  # abbreviated (an import)
    skipped = [add_run(store, {"bench.time": ("s", LOWER_IS_BETTER, [5.0] * 3)}, commit=side),
               add_run(store, {"bench.time": ("s", LOWER_IS_BETTER, [5.0] * 3)}, commit=shas[3], dirty=True),
               add_run(store, {"bench.time": ("s", LOWER_IS_BETTER, [5.0] * 3)})]

    out = json.loads(cli("detect", "--repo", repo, "--branch", "main", "--style", "json").stdout)
    assert out["order"] == "commit" and out["branch"] == "main"
    assert [s["run"] for s in out["skipped"]] == skipped
    reasons = " ".join(s["reason"] for s in out["skipped"])
    assert "not on the first-parent history of main" in reasons and "uncommitted" in reasons and "no commit" in reasons
    (series,) = out["series"]
    assert series["points"] == 30            # one point per commit, the two runs at commit 5 pooled
    (c,) = series["change_points"]
    assert c["kind"] == "improvement" and c["index"] == 20
    assert c["at"]["commit"] == shas[20] and c["at"]["subject"] == "change 20"
    assert c["previous"]["commit"] == shas[19]
    assert -0.12 < c["change"] < -0.08

    text = cli("detect", "--repo", repo).stdout       # HEAD's branch by default
    assert "first-parent history of main" in text
    assert f'at {shas[20][:12]} "change 20"' in text and f"previous {shas[19][:12]}" in text
    assert "skipped 3 runs" in text

    # by time the same store is a shuffle: the level change is not where commit 20 is
    by_time = json.loads(cli("detect", "--style", "json").stdout)
    assert by_time["order"] == "time" and by_time["skipped"] == []

    # the points keep their runs and every sample
    from perflab.analysis import series

    (s,) = series.build(store, repo=str(repo), branch="main").series
    assert [p.commit for p in s.points] == shas
    assert len(s.points[5].run_ids) == 2 and len(s.points[5].samples) == 6 and len(s.points[5].run_means) == 2
    assert len(s.points[7].run_ids) == 2 and len(s.points[7].samples) == 5
    assert s.points[5].value == pytest.approx(sum(s.points[5].run_means) / 2)


def detect_in_process(capsys, db, *args) -> subprocess.CompletedProcess:
    """`perflab detect ARGS` through the CLI's own entry point, in this process (no
    interpreter start-up per case); shaped like a finished subprocess."""
    from perflab.cli import main

    capsys.readouterr()
    rc = main(["detect", "--db", str(db), *map(str, args)])
    out = capsys.readouterr()
    return subprocess.CompletedProcess(["perflab", "detect", *args], rc, out.out, out.err)


def test_detect_bad_input(cli, tmp_path, capsys):
    db = cli.db
    open_store(str(db))
    # one through the installed command, the rest in-process
    assert_one_line_error(cli("detect", "--repo", tmp_path / "nowhere", check=False), "--repo", "no such directory")
    plain = tmp_path / "plain"
    plain.mkdir()
    assert_one_line_error(detect_in_process(capsys, db, "--repo", plain), "not a git repository")
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    assert_one_line_error(detect_in_process(capsys, db, "--repo", repo), "no commits")
    git(repo, "commit", "-q", "--allow-empty", "-m", "one")
    assert_one_line_error(detect_in_process(capsys, db, "--repo", repo, "--branch", "nosuch"), "--branch nosuch", "no such branch")
    assert_one_line_error(detect_in_process(capsys, db, "--branch", "main"), "--branch needs --repo")
    assert_one_line_error(detect_in_process(capsys, db, "--since", "last tuesday"), "--since", "not a date")
    assert_one_line_error(detect_in_process(capsys, db, "--alpha", "2"), "--alpha")

    store = open_store(str(db))
    add_run(store, {"bench.time": ("s", LOWER_IS_BETTER, [1.0, 1.1])})
    assert_one_line_error(detect_in_process(capsys, db, "--metric", "bench.tme"), "--metric bench.tme", "bench.time")


def test_detect_says_what_a_short_history_could_not_see(cli, capsys):
    store = open_store(str(cli.db))
    rng = np.random.default_rng(13)
    for i in range(8):
        add_run(store, {"bench.noisy": ("s", LOWER_IS_BETTER, 1.0 * (1 + 0.08 * rng.standard_normal(2))),
                        "bench.count": ("", 0, [100.0 if i < 4 else 130.0] * 2),
                        "bench.exit_status": ("", 0, [0.0])})
    for i in range(2):
        add_run(store, {"bench.short": ("s", LOWER_IS_BETTER, [1.0])}, params={"mode": "thread"})
    short = detect_in_process(capsys, cli.db)
    assert "3 series without a change: 1 blind to 5%, 1 flat, 1 too short to tell" in short.stdout
    proc = detect_in_process(capsys, cli.db, "--verbose")   # each series without a change in full
    assert proc.returncode == 0, proc.stderr
    noisy_line = next(l for l in proc.stdout.splitlines() if "bench.noisy" in l)
    assert "no change in 8 points" in noisy_line and "could not have seen a 5% change" in noisy_line
    assert "too short to tell (2 points" in proc.stdout
    assert "bench.exit_status (informational): constant over 8 points" in proc.stdout
    # an informational metric's level change is a "change", neither regression nor improvement
    count = proc.stdout[proc.stdout.index("bench.count"):]
    assert "informational" in count.splitlines()[0] and count.splitlines()[1].split()[0] == "CHANGE"
    out = json.loads(detect_in_process(capsys, cli.db, "--style", "json").stdout)
    by_metric = {s["metric"]: s for s in out["series"]}
    assert by_metric["bench.noisy"]["blind_to"] == 0.05 and by_metric["bench.count"]["blind_to"] is None
    assert by_metric["bench.exit_status"]["detectable_mid"] == 0.0 and by_metric["bench.exit_status"]["blind_to"] is None
    assert by_metric["bench.count"]["change_points"][0]["kind"] == "change"
    assert by_metric["bench.count"]["change_points"][0]["index"] == 4

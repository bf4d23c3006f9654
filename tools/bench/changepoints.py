#!/usr/bin/env python3
"""Change-point quality and speed: perflab's method against Apache Otava's defaults.

Labelled synthetic histories, made here with fixed seeds: per seed, 20 series of
500 points (one point per run, multiplicative noise of CoV 2%), each with 0-3
steps of 3-15% (random sign) at random positions at least --gap points from each
other and from the ends. Two sets per seed:
  steps          the steps alone;
  steps+spikes   the same with 1-5 single-point spikes of 20-50% (up or down) per
                 series, which must not be called.
A detection within +-5 points of a true step counts (one detection per step);
every other detection is a false one. Precision, recall and the compute time of
20 series are printed per set, for perflab (perflab.stats.changepoints.detect)
and for Otava (otava.series.Series(...).analyze() with AnalysisOptions(): window
50, p < 0.001, magnitude 0: what `otava analyze` does by default).

"perflab, BH across" is what the command does with the 20 series of one store: the p-values
controlled across them (Benjamini-Hochberg), not only within each series.

Then step-free histories with noise of other shapes (two modes, heavy tails,
clustered outliers, serial correlation): every call there is false.

Then the whole `perflab detect` command is timed on a store that holds the 20
series of the first seed's steps+spikes set (500 runs of one benchmark with 20
metrics, three samples per run whose mean is the point): the median of
--command-runs runs against the 1 s target, the floors (the interpreter, the
libraries it cannot do without) and where the time goes inside one process; its
detections are checked against the library's.

    .venv/bin/python tools/bench/changepoints.py [--seeds 5] [--first-seed 1] [--no-otava] [--no-command] [--no-shapes] [--chrt]
                                                 [--command-runs 7] [--against REV]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

from perflab.stats.changepoints import across_series, detect

SERIES, POINTS, COV = 20, 500, 0.02
TOLERANCE = 5


def _free_place(rng: np.random.Generator, taken: list[tuple[int, int]], length: int, gap: int) -> int | None:
    """A start p for an event spanning [p, p + length] at least `gap` from the ends and from every other event."""
    for _ in range(200):
        p = int(rng.integers(gap, POINTS - gap - length + 1))
        if all(p + length + gap <= a or p >= b + gap for a, b in taken):
            return p
    return None


def history(rng: np.random.Generator, gap: int, spikes: bool, excursions: bool = False
            ) -> tuple[np.ndarray, list[int], list[int]]:
    """(values, true step positions, spike positions): one labelled series.

    With `excursions`, besides 0-1 ordinary steps: 1-2 short excursions (the level moves
    by 2.5-3.5%, up or down, and comes back 20-40 points later: two true change points)
    and, in half the series, a pair of steps 8-20 points apart (3-15% each, random signs)."""
    if not excursions:
        return _plain_history(rng, gap, spikes)
    events: list[tuple[int, int]] = []            # spans [first step, last step], kept apart
    factors: list[tuple[int, float]] = []
    sign = lambda: float(rng.choice((-1, 1)))     # noqa: E731
    for _ in range(int(rng.integers(1, 3))):
        length = int(rng.integers(20, 41))
        p = _free_place(rng, events, length, gap)
        if p is not None:
            f = 1 + sign() * rng.uniform(0.025, 0.035)
            events.append((p, p + length))
            factors += [(p, f), (p + length, 1 / f)]
    if rng.random() < 0.5:
        apart = int(rng.integers(8, 21))
        p = _free_place(rng, events, apart, gap)
        if p is not None:
            events.append((p, p + apart))
            factors += [(p, 1 + sign() * rng.uniform(0.03, 0.15)), (p + apart, 1 + sign() * rng.uniform(0.03, 0.15))]
    for _ in range(int(rng.integers(0, 2))):
        p = _free_place(rng, events, 0, gap)
        if p is not None:
            events.append((p, p))
            factors.append((p, 1 + sign() * rng.uniform(0.03, 0.15)))
    level = np.full(POINTS, 100.0)
    for p, f in factors:
        level[p:] *= f
    return _noise(rng, level, sorted(p for p, _ in factors), spikes)


def _plain_history(rng: np.random.Generator, gap: int, spikes: bool) -> tuple[np.ndarray, list[int], list[int]]:
    """0-3 steps of 3-15% at least `gap` apart (the draws of the sets measured before excursions existed)."""
    steps = int(rng.integers(0, 4))
    positions: list[int] = []
    while len(positions) < steps:
        p = int(rng.integers(gap, POINTS - gap + 1))
        if all(abs(p - q) >= gap for q in positions):
            positions.append(p)
    positions.sort()
    level = np.full(POINTS, 100.0)
    for p in positions:
        level[p:] *= 1 + rng.choice((-1, 1)) * rng.uniform(0.03, 0.15)
    return _noise(rng, level, positions, spikes)


def _noise(rng: np.random.Generator, level: np.ndarray, positions: list[int], spikes: bool):
    """The level times lognormal noise of CoV COV, with 1-5 spikes of 20-50% when asked."""
    sigma = np.sqrt(np.log(1 + COV * COV))
    values = level * rng.lognormal(-sigma * sigma / 2, sigma, POINTS)
    spiked: list[int] = []
    if spikes:
        for i in rng.choice(POINTS, size=int(rng.integers(1, 6)), replace=False):
            factor = rng.uniform(0.2, 0.5)
            values[i] *= (1 + factor) if rng.random() < 0.5 else (1 - factor)
            spiked.append(int(i))
    return values, positions, sorted(spiked)


def dataset(seed: int, gap: int, spikes: bool, excursions: bool = False):
    rng = np.random.default_rng(seed)
    return [history(rng, gap, spikes, excursions) for _ in range(SERIES)]


def score(truth: list[int], found: list[int], spiked: list[int]) -> tuple[int, int, int, int]:
    """(true positives, false positives, false negatives, false positives at a spike)."""
    unmatched = sorted(found)
    tp = 0
    for t in truth:
        near = [f for f in unmatched if abs(f - t) <= TOLERANCE]
        if near:
            unmatched.remove(min(near, key=lambda f: abs(f - t)))
            tp += 1
    at_spike = sum(1 for f in unmatched if any(abs(f - s) <= 2 for s in spiked))
    return tp, len(unmatched), len(truth) - tp, at_spike


def perflab_method(values: np.ndarray) -> list[int]:
    return [c.index for c in detect(values).change_points]


def perflab_across_series(series: list[np.ndarray]) -> list[list[int]]:
    """What `perflab detect` does with the 20 series of one store: each detected, then the
    p-values controlled across them (Benjamini-Hochberg at alpha over every candidate of
    every series, changepoints.across_series); a series holding a change point above the
    cutoff is detected again at the cutoff (analysis.series.analyse)."""
    found = [detect(values) for values in series]
    cutoff = across_series(found)
    return [[c.index for c in (detect(values, alpha=cutoff) if any(c.p_value > cutoff for c in d.change_points)
                               else d).change_points] for values, d in zip(series, found)]


perflab_across_series.per_set = True


def otava_method():
    try:
        from otava.series import AnalysisOptions, Metric, Series
    except ImportError as e:
        return None, f"apache-otava is not installed ({e}); `.venv/bin/pip install apache-otava` to compare"

    def run(values: np.ndarray) -> list[int]:
        series = Series("bench", None, list(range(values.size)), {"m": Metric(1, 1.0)},
                        {"m": [float(v) for v in values]}, {})
        return sorted(cp.index for cp in series.analyze(AnalysisOptions()).change_points["m"])

    return run, None


def evaluate(method, sets) -> dict:
    tp = fp = fn = spike_fp = 0
    seconds, cpu = [], []
    for data in sets:
        start, start_cpu = time.perf_counter(), time.process_time()
        found = (method([values for values, _, _ in data]) if getattr(method, "per_set", False)
                 else [method(values) for values, _, _ in data])
        seconds.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        for (values, truth, spiked), f in zip(data, found):
            a, b, c, d = score(truth, f, spiked)
            tp, fp, fn, spike_fp = tp + a, fp + b, fn + c, spike_fp + d
    return {"precision": tp / (tp + fp) if tp + fp else 1.0, "recall": tp / (tp + fn) if tp + fn else 1.0,
            "tp": tp, "fp": fp, "fn": fn, "spike_fp": spike_fp,
            "seconds_per_20": float(np.median(seconds)), "seconds_max": float(max(seconds)),
            "cpu_per_20": float(np.median(cpu)), "cpu_max": float(max(cpu))}


def placement_ceiling(sets) -> tuple[float, float]:
    """Shares of the true change points placed within TOLERANCE when the true segmentation is
    given: (each edge at the least-squares split between its true neighbours, pairs jointly;
    then moved as perflab reports it, to the middle of the most likely window,
    changepoint_placement.settle), on the logarithms with spikes replaced by their local
    median. The first is the ceiling of any method that places edges at the best fit; a
    misplaced edge is both a miss and a false call, so it bounds precision too."""
    from perflab.stats import changepoint_placement, changepoints

    near = [0, 0]
    total = 0
    for data in sets:
        for values, truth, _ in data:
            x = np.log(values)
            outlier, local = changepoints.spikes(x, changepoints.robust_sigma(x))
            z = np.where(outlier, local, x) / COV
            bounds = [0, *truth, values.size]
            changepoint_placement.refine(z, bounds, changepoints.MIN_SIZE)
            near[0] += sum(abs(b - t) <= TOLERANCE for b, t in zip(bounds[1:-1], truth))
            changepoint_placement.settle(z, bounds, changepoints.MIN_SIZE)
            near[1] += sum(abs(b - t) <= TOLERANCE for b, t in zip(bounds[1:-1], truth))
            total += len(truth)
    return (near[0] / total, near[1] / total) if total else (1.0, 1.0)


def ar1(rng: np.random.Generator, n: int, rho: float) -> np.ndarray:
    e = np.zeros(n)
    for i in range(1, n):
        e[i] = rho * e[i - 1] + rng.standard_normal()
    return e * np.sqrt(1 - rho * rho)   # unit marginal variance


# Histories without any step whose noise is not independent Gaussian: every call is false.
SHAPES = {
    "two modes (6 or 11, placement)": lambda rng: np.where(rng.random(POINTS) < 0.5, 6.0, 11.0)
    * (1 + COV * rng.standard_normal(POINTS)),
    "heavy tails (t, 3 dof)": lambda rng: 100 * (1 + COV * rng.standard_t(3, POINTS)),
    "5% outliers of +15%": lambda rng: 100 * np.exp(COV * rng.standard_normal(POINTS))
    * np.where(rng.random(POINTS) < 0.05, 1.15, 1.0),
    "wander AR(1) 0.3": lambda rng: 100 * (1 + COV * ar1(rng, POINTS, 0.3)),
    "wander AR(1) 0.5": lambda rng: 100 * (1 + COV * ar1(rng, POINTS, 0.5)),
    "wander AR(1) 0.8": lambda rng: 100 * (1 + COV * ar1(rng, POINTS, 0.8)),
}


def noise_shapes(methods: dict) -> None:
    print(f"\nfalse calls on {SERIES} step-free series x {POINTS} points per noise shape (seed 77):")
    print(f"{'noise':34} " + " ".join(f"{name:>20}" for name in methods))
    for shape, make in SHAPES.items():
        rng = np.random.default_rng(77)
        data = [make(rng) for _ in range(SERIES)]
        counts = [sum(len(f) for f in method(data)) if getattr(method, "per_set", False)
                  else sum(len(method(values)) for values in data) for method in methods.values()]
        print(f"{shape:34} " + " ".join(f"{c:>20}" for c in counts))


# Where the time of one `perflab detect` goes, measured inside one process (run as a
# subprocess with the store's path as argv[1]); prints one JSON object of seconds.
PHASES = r"""
import json, sys, time
t = [time.perf_counter()]
import click; t.append(time.perf_counter())
import numpy; t.append(time.perf_counter())
import sqlalchemy; t.append(time.perf_counter())
from perflab.cli import common, detect as cli_detect
from perflab.analysis import series
from perflab.report.detect import STYLES; t.append(time.perf_counter())
from perflab.execution.filesystem import cleanup_stale
from perflab.store import open_store
cleanup_stale(); store = open_store(sys.argv[1]); store.reap_dead_runs(); t.append(time.perf_counter())
history = series.build(store); t.append(time.perf_counter())
results = series.analyse(history, alpha=cli_detect.ALPHA, min_size=cli_detect.MIN_POINTS,
                         min_effect=cli_detect.THRESHOLD_PCT / 100); t.append(time.perf_counter())
text = STYLES["json"](history, results, cli_detect.ALPHA, cli_detect.MIN_POINTS); t.append(time.perf_counter())
names = ["import click", "import numpy", "import SQLAlchemy", "import perflab's detect modules",
         "open the store", "read the samples, build the series", "the method on every series", "the json layout"]
print(json.dumps({n: b - a for n, a, b in zip(names, t, t[1:])}))
"""


def timed_child(argv: list[str], env: dict) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system) of one run of a command, which must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, capture_output=True, check=True, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def _median_seconds(argv: list[str], runs: int, env: dict, other: tuple[list[str], dict] | None = None):
    """(median wall, best wall, median CPU) of `runs` runs of a command; with `other`
    (argv, env), that command too, run alternately with the first (a list of both)."""
    commands = [(argv, env)] + ([other] if other else [])
    walls: list[list[float]] = [[] for _ in commands]
    cpus: list[list[float]] = [[] for _ in commands]
    for _ in range(runs):
        for k, (command, environment) in enumerate(commands):
            wall, cpu = timed_child(command, environment)
            walls[k].append(wall)
            cpus[k].append(cpu)
    figures = [(float(np.median(w)), min(w), float(np.median(c))) for w, c in zip(walls, cpus)]
    return figures if other else figures[0]


def _source_of(rev: str, into: str) -> str:
    """perflab's src/ at git revision `rev` of this checkout, written under `into`: its path."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    archive = subprocess.run(["git", "-C", root, "archive", rev, "src"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    return os.path.join(into, "src")


def time_command(data, prefix: list[str], runs: int, against: str | None = None) -> None:
    """The whole `perflab detect` on a store holding the 20 series (500 runs x 20 metrics),
    `runs` times (median reported); `prefix` runs each timed process under it (chrt: ahead of
    the machine's other jobs). Python's bytecode caches are written by an untimed first run
    (PYTHONDONTWRITEBYTECODE dropped: an installed package has them, and without them every
    run compiles perflab's modules again)."""
    from perflab.core.model import LOWER_IS_BETTER, Sample
    from perflab.store import open_store

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "detect.db")
        store = open_store(db)
        facts = {"testbox": "benchbox"}
        made = time.perf_counter()
        for i in range(POINTS):
            run = store.create_run(box="benchbox", environment=facts, benchmark="synthetic", name="synthetic",
                                   params={})
            samples = []
            for k, (values, _, _) in enumerate(data):
                v = float(values[i])
                # three samples whose mean is the point
                samples += [Sample(f"synthetic.series{k:02d}", x, "s", LOWER_IS_BETTER) for x in (v * 0.995, v, v * 1.005)]
            store.add_samples(run, 1, samples)
            store.finish_run(run, "finished")
        made = time.perf_counter() - made
        perflab = os.path.join(os.path.dirname(sys.executable), "perflab")
        command = [*prefix, perflab, "detect", "--db", db, "--style", "json"]
        proc = subprocess.run(command, capture_output=True, text=True, env=env)   # untimed: writes the caches
        if proc.returncode != 0:
            print(f"perflab detect failed: {proc.stderr.strip()}")
            return
        baseline = None
        if against:
            # the same command from the perflab of another revision, run alternately with this one
            old_env = dict(env, PYTHONPATH=_source_of(against, tmp))
            old_command = [*prefix, sys.executable, "-c", "import sys; from perflab.cli import entry; "
                           "sys.argv[0] = 'perflab'; entry()", *command[len(prefix) + 1:]]
            check = subprocess.run(old_command, capture_output=True, text=True, env=old_env)   # and its caches
            if check.returncode != 0:
                print(f"perflab at {against} cannot run the command: {check.stderr.strip()}")
                against = None
        load_before = os.getloadavg()[0]
        if against:
            (wall, best, cpu), baseline = _median_seconds(command, runs, env, (old_command, old_env))
        else:
            wall, best, cpu = _median_seconds(command, runs, env)
        load_after = os.getloadavg()[0]
        interpreter = _median_seconds([*prefix, sys.executable, "-c", "pass"], 5, env)
        libraries = _median_seconds([*prefix, sys.executable, "-c", "import click, sqlalchemy, numpy"], 5, env)
        phases = [json.loads(subprocess.run([*prefix, sys.executable, "-c", PHASES, db], capture_output=True, text=True,
                                            check=True, env=env).stdout) for _ in range(5)]
        out = json.loads(proc.stdout)
        same = all(
            [c["index"] for c in s["change_points"]] == perflab_method(np.array(
                [float(np.mean([v * 0.995, v, v * 1.005])) for v in data[int(s["metric"][-2:])][0]]))
            for s in out["series"])
        text = subprocess.run([perflab, "detect", "--db", db], capture_output=True, text=True, env=env).stdout
        print(f"\nwhole command: `{' '.join(prefix + ['perflab'])} detect --db STORE --style json` on {len(out['series'])} series x "
              f"{POINTS} runs ({POINTS * len(data) * 3} samples; store made in {made:.1f} s)")
        print(f"  wall time  median of {runs} {wall:.3f} s  (best {best:.3f} s)   CPU median {cpu:.3f} s   "
              f"target < 1 s: ratio (median wall) {wall / 1.0:.2f}   load average {load_before:.1f} before, {load_after:.1f} after")
        if baseline:
            print(f"  perflab at {against}, run alternately: median {baseline[0]:.3f} s (best {baseline[1]:.3f} s), "
                  f"CPU median {baseline[2]:.3f} s; this one / that one: {wall / baseline[0]:.2f} wall, "
                  f"{cpu / baseline[2]:.2f} CPU")
        print(f"  floors (median of 5, wall / CPU): the interpreter alone {interpreter[0]:.3f} / {interpreter[2]:.3f} s; "
              f"importing click, SQLAlchemy and numpy {libraries[0]:.3f} / {libraries[2]:.3f} s")
        print("  inside one process (median of 5, wall seconds):")
        for name in phases[0]:
            print(f"    {name:36} {float(np.median([p[name] for p in phases])):.3f}")
        print(f"    {'sum':36} {float(np.median([sum(p.values()) for p in phases])):.3f}")
        print(f"  detections equal to the library's on the same points: {'yes' if same else 'NO'}")
        print("  first lines of the text layout:")
        for line in text.splitlines()[:9]:
            print("    " + line)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=5, help="seeds (each one 20 series per set)")
    ap.add_argument("--first-seed", type=int, default=1,
                    help="first seed (1: the scoring seeds; e.g. 11 to check on histories the method was not tuned on)")
    ap.add_argument("--gap", type=int, default=5, help="least points between steps and from the ends (5: the matching tolerance)")
    ap.add_argument("--no-otava", action="store_true")
    ap.add_argument("--only-excursions", action="store_true",
                    help="only the sets with short excursions and close steps (reduced size on a loaded machine)")
    ap.add_argument("--no-command", action="store_true", help="skip timing the whole command")
    ap.add_argument("--no-shapes", action="store_true", help="skip the step-free noise shapes")
    ap.add_argument("--command-runs", type=int, default=7, help="timed runs of the whole command (median reported; >= 5)")
    ap.add_argument("--against", metavar="REV", help="also time the command of perflab at this git revision "
                    "(its src/, run alternately with this one): a ratio measured side by side")
    ap.add_argument("--chrt", action="store_true",
                    help="time the command under `chrt -f 10` (root): on a shared machine, ahead of the other jobs")
    args = ap.parse_args()

    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    kinds = (("steps", False, False), ("steps+spikes", True, False),
             ("excursions", False, True), ("excursions+spikes", True, True))
    sets = {name: [dataset(1000 * spikes + 2000 * excursions + seed, args.gap, spikes, excursions) for seed in seeds]
            for name, spikes, excursions in kinds if not args.only_excursions or excursions}
    detect(np.ones(10))  # imports and first-call costs out of the timing
    methods = {"perflab": perflab_method, "perflab, BH across": perflab_across_series}
    otava, why_not = (None, "skipped (--no-otava)") if args.no_otava else otava_method()
    if otava:
        methods["otava 0.8 defaults"] = otava
    print(f"{SERIES} series x {POINTS} points per seed, CoV {COV:.0%}, 0-3 steps of 3-15% at least {args.gap} apart, "
          f"match within +-{TOLERANCE}; seeds {seeds[0]}..{seeds[-1]}")
    print(f"{'set':14} {'method':20} {'precision':>9} {'recall':>7} {'tp':>5} {'fp':>4} {'fn':>4} "
          f"{'fp@spike':>8} {'cpu s/20':>9} {'worst':>7} {'wall s/20':>9} {'worst':>7}")
    results = {}
    for set_name, data in sets.items():
        for name, method in methods.items():
            r = results[(set_name, name)] = evaluate(method, data)
            print(f"{set_name:14} {name:20} {r['precision']:9.3f} {r['recall']:7.3f} {r['tp']:5} {r['fp']:4} {r['fn']:4} "
                  f"{r['spike_fp']:8} {r['cpu_per_20']:9.4f} {r['cpu_max']:7.4f} {r['seconds_per_20']:9.4f} {r['seconds_max']:7.4f}")
    if why_not:
        print(f"otava: {why_not}")
    ceilings = {name: placement_ceiling(data) for name, data in sets.items()}
    print(f"true edges placed within +-{TOLERANCE} given the true segmentation, at the best fit / where perflab "
          "reports them: " + ", ".join(f"{name} {a:.3f} / {b:.3f}" for name, (a, b) in ceilings.items()))
    worst_p = min(results[(s, "perflab")]["precision"] for s in sets)
    worst_r = min(results[(s, "perflab")]["recall"] for s in sets)
    worst_t = max(results[(s, "perflab")]["cpu_max"] for s in sets)
    worst_wall = max(results[(s, "perflab")]["seconds_max"] for s in sets)
    print(f"\nperflab targets: precision {worst_p:.3f} (>= 0.97, ratio {worst_p / 0.97:.3f}), "
          f"recall {worst_r:.3f} (>= 0.97, ratio {worst_r / 0.97:.3f}), "
          f"20 series in {worst_t:.4f} s of CPU at worst (< 0.2 s, ratio {worst_t / 0.2:.2f}; "
          f"wall {worst_wall:.4f} s at worst, load average {os.getloadavg()[0]:.1f})")
    if otava:
        for s in sets:
            ratio = results[(s, 'otava 0.8 defaults')]['cpu_per_20'] / results[(s, 'perflab')]['cpu_per_20']
            print(f"  {s}: otava takes {ratio:.1f}x perflab's CPU time")
    if not args.no_shapes:
        noise_shapes(methods)
    if not args.no_command:
        time_command((sets.get("steps+spikes") or sets["excursions+spikes"])[0], ["chrt", "-f", "10"] if args.chrt else [], max(args.command_runs, 5),
                     args.against)
    return 0


if __name__ == "__main__":
    sys.exit(main())

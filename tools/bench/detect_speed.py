#!/usr/bin/env python3
"""Wall time of the whole `perflab detect` on a representative store, against the 1 s target.

The store: --series metrics of one benchmark over --runs runs, three samples a run, with the
change-point bench's labelled histories (steps, short excursions, spikes) as the points.
Each round runs `perflab detect --db STORE` (text layout) in a fresh process after one
untimed run that writes the bytecode caches; the median and best of --rounds are printed
with the ratio to 1 s. Figures to quote must be taken on a quiet machine:

    .venv/bin/python tools/bench/detect_speed.py                     # full size: 20 series x 500 runs, 9 rounds
    .venv/bin/python tools/bench/detect_speed.py --runs 100 --rounds 3   # reduced, on a loaded machine
    PYTHONPATH=src .venv/bin/python tools/bench/detect_speed.py --against /work/main/src   # and another tree's, alternately

Beside the wall time, the CPU seconds (user + system) of each child: on a machine shared with
other jobs the wall time is the load's, the CPU time much less so. `--against SRC` runs the
same command with another perflab's src/ directory on PYTHONPATH, alternately with this one,
and prints the ratio of the medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import changepoints as bench  # noqa: E402  (the labelled histories)


def make_store(db: str, series: int, runs: int) -> None:
    from perflab.core.model import LOWER_IS_BETTER, Sample
    from perflab.store import open_store

    data = [v for seed in range(1, series // bench.SERIES + 2)
            for v, _, _ in bench.dataset(3000 + seed, 5, True, True)][:series]
    store = open_store(db)
    for i in range(runs):
        run = store.create_run(box="benchbox", environment={"testbox": "benchbox"}, benchmark="synthetic",
                               name="synthetic", params={})
        samples = [Sample(f"synthetic.series{k:02d}", x, "s", LOWER_IS_BETTER)
                   for k, values in enumerate(data) for x in (values[i] * 0.995, values[i], values[i] * 1.005)]
        store.add_samples(run, 1, samples)
        store.finish_run(run, "finished")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--series", type=int, default=20)
    ap.add_argument("--runs", type=int, default=500, help="runs (points per series), at most 500")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--against", metavar="SRC", help="another perflab's src/ directory, timed alternately with this one")
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "detect.db")
        make_store(db, args.series, min(args.runs, bench.POINTS))
        command = [sys.executable, "-c", "import sys; from perflab.cli import entry; sys.argv[0] = 'perflab'; entry()",
                   "detect", "--db", db]
        first = subprocess.run(command, capture_output=True, text=True, env=env)   # untimed: the caches
        if first.returncode != 0:
            print(f"perflab detect failed: {first.stderr.strip()}")
            return 1
        commands = [("this tree", command, env)]
        if args.against:
            other = dict(env, PYTHONPATH=os.path.abspath(args.against))
            if subprocess.run(command, capture_output=True, env=other).returncode != 0:   # and its caches
                print(f"perflab from {args.against} cannot run the command")
                return 1
            commands.append((args.against, command, other))
        walls: dict[str, list[float]] = {name: [] for name, _, _ in commands}
        cpus: dict[str, list[float]] = {name: [] for name, _, _ in commands}
        load = os.getloadavg()[0]
        for _ in range(args.rounds):
            for name, argv, environment in commands:
                wall, cpu = bench.timed_child(argv, environment)
                walls[name].append(wall)
                cpus[name].append(cpu)
        size = f"{args.series} series x {min(args.runs, bench.POINTS)} runs"
        for name, _, _ in commands:
            median, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
            print(f"perflab detect ({name}) on {size}: median {median:.3f} s, best {min(walls[name]):.3f} s, "
                  f"CPU median {cpu:.3f} s over {args.rounds} rounds; target < 1 s: ratio {median / 1.0:.2f} wall, "
                  f"{cpu / 1.0:.2f} CPU")
        if args.against:
            this, that = (statistics.median(cpus[name]) for name, _, _ in commands)
            print(f"  this tree / {args.against}, run alternately: {this / that:.2f} CPU")
        print(f"  load average {load:.1f} before, {os.getloadavg()[0]:.1f} after")
        print("  " + first.stdout.splitlines()[0])
        print("  " + first.stdout.rstrip().splitlines()[-1])
    return 0


if __name__ == "__main__":
    sys.exit(main())

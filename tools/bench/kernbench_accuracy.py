#!/usr/bin/env python3
"""perflab's kernbench figures against kernbench's own way of measuring, side by side.

kernbench times each build with GNU time: `time -f "%e %U %S %P %c %w" make -jN`
(elapsed, user, system, percent CPU, involuntary and voluntary context
switches). perflab takes the same six figures from its launcher's wait4 of
make. This script builds the same generated tree alternately both ways (a
`make clean` before each build, untimed), at the given load, and prints each
figure's mean both ways and the ratio perflab / time. Target: elapsed, user and
system within 5% (they are the same kernel accounting; the launcher's and
time's own start-up are the only differences); the switch counts also count
time's or the launcher's own few switches, so small trees differ more.

    .venv/bin/python tools/bench/kernbench_accuracy.py [--size small] [--jobs optimal|half|N] [--rounds 5]

Needs /usr/bin/time (Debian package `time`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from perflab.benchmarks.kernbench.family import load_jobs, samples_of
from perflab.benchmarks.kernbench.tree import generate
from perflab.core import cbuild
from perflab.execution.executor import ProcessSpec, execute

NAMES = ("elapsed_time", "user_time", "system_time", "percent_cpu", "context_switches", "sleeps")


def gnu_time(root: str, argv: list[str]) -> dict[str, float]:
    with tempfile.NamedTemporaryFile("r") as out:
        subprocess.run(["/usr/bin/time", "-o", out.name, "-f", "%e %U %S %P %c %w", *argv], cwd=root, check=True,
                       stdout=subprocess.DEVNULL)
        fields = out.read().split()
    values = [float(fields[0]), float(fields[1]), float(fields[2]), float(fields[3].rstrip("%")),
              float(fields[4]), float(fields[5])]
    return dict(zip(NAMES, values))


def perflab(root: str, argv: list[str]) -> dict[str, float]:
    result = execute(ProcessSpec(argv, item="make", cwd=root, capture_stdout=False))
    assert result.ok, result.describe_failure(None)
    return {s.metric.removeprefix("kernbench."): s.value for s in samples_of(result)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="small", choices=("tiny", "small", "full"))
    ap.add_argument("--jobs", default="optimal")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    if not os.path.exists("/usr/bin/time"):
        print("kernbench_accuracy: /usr/bin/time is missing (apt-get install time)", file=sys.stderr)
        return 2
    jobs = load_jobs(int(args.jobs) if args.jobs.isdigit() else args.jobs)
    work = tempfile.mkdtemp(prefix="kernbench-accuracy-")
    try:
        root = str(generate(os.path.join(work, "tree"), args.size, 1).path)
        make = shutil.which("make")
        build = [make, f"-j{jobs}", f"CC={cbuild.compiler().display}"]
        ours: dict[str, list[float]] = {n: [] for n in NAMES}
        theirs: dict[str, list[float]] = {n: [] for n in NAMES}
        for i in range(args.rounds):
            for way in ((perflab, ours), (gnu_time, theirs)) if i % 2 == 0 else ((gnu_time, theirs), (perflab, ours)):
                subprocess.run([make, "-s", "clean"], cwd=root, check=True, stdout=subprocess.DEVNULL)
                for name, v in way[0](root, build).items():
                    way[1][name].append(v)
        print(f"kernbench accuracy: {args.size} tree, make -j{jobs}, {args.rounds} builds each way, alternating")
        print(f"{'figure':<18}{'time(1)':>12}{'perflab':>12}{'ratio':>9}")
        for name in NAMES:
            a, b = statistics.fmean(theirs[name]), statistics.fmean(ours[name])
            ratio = b / a if a else float("nan")
            print(f"{name:<18}{a:>12.4g}{b:>12.4g}{ratio:>9.3f}")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

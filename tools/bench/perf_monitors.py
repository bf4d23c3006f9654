#!/usr/bin/env python3
"""What perf-stat and perf-profile cost, side by side and alternating (issue 11).

A C program runs a hot arithmetic loop for SECONDS on every CPU the machine
has (one process per CPU) and prints its iterations per second. Each round
runs it with no monitor, with perf-stat (default events) and with
perf-profile (default options), in an order rotated every round, through
the runner's executor and a MonitorSet. Printed per monitor:

- ops/s: the program's own figure (sum of its processes), median over the
  rounds; ratio: the median over rounds of its ratio to the unmonitored figure
  of the same round (paired, so slow drift of the machine cancels) — the cost
  seen by the benchmark while perf counts or samples;
- begin / end / collect: the harness time the monitor adds around each timed
  process (perf's start-up and acknowledgement, stopping it and reading its
  file), outside the timed part, medians in ms.

usage: perf_monitors.py [--rounds N] [--seconds S]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from perflab.monitors import MonitorSet  # noqa: E402
from perflab.execution.executor import ProcessSpec, execute  # noqa: E402

LOOP_C = textwrap.dedent("""\
    #include <stdio.h>
    #include <stdlib.h>
    #include <time.h>
    #include <unistd.h>
    #include <sys/wait.h>
    static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
    __attribute__((noinline)) unsigned long work(unsigned long n) {
        unsigned long x = 1;
        for (unsigned long i = 0; i < n; i++) { x = x * 6364136223846793005UL + i; x ^= x >> 13; }
        return x;
    }
    int main(int argc, char **argv) {
        double seconds = atof(argv[1]);
        int tasks = atoi(argv[2]);
        for (int t = 0; t < tasks; t++) {
            if (fork() == 0) {
                double t0 = now(); unsigned long ops = 0, s = 0;
                while (now() - t0 < seconds) { s += work(10000); ops++; }
                printf("%.1f %lu\\n", ops / (now() - t0), s & 1);
                return 0;
            }
        }
        while (wait(NULL) > 0) {}
        return 0;
    }
    """)

CONFIGS = {"none": {}, "perf-stat": {"perf-stat": {}}, "perf-profile": {"perf-profile": {}}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--tasks", type=int, default=os.cpu_count() or 1, help="loop processes (default: one per CPU)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="perflab-perfcost-"))
    (tmp / "loop.c").write_text(LOOP_C)
    subprocess.run(["cc", "-O2", "-fno-omit-frame-pointer", "-o", str(tmp / "loop"), str(tmp / "loop.c")], check=True)
    tasks = args.tasks
    ops: dict[str, list[float]] = {k: [] for k in CONFIGS}
    phases: dict[str, dict[str, list[float]]] = {k: {"begin": [], "end": [], "collect": []} for k in CONFIGS}
    names = list(CONFIGS)
    for r in range(args.rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            ms = MonitorSet(CONFIGS[name])
            try:
                from perflab.execution.executor import Hooks

                marks = {}

                def start(ms=ms, marks=marks):
                    marks["b0"] = time.monotonic()
                    ms.begin(0)
                    marks["b1"] = time.monotonic()

                def stop(ms=ms, marks=marks):
                    marks["e0"] = time.monotonic()
                    ms.end()
                    marks["e1"] = time.monotonic()

                result = execute(ProcessSpec([str(tmp / "loop"), str(args.seconds), str(tasks)]),
                                 hooks=Hooks(start=[start], stop=[stop]))
                c0 = time.monotonic()
                ms.collect()
                c1 = time.monotonic()
            finally:
                ms.close()
            ops[name].append(sum(float(line.split()[0]) for line in result.stdout.split("\n") if line.strip()))
            phases[name]["begin"].append((marks["b1"] - marks["b0"]) * 1e3)
            phases[name]["end"].append((marks["e1"] - marks["e0"]) * 1e3)
            phases[name]["collect"].append((c1 - c0) * 1e3)
    shutil.rmtree(tmp, ignore_errors=True)
    load = os.getloadavg()[0]
    print(f"{tasks} task(s) x {args.seconds:g} s, {args.rounds} rounds, medians; load average at the end: {load:.2f}")
    print(f"{'monitor':<14}{'ops/s':>14}{'ratio':>8}{'begin ms':>10}{'end ms':>9}{'collect ms':>12}")
    for name in names:
        med = statistics.median(ops[name])
        ratio = statistics.median(a / b for a, b in zip(ops[name], ops["none"]))
        p = {k: statistics.median(v) for k, v in phases[name].items()}
        print(f"{name:<14}{med:>14.1f}{ratio:>8.4f}{p['begin']:>10.1f}{p['end']:>9.1f}{p['collect']:>12.1f}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""`perflab noise` on this machine: wall time, CPU time and instructions of one program, side by side.

Issue 21 asks for the figures `perflab noise` prints for the same program measured three
ways. The program is a CPU-bound C loop (~15 ms at the default size), compiled here with
$CC (default cc). The script runs

    perflab noise -- ./loop N                        (wall time and CPU time: time.*)
    perflab noise JOB.yaml  with `measure: instructions`   (when this perflab has it)

on a throwaway store and prints, per metric: the CoV, the lag-1 serial correlation, whether
the level moves in stretches, the smallest change seen with 10 runs per side at 90% power,
and the runs per side a --change PCT needs. The figures it quotes need a quiet machine (no
other benchmarks, builds or test suites running): take them with

    python tools/bench/noise.py --rounds 30

and `--tiny` only checks that the script works (3 rounds of a short loop).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

PERFLAB = shutil.which("perflab", path=os.path.dirname(sys.executable)) or shutil.which("perflab")

LOOP_C = r"""
#include <stdlib.h>
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 15000000;
    volatile unsigned long sum = 0;
    for (long i = 0; i < n; i++)
        sum += (unsigned long)i * (unsigned long)i;
    return 0;
}
"""

SHOWN = ("time.elapsed_time", "time.cpu_time")


def build(workdir: str) -> str:
    src, exe = os.path.join(workdir, "loop.c"), os.path.join(workdir, "loop")
    with open(src, "w") as f:
        f.write(LOOP_C)
    subprocess.run([os.environ.get("CC", "cc"), "-O1", "-o", exe, src], check=True)
    return exe


def noise(args: list[str], db: str, workdir: str) -> tuple[str | None, str]:
    """Run `perflab noise ARGS`; (its tag, or None when it failed, and its output or error)."""
    proc = subprocess.run([PERFLAB, "--db", db, "noise", *args], capture_output=True, text=True, cwd=workdir)
    if proc.returncode != 0:
        return None, proc.stderr.strip()
    return re.search(r"tag (noise-[0-9a-f]+)", proc.stdout).group(1), proc.stdout


def figures(db: str, tag: str, change: float) -> tuple[list, dict]:
    """The stored A/A's figures (analysis.noise), read back from the store as check and robot do."""
    from perflab.analysis import noise as stored
    from perflab.store import open_store

    store = open_store(db)
    a, b = store.find_runs(tag=tag)
    report = stored.from_runs(store, a, b, change)
    return report.metrics, report.needs


def row(label: str, m, need) -> str:
    lag = f"{m.serial_correlation:+.2f}" if m.serial_correlation == m.serial_correlation else "-"
    stretches = f"yes ({m.shifts}, {m.shift_size * 100:.1f}%)" if m.shifts else "no"
    seen = "exact" if m.exact else f"{m.detectable_with(10) * 100:.2f}%"
    needs = ">1000" if need is None else str(need)
    return f"{label:<34} {m.cov * 100:>8.3f}% {lag:>6} {stretches:>16} {seen:>10} {needs:>8}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=20, help="A/A rounds (default 20)")
    ap.add_argument("--size", type=int, default=15_000_000, help="loop iterations (default 15e6, ~15 ms)")
    ap.add_argument("--change", type=float, default=2.0, help="the change asked about, in percent (default 2)")
    ap.add_argument("--cpus", help="pin the program to these CPUs (cmd's cpus parameter)")
    ap.add_argument("--tiny", action="store_true", help="3 rounds of a short loop: checks that the script works")
    args = ap.parse_args()
    rounds, size = (3, 100_000) if args.tiny else (args.rounds, args.size)
    with tempfile.TemporaryDirectory(prefix="perflab-noise-") as workdir:
        db, exe = os.path.join(workdir, "perflab.db"), build(workdir)
        common = ["--rounds", str(rounds), "--change", str(args.change)]
        job = os.path.join(workdir, "loop.yaml")
        with open(job, "w") as f:
            f.write(f"benchmark: cmd\nargv: [{exe}, '{size}']\n" + (f"cpus: '{args.cpus}'\n" if args.cpus else ""))
        tag, out = noise([job, *common], db, workdir)
        if tag is None:
            print(f"perflab noise failed: {out}")
            return 1
        rows = []
        metrics, needs = figures(db, tag, args.change / 100)
        rows += [row(m.metric, m, needs[m.metric]) for m in metrics if m.metric in SHOWN]
        with open(job, "a") as f:
            f.write("measure: instructions\n")
        tag, out = noise([job, *common], db, workdir)
        if tag is None:
            rows.append(f"{'instructions':<34} not measured: {out}")
        else:
            metrics, needs = figures(db, tag, args.change / 100)
            rows += [row(m.metric + " (valgrind)", m, needs[m.metric]) for m in metrics if "instructions" in m.metric]
        print(f"perflab noise of a {size}-iteration C loop, {rounds} rounds per side "
              f"(CoV; lag-1; level moves in stretches; smallest change seen with 10 runs per side at 90% power; "
              f"runs per side for {args.change:g}%)")
        print(f"{'metric':<34} {'CoV':>9} {'lag-1':>6} {'stretches':>16} {'n=10':>10} {'runs':>8}")
        for line in rows:
            print(line)
        if args.tiny:
            print("(--tiny: a check that the script works; the figures need a quiet machine and the default size)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Instruction counts under valgrind (`perflab run ... --measure instructions`): how exact, how costly.

Measured, each through the real `perflab` command on a fresh store:

1. Spread: a C loop (about --ms milliseconds natively; built with the machine's `cc -O1`) counted
   over --runs runs (default 10): (max - min) / mean of valgrind.instructions.
2. A +3.0% variant: the same program doing exactly 3.0% more loop iterations. Its measured change
   in the whole program's instructions (start-up included, so a little under +3.0%), and in the
   loop's function alone (`measure_function: work`, valgrind's --toggle-collect), against +3.0%.
3. A/A: --pairs pairs (default 100) of one-run runs of the same program, tagged A and B in turn;
   `perflab compare A B --metric valgrind.instructions --style json` should call nothing.
4. valgrind's slowdown, median of 5 runs each, native against `--measure instructions` and
   `--measure cache`: `cmd` running `gzip -6 -c` on a fixed generated file (--mib MiB), `cmd`
   running `true` (valgrind's start-up per process), and the hackbench family (a C family whose
   processes the runner starts; fixed work: --loops messages per sender), its own timed seconds.

Targets (issue 21): spread 0; the variant at +3.00% +- 0.05% (the loop alone); A/A no call.
Quote figures only from a quiet machine (`uptime`), e.g.:

    tools/bench/instructions.py                       # the full measurement, a few minutes
    tools/bench/instructions.py --pairs 3 --runs 3 --mib 1 --loops 20 --ms 2   # tiny: does it run?
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

PERFLAB = shutil.which("perflab", path=os.path.dirname(sys.executable)) or shutil.which("perflab")

LOOP = r"""
#include <stdlib.h>
__attribute__((noinline)) static long work(long n) {
    volatile long s = 0;
    for (long i = 0; i < n; i++)
        s += i;
    return s;
}
int main(int argc, char **argv) { return work(atol(argv[1])) == -1; }
"""
ITERATIONS_PER_MS = 400_000     # about right for this loop natively on a 2-3 GHz core


class Lab:
    """A fresh store and the perflab command on it."""

    def __init__(self, tmp: Path):
        self.tmp, self.db = tmp, tmp / "bench.db"

    def __call__(self, *args: str) -> str:
        done = subprocess.run([PERFLAB, "--db", str(self.db), *args], capture_output=True, text=True, cwd=self.tmp)
        if done.returncode != 0:
            sys.exit(f"perflab {' '.join(args)} failed: {done.stderr.strip()}")
        return done.stdout

    def values(self, metric: str, run_id: int | None = None) -> list[float]:
        con = sqlite3.connect(self.db)
        try:
            rid = run_id or con.execute("SELECT max(id) FROM run").fetchone()[0]
            return [v for (v,) in con.execute("SELECT value FROM sample WHERE run_id=? AND metric=? ORDER BY repetition",
                                              (rid, metric))]
        finally:
            con.close()


def build_loop(tmp: Path) -> str:
    (tmp / "loop.c").write_text(LOOP)
    subprocess.run(["cc", "-O1", "-o", str(tmp / "loop"), str(tmp / "loop.c")], check=True)
    return str(tmp / "loop")


def spread(lab: Lab, loop: str, n: int, runs: int) -> None:
    lab("run", "cmd", "--measure", "instructions", "--runs", str(runs), "--", loop, str(n))
    counts = lab.values("valgrind.instructions")
    rel = (max(counts) - min(counts)) / statistics.mean(counts)
    print(f"spread over {runs} runs: {int(min(counts))} .. {int(max(counts))} instructions, "
          f"(max-min)/mean {rel * 100:.6f}% (target 0)")


def variant(lab: Lab, loop: str, n: int) -> None:
    more = n * 103 // 100
    lab("run", "cmd", "--measure", "instructions", "--runs", "1", "--", loop, str(n))
    base = lab.values("valgrind.instructions")[0]
    lab("run", "cmd", "--measure", "instructions", "--runs", "1", "--", loop, str(more))
    head = lab.values("valgrind.instructions")[0]
    print(f"+3.0% variant, whole program: {base:.0f} -> {head:.0f} instructions, {(head / base - 1) * 100:+.3f}% "
          f"(start-up included; ratio to +3.0%: {(head / base - 1) / 0.03:.4f})")
    alone = []
    for iterations in (n, more):
        job = lab.tmp / "work.yaml"
        job.write_text(f"benchmark: cmd\nruns: 1\nmeasure: instructions\nmeasure_function: work\n"
                       f"argv: [{loop}, '{iterations}']\n")
        lab("run", str(job))
        alone.append(lab.values("valgrind.instructions")[0])
    change = alone[1] / alone[0] - 1
    print(f"+3.0% variant, work() alone: {alone[0]:.0f} -> {alone[1]:.0f} instructions, {change * 100:+.4f}% "
          f"(target +3.00% +- 0.05%: {'PASS' if abs(change - 0.03) <= 0.0005 else 'FAIL'})")


def aa(lab: Lab, loop: str, n: int, pairs: int) -> None:
    for _ in range(pairs):
        for tag in ("A", "B"):
            lab("run", "cmd", "--measure", "instructions", "--runs", "1", "--tag", tag, "--", loop, str(n))
    out = lab("compare", "A", "B", "--metric", "valgrind.instructions", "--style", "json")
    print(f"A/A over {pairs} pairs, `perflab compare A B --metric valgrind.instructions` says: {_verdicts(out)}")


def _verdicts(text: str) -> str:
    """The verdict words of compare's JSON, whatever its nesting."""
    found: list[str] = []

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("verdict", "call", "change", "significant", "exact") and not isinstance(value, (dict, list)):
                    found.append(f"{key}={value}")
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
    try:
        walk(json.loads(text))
    except ValueError:
        return text.strip()[:300]
    return ", ".join(found) or text.strip()[:300]


def median_of(lab: Lab, args: list[str], metric: str) -> float:
    lab("run", *args)
    return statistics.median(lab.values(metric))


def slowdown(label: str, lab: Lab, run: list[str], command: list[str], metric: str) -> None:
    native = median_of(lab, [*run, "--runs", "5", *command], metric)
    figures = [f"native {native * 1e3:.1f} ms"]
    for mode in ("instructions", "cache"):
        counted = median_of(lab, [*run, "--measure", mode, "--runs", "5", *command], metric)
        figures.append(f"--measure {mode} {counted * 1e3:.1f} ms ({counted / native:.2f}x)")
    print(f"slowdown, {label} (median of 5, {metric}): " + ", ".join(figures))


def fixed_file(path: Path, mib: int) -> None:
    """Text-like data, the same bytes every time (seeded): gzip -6 has work to do on it."""
    rng = random.Random(21)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(4000)]
    with open(path, "w") as f:
        written = 0
        while written < mib << 20:
            line = " ".join(rng.choice(words) for _ in range(12)) + "\n"
            f.write(line)
            written += len(line)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10, help="runs for the spread (default 10)")
    ap.add_argument("--pairs", type=int, default=100, help="A/A pairs (default 100)")
    ap.add_argument("--ms", type=float, default=15, help="the loop's native milliseconds (default 15)")
    ap.add_argument("--mib", type=int, default=16, help="size of gzip's input (default 16 MiB)")
    ap.add_argument("--loops", type=int, default=200, help="hackbench loops (default 200)")
    args = ap.parse_args()
    if not PERFLAB or not shutil.which("valgrind") or not shutil.which("gzip"):
        print("needs perflab, valgrind (apt-get install valgrind) and gzip")
        return 2
    print(f"load average at start: {os.getloadavg()[0]:.2f} (quote figures from a quiet machine)")
    with tempfile.TemporaryDirectory(prefix="perflab-bench-instructions-") as tmp:
        lab = Lab(Path(tmp))
        loop = build_loop(lab.tmp)
        n = int(args.ms * ITERATIONS_PER_MS)
        spread(lab, loop, n, args.runs)
        variant(lab, loop, n)
        aa(lab, loop, n, args.pairs)
        data = lab.tmp / "input.txt"
        fixed_file(data, args.mib)
        slowdown(f"cmd gzip -6 on {args.mib} MiB", lab, ["cmd"], ["--", "gzip", "-6", "-c", str(data)],
                 "time.elapsed_time")
        slowdown("cmd true (start-up)", lab, ["cmd"], ["--", "true"], "time.elapsed_time")
        slowdown(f"hackbench process socket -g 1 -l {args.loops}", lab, ["hackbench"],
                 ["--groups", "1", "--loops", str(args.loops)], "hackbench.time")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Harness overhead of perflab's LMbench-class programs on the null call.

Target (issue 3): below 1 ns per iteration.

The timed loop of every figure is C: `for (i = 0; i < n; i++) getppid();`
between two clock_gettime(CLOCK_MONOTONIC) calls, n calibrated so that a
sample lasts the target time. What the harness adds to each iteration is the
empty loop iteration (increment, compare, branch) plus the two clock reads
spread over the n iterations. Python starts the program and reads its output;
it never runs inside a timed interval.

This script measures, with `lat_syscall -L` (the harness's own figures):
  - harness.loop: ns per iteration of a calibrated empty timing loop;
  - harness.clock_gettime: ns per clock_gettime() call;
and with `lat_syscall -o syscall.null`, the null call and its iteration count
per sample, to amortize the clock reads. The overhead per iteration is
loop + clock_gettime / n; it is printed before the loop subtraction that
lat_syscall applies (after it, the residual is the loop's variation only).

    .venv/bin/python tools/bench/lmbench_overhead.py [--target-ms 10] [--samples 10]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess

from perflab.core import cbuild
from perflab.benchmarks.lmbench import driver

TARGET_NS = 1.0


def run(binary, *args) -> dict[str, list[float]]:
    out = subprocess.run([str(binary), *args], capture_output=True, text=True, check=True).stdout
    values: dict[str, list[float]] = {}
    for line in out.splitlines():
        doc = json.loads(line)
        values.setdefault(doc["metric"], []).append(doc["value"])
    return values


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target-ms", type=float, default=10.0, help="sample length, as in --quick (10 ms)")
    ap.add_argument("--samples", type=int, default=10)
    args = ap.parse_args()

    binary = cbuild.build("lat_syscall", driver.SOURCE_DIR)
    common = ["-n", str(args.samples), "-t", f"{args.target_ms:g}"]
    harness = run(binary, *common, "-L")
    loop = statistics.median(harness["harness.loop"])
    clock = statistics.median(harness["harness.clock_gettime"])
    null = statistics.median(run(binary, *common, "-o", "syscall.null")["syscall.null"]) * 1e3  # ns
    per_sample = args.target_ms * 1e6 / null        # iterations in one sample
    overhead = loop + clock / per_sample

    print(f"empty timing-loop iteration   {loop:8.3f} ns")
    print(f"clock_gettime() call          {clock:8.3f} ns")
    print(f"null call (getppid)           {null:8.2f} ns  ({per_sample:,.0f} iterations per {args.target_ms:g} ms sample)")
    print(f"harness overhead per null-call iteration: {overhead:.3f} ns "
          f"({overhead / null:.2%} of the null call); target < {TARGET_NS:g} ns: ratio {overhead / TARGET_NS:.2f} "
          f"-> {'PASS' if overhead < TARGET_NS else 'FAIL'}")
    print("(lat_syscall subtracts the empty-loop figure from every sample, so the stored null call carries "
          "only the clock reads' share, "
          f"{clock / per_sample:.4f} ns)")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Accuracy of perflab's hackbench class against rt-tests' hackbench.

Target (issue 10): hackbench.time within 15% of rt-tests' hackbench "Time:"
for the same groups, loops, message size and mode (sockets or pipes,
processes or threads), on the same machine, run alternately.

rt-tests' hackbench comes from the Debian package rt-tests (installed with
apt-get when missing and running as root). Ours is built with cbuild, as the
family builds it. Both use 20 senders and 20 receivers per group and
AF_UNIX stream socketpairs or pipes; both are placed by the scheduler.

Printed per configuration: rt-tests' time (its "Time:" line, milliseconds
resolution), ours (the family's parser on our program's output), medians
over the rounds with their range in %, the ratio ours/rt-tests and whether it
is within the tolerance; then the median ratio.

    .venv/bin/python tools/bench/hackbench_accuracy.py [--groups 10] [--loops 100] [--datasize 100]
        [--modes process,thread] [--ipcs socket,pipe] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys

from perflab.core import cbuild
from perflab.benchmarks.hackbench import BUILD_FLAGS, BUILD_LIBS, FAMILY, SOURCE_DIR, TIME, parse_output

TOLERANCE = 0.15


def fail(message: str):
    sys.exit(f"hackbench_accuracy: {message}")


def csv(value: str) -> list[str]:
    return [v for v in (part.strip() for part in value.split(",")) if v]


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--groups", type=int, default=10)
    ap.add_argument("--loops", type=int, default=100)
    ap.add_argument("--datasize", type=int, default=100)
    ap.add_argument("--modes", default="process,thread")
    ap.add_argument("--ipcs", default="socket,pipe")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tolerance", type=float, default=TOLERANCE)
    args = ap.parse_args(argv)
    args.mode_list, args.ipc_list = csv(args.modes), csv(args.ipcs)
    if not args.mode_list or any(m not in ("process", "thread") for m in args.mode_list):
        ap.error(f"--modes {args.modes!r}; valid: process, thread")
    if not args.ipc_list or any(i not in ("socket", "pipe") for i in args.ipc_list):
        ap.error(f"--ipcs {args.ipcs!r}; valid: socket, pipe")
    if args.rounds < 1 or args.groups < 1 or args.loops < 1 or args.datasize < 1:
        ap.error("--rounds, --groups, --loops and --datasize are >= 1")
    return args


def ensure_rt_tests() -> str:
    found = shutil.which("hackbench")
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        fail("rt-tests' hackbench is missing: apt-get install rt-tests")
    print("installing rt-tests ...", file=sys.stderr, flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "install", "-y", "-q", "rt-tests"], check=True, env=env, capture_output=True)
    return shutil.which("hackbench") or fail("rt-tests installed but no hackbench on PATH")


def run_rt_tests(binary: str, mode: str, ipc: str, args) -> float:
    cmd = [binary, "-g", str(args.groups), "-l", str(args.loops), "-s", str(args.datasize)]
    cmd += (["-T"] if mode == "thread" else ["-P"]) + (["-p"] if ipc == "pipe" else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    found = re.search(r"^Time: (\d+\.\d+)", proc.stdout, re.M)
    if proc.returncode != 0 or not found:
        raise RuntimeError(f"rt-tests {' '.join(cmd[1:])} exited {proc.returncode}: {proc.stderr.strip()[-200:]}")
    return float(found.group(1))


def run_ours(binary, mode: str, ipc: str, args) -> float:
    cmd = [str(binary), "-g", str(args.groups), "-l", str(args.loops), "-s", str(args.datasize), "-m", mode, "-i", ipc]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"ours {' '.join(cmd[1:])} exited {proc.returncode}: {proc.stderr.strip()[-200:]}")
    params = FAMILY.parse_params({"groups": args.groups, "loops": args.loops, "datasize": args.datasize,
                                  "mode": mode, "ipc": ipc})
    return next(s.value for s in parse_output(proc.stdout, params) if s.metric == TIME)


def spread(values: list[float]) -> float:
    middle = statistics.median(values)
    return 100.0 * (max(values) - min(values)) / middle if middle else 0.0


def main(argv=None) -> int:
    args = parse_args(argv)
    theirs_binary = ensure_rt_tests()
    ours = cbuild.build("hackbench", SOURCE_DIR, flags=BUILD_FLAGS, libs=BUILD_LIBS)
    print(f"hackbench class vs rt-tests' hackbench ({theirs_binary}): -g {args.groups} -l {args.loops} "
          f"-s {args.datasize}, {args.rounds} rounds, alternating; seconds, median (range across rounds)")
    print(f"{'configuration':<16} {'rt-tests':>20} {'perflab':>20} {'ratio':>7}  within {args.tolerance:.0%}")
    ratios, all_ok = [], True
    for mode in args.mode_list:
        for ipc in args.ipc_list:
            theirs, mine = [], []
            for r in range(args.rounds):
                pair = [(theirs, run_rt_tests, theirs_binary), (mine, run_ours, ours)]
                for into, run, binary in (pair if r % 2 == 0 else pair[::-1]):
                    into.append(run(binary, mode, ipc, args))
            a, b = statistics.median(theirs), statistics.median(mine)
            ratio = b / a if a else float("inf")
            ok = abs(ratio - 1) <= args.tolerance
            all_ok &= ok
            ratios.append(ratio)
            print(f"{mode + ' ' + ipc:<16} {a:>10.3f} ({spread(theirs):5.1f}%) {b:>10.3f} ({spread(mine):5.1f}%) "
                  f"{ratio:>7.3f}  {'yes' if ok else 'NO'}", flush=True)
    print(f"median ratio perflab/rt-tests: {statistics.median(ratios):.3f}; "
          f"{'all' if all_ok else 'not all'} configurations within {args.tolerance:.0%}")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())

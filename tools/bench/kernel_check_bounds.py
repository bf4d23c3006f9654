#!/usr/bin/env python3
"""`perflab kernel check` on hostile files: wall time and peak memory against the goals (issue 31).

Three files a user or a job could hand it (made in a temporary directory):
  sparse   a 4 GB sparse file (all zeros, no config anywhere);
  bomb     a 9 MB gzip of 2 GB of zeros (a decompression bomb behind a gzip signature);
  sigs     3 MB of gzip signatures (b'\\x1f\\x8b\\x08' a million times).
Before the reading was streamed and bounded: 4.2 GB of memory and 40-77 s for the first two,
more than 60 s for the third. Goal: under 5 s and 200 MB each. Each file is checked --rounds
times, in a child process (its peak resident memory from getrusage); printed: the median and
the maximum wall time, the peak memory, each as a ratio to its goal, and the load average.

    .venv/bin/python tools/bench/kernel_check_bounds.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

GOAL_S, GOAL_MB = 5.0, 200.0
PERFLAB = shutil.which("perflab", path=str(Path(sys.executable).parent)) or "perflab"


def make(directory: Path) -> dict[str, Path]:
    sparse = directory / "sparse"
    with open(sparse, "wb") as f:
        f.truncate(4 << 30)
    bomb = directory / "bomb.gz"
    out = zlib.compressobj(1, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(1 << 20)
    with open(bomb, "wb") as f:
        for _ in range(2048):
            f.write(out.compress(block))
        f.write(out.flush())
    sigs = directory / "sigs"
    sigs.write_bytes(b"\x1f\x8b\x08" * 1_000_000)
    return {"sparse": sparse, "bomb": bomb, "sigs": sigs}


def one(path: Path) -> tuple[float, float, int]:
    """(wall seconds, peak MB, exit status) of one check in a child."""
    code = ("import resource, subprocess, sys, time; t = time.monotonic(); "
            "p = subprocess.run(sys.argv[1:], capture_output=True); w = time.monotonic() - t; "
            "print(w, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, p.returncode)")
    done = subprocess.run([sys.executable, "-c", code, PERFLAB, "kernel", "check", str(path)],
                          capture_output=True, text=True, check=True)
    wall, kb, status = done.stdout.split()
    return float(wall), int(kb) / 1024, int(status)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="kcheck-") as scratch:
        files = make(Path(scratch))
        print(f"{'file':8} {'median s':>9} {'max s':>7} {'/goal':>6} {'peak MB':>8} {'/goal':>6}  exit")
        for name, path in files.items():
            runs = [one(path) for _ in range(args.rounds)]
            walls = [r[0] for r in runs]
            peak = max(r[1] for r in runs)
            print(f"{name:8} {statistics.median(walls):9.2f} {max(walls):7.2f} {max(walls) / GOAL_S:6.2f} "
                  f"{peak:8.1f} {peak / GOAL_MB:6.2f}  {','.join(str(r[2]) for r in runs)}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Speed of `perflab report lmbench` over 1,000 stored LMbench runs.

Target (issue 3): under 1 s for the whole command, Python start-up included.
Each stored run holds every figure of the suite with 3 samples (~276,000
samples in all).

    .venv/bin/python tools/bench/lmbench_report_speed.py [--runs 1000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from perflab.benchmarks.lmbench.catalog import FIGURES
from perflab.core.model import Sample
from perflab.store import open_store

PERFLAB = shutil.which("perflab", path=os.path.dirname(sys.executable)) or shutil.which("perflab")


def populate(db: str, runs: int) -> None:
    store = open_store(db)
    for i in range(runs):
        facts = {"testbox": "bench", "kernel_release": f"6.{i % 12}.0"}
        rid = store.create_run(box="bench", environment=facts, benchmark="lmbench", name="lmbench",
                               params={"quick": True}, tag=f"t{i}")
        for rep in range(3):
            store.add_samples(rid, rep, [Sample(m, random.uniform(1, 100), f.unit, f.direction) for m, f in FIGURES.items()])
        store.finish_run(rid, "finished")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "perflab.db")
        populate(db, args.runs)
        times = []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            out = subprocess.run([PERFLAB, "--db", db, "report", "lmbench", "--box", "bench"], check=True,
                                 capture_output=True, text=True).stdout
            times.append(time.perf_counter() - t0)
        rows = sum(1 for line in out.splitlines() if line.startswith("6."))
    med = statistics.median(times)
    print(f"perflab report lmbench over {args.runs} runs ({rows} table rows): median {med:.3f} s over "
          f"{args.rounds} rounds, min {min(times):.3f} s (target 1 s, ratio {med:.2f}) {'PASS' if med < 1 else 'FAIL'}")
    return 0 if med < 1 else 1


if __name__ == "__main__":
    sys.exit(main())

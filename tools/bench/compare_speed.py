#!/usr/bin/env python3
"""Speed of `perflab compare` on a large comparison.

Target (issue 4): comparing two groups of 10,000 metrics x 10 samples in
under 2 s; rendering that comparison in the lkp layout in under 1 s. The
comparison is timed end to end from the store (selection, grouping,
statistics), as `perflab compare` does it; the whole CLI is timed too.

    .venv/bin/python tools/bench/compare_speed.py [--metrics 10000] [--samples 10] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from perflab.analysis.comparison import compare
from perflab.core.model import Sample
from perflab.cli.compare import show as render_comparison
from perflab.store import open_store

PERFLAB = shutil.which("perflab", path=os.path.dirname(sys.executable)) or shutil.which("perflab")
FACTS = {"testbox": "bench", "kernel_release": "6.1.0"}


def populate(db: str, metrics: int, samples: int) -> None:
    rng = np.random.default_rng(1)
    store = open_store(db)
    for tag, shift in (("base", 1.0), ("head", 1.0)):
        run_id = store.create_run(box="bench", environment=FACTS, benchmark="bench", name="bench",
                                  params={"mode": "x"}, tag=tag)
        scale = rng.uniform(1, 1000, metrics)
        for rep in range(samples):
            values = scale * shift * rng.lognormal(0, 0.03, metrics)
            store.add_samples(run_id, rep, [Sample(f"m.{k:05d}", float(v), "us", -1) for k, v in enumerate(values)])
        store.finish_run(run_id, "finished")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--metrics", type=int, default=10_000)
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "perflab.db")
        populate(db, args.metrics, args.samples)
        store = open_store(db)
        cmp_times, render_times, cli_times = [], [], []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            result = compare(store, ["base", "head"])
            t1 = time.perf_counter()
            render_comparison(result, "lkp")
            t2 = time.perf_counter()
            cmp_times.append(t1 - t0)
            render_times.append(t2 - t1)
            t3 = time.perf_counter()
            subprocess.run([PERFLAB, "--db", db, "compare", "base", "head"], check=True, stdout=subprocess.DEVNULL)
            cli_times.append(time.perf_counter() - t3)
    c, r, k = (statistics.median(x) for x in (cmp_times, render_times, cli_times))
    print(f"compare {args.metrics} metrics x {args.samples} samples per side: median {c:.3f} s "
          f"over {args.rounds} rounds (target 2 s, ratio {c / 2:.2f}) {'PASS' if c < 2 else 'FAIL'}")
    print(f"render lkp layout: median {r:.3f} s (target 1 s, ratio {r / 1:.2f}) {'PASS' if r < 1 else 'FAIL'}")
    print(f"whole CLI `perflab compare base head`: median {k:.3f} s")
    return 0 if c < 2 and r < 1 else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Recording and history speed of the SQLite store.

Targets (issue 2): 100,000 samples written in under 2 s; `perflab log` over
10,000 runs in under 1 s (the whole command, Python start-up included).
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

from perflab.core.model import Sample
from perflab.store import open_store

PERFLAB = shutil.which("perflab", path=os.path.dirname(sys.executable)) or shutil.which("perflab")
FACTS = {"testbox": "bench", "kernel_release": "6.1.0"}


def write_samples(db: str, repetitions: int, per_rep: int) -> float:
    store = open_store(db)
    run_id = store.create_run(box="bench", environment=FACTS, benchmark="bench", name="bench", params={})
    batches = [[Sample(f"m.{k}", random.random(), "us", -1) for k in range(per_rep)] for _ in range(repetitions)]
    start = time.perf_counter()
    for rep, batch in enumerate(batches):
        store.add_samples(run_id, rep, batch)  # one commit per repetition, as the runner does
    return time.perf_counter() - start


def populate_runs(db: str, runs: int) -> None:
    store = open_store(db)
    for i in range(runs):
        rid = store.create_run(box="bench", environment=FACTS, benchmark="cmd", name=f"cmd {i % 7}",
                               params={}, tag=f"t{i % 50}")
        store.add_samples(rid, 0, [Sample("time.elapsed_time", 1.0 + i * 1e-4, "s", -1),
                                   Sample("time.user_time", 0.5, "s", -1), Sample("time.system_time", 0.2, "s", -1),
                                   Sample("time.maximum_resident_set_size", 2000, "KiB", -1),
                                   Sample("time.exit_status", 0, "", 0)])
        store.finish_run(rid, "finished")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for reps, per in ((1000, 100), (1, 100_000)):
            times = [write_samples(os.path.join(tmp, f"w{reps}-{r}.db"), reps, per) for r in range(args.rounds)]
            t = statistics.median(times)
            ok &= t < 2.0
            print(f"write 100,000 samples as {reps} committed repetitions of {per}: median {t:.3f} s "
                  f"(runs: {', '.join(f'{x:.3f}' for x in times)}), ratio to 2 s target {t / 2.0:.2f}")
        db = os.path.join(tmp, "log.db")
        populate_runs(db, 10_000)
        times = []
        for _ in range(args.rounds):
            start = time.perf_counter()
            out = subprocess.run([PERFLAB, "--db", db, "log"], check=True, capture_output=True, text=True).stdout
            times.append(time.perf_counter() - start)
            assert len(out.splitlines()) == 10_002
        t = statistics.median(times)
        ok &= t < 1.0
        print(f"perflab log over 10,000 runs: median {t:.3f} s (runs: {', '.join(f'{x:.3f}' for x in times)}), "
              f"ratio to 1 s target {t:.2f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

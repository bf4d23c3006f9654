#!/usr/bin/env python3
"""Cost of monitor metrics in `perflab compare`: the third FDR family, the counter
pairing and the lkp layout's display rules, against the same number of ordinary metrics.

Two stores of the same size: A holds N ordinary metrics; B holds 10 of the benchmark's
own and N - 10 monitor metrics named as the monitors name them (proc-vmstat counters
with their .per_s rates, perf-profile children/self shares, vmstat levels), a tenth of
them moved by the head. Each is compared and rendered in the lkp layout, alternating A
and B, and the medians are printed with their ratio. Target: monitor metrics cost at
most 1.5x ordinary ones (compare + render).

    .venv/bin/python tools/bench/compare_monitors_speed.py [--metrics 10000] [--samples 10] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

from perflab.analysis.comparison import compare
from perflab.core.model import INFORMATIONAL, Sample
from perflab.cli.compare import show as render_comparison
from perflab.store import open_store

FACTS = {"testbox": "bench", "kernel_release": "6.1.0"}
TARGET = 1.5


def monitor_names(n: int) -> list[tuple[str, str]]:
    """n (metric, unit) pairs shaped as the monitors record them."""
    out: list[tuple[str, str]] = []
    k = 0
    while len(out) < n:
        kind = k % 4
        if kind == 0:
            out += [(f"proc-vmstat.counter_{k}", ""), (f"proc-vmstat.counter_{k}.per_s", "/s")]
        elif kind == 1:
            out += [(f"perf-profile.children.cycles-pp.sym_{k}", "%"), (f"perf-profile.self.cycles-pp.sym_{k}", "%")]
        elif kind == 2:
            out.append((f"vmstat.level_{k}", "KiB"))
        else:
            out.append((f"interrupts.irq_{k}", ""))
        k += 1
    return out[:n]


def populate(db: str, metrics: int, samples: int, monitors: bool) -> None:
    rng = np.random.default_rng(1)
    store = open_store(db)
    if monitors:
        names = [(f"bench.m{k}", "us", -1) for k in range(10)]
        names += [(m, u, INFORMATIONAL) for m, u in monitor_names(metrics - 10)]
    else:
        names = [(f"bench.m{k:05d}", "us", -1) for k in range(metrics)]
    scale = rng.uniform(0.5, 1000, len(names))
    moved = np.where(rng.uniform(size=len(names)) < 0.1, 1.3, 1.0)
    for tag in ("base", "head"):
        run_id = store.create_run(box="bench", environment=FACTS, benchmark="bench", name="bench",
                                  params={"mode": "x"}, tag=tag)
        shift = moved if tag == "head" else 1.0
        for rep in range(samples):
            values = scale * shift * rng.lognormal(0, 0.03, len(names))
            store.add_samples(run_id, rep, [Sample(m, float(v), u, d) for (m, u, d), v in zip(names, values)])
        store.finish_run(run_id, "finished")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--metrics", type=int, default=10_000)
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        stores = {}
        for name, monitors in (("ordinary", False), ("monitors", True)):
            db = os.path.join(tmp, f"{name}.db")
            populate(db, args.metrics, args.samples, monitors)
            stores[name] = open_store(db)
        times: dict[str, list[float]] = {name: [] for name in stores}
        shown = {}
        for _ in range(args.rounds):
            for name, store in stores.items():  # alternating: drift hits both alike
                t0 = time.perf_counter()
                result = compare(store, ["base", "head"])
                text = render_comparison(result, "lkp")
                times[name].append(time.perf_counter() - t0)
                shown[name] = text.count("\n")
    a, b = (statistics.median(times[n]) for n in ("ordinary", "monitors"))
    print(f"compare + lkp render, {args.metrics} metrics x {args.samples} samples per side, median of {args.rounds}:")
    print(f"  ordinary metrics: {a:.3f} s ({shown['ordinary']} lines)")
    print(f"  10 own + {args.metrics - 10} monitor metrics (--monitors changed): {b:.3f} s ({shown['monitors']} lines)")
    ratio = b / a
    print(f"  ratio {ratio:.2f} (target <= {TARGET}) {'PASS' if ratio <= TARGET else 'FAIL'}")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Speed of `perflab compare` from PostgreSQL against the same from SQLite.

Target (issue 14): compare of 10,000 metrics from PostgreSQL within 1.5x of
SQLite's time. The same runs (two groups of 10,000 metrics x 10 samples,
loaded as tools/bench/compare_speed.py loads them) go into an SQLite file and
into a throwaway PostgreSQL cluster on loopback (initdb + postgres, the
cluster of tests/services.py, default durability); the comparison is timed
end to end from the store (selection, grouping, statistics), the backends
alternating round by round, and the whole CLI `perflab compare base head`
likewise.

    .venv/bin/python tools/bench/compare_pg_speed.py [--metrics 10000] [--samples 10] [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1] / "tests")]

from compare_speed import PERFLAB, populate  # noqa: E402
from services import PostgresCluster  # noqa: E402

from perflab.analysis.comparison import compare  # noqa: E402
from perflab.store import open_store  # noqa: E402

TARGET = 1.5


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--metrics", type=int, default=10_000)
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    cluster = PostgresCluster(durable=True)
    try:
        cluster.start()
        with tempfile.TemporaryDirectory() as tmp:
            urls = {"sqlite": os.path.join(tmp, "perflab.db"), "postgresql": cluster.url(cluster.create_database("bench"))}
            for name, url in urls.items():
                t0 = time.perf_counter()
                populate(url, args.metrics, args.samples)
                print(f"loaded {2 * args.metrics * args.samples} samples into {name} in {time.perf_counter() - t0:.1f} s",
                      file=sys.stderr)
            stores = {name: open_store(url) for name, url in urls.items()}
            api = {name: [] for name in urls}
            cli = {name: [] for name in urls}
            for _ in range(args.rounds):
                for name, store in stores.items():
                    t0 = time.perf_counter()
                    result = compare(store, ["base", "head"])
                    api[name].append(time.perf_counter() - t0)
                    assert len(result.rows) >= args.metrics, len(result.rows)
                for name, url in urls.items():
                    t0 = time.perf_counter()
                    subprocess.run([PERFLAB, "--db", url, "compare", "base", "head"], check=True, stdout=subprocess.DEVNULL)
                    cli[name].append(time.perf_counter() - t0)
            for store in stores.values():
                store.engine.dispose()
    finally:
        cluster.destroy()
    a_lite, a_pg = statistics.median(api["sqlite"]), statistics.median(api["postgresql"])
    c_lite, c_pg = statistics.median(cli["sqlite"]), statistics.median(cli["postgresql"])
    ratio, cli_ratio = a_pg / a_lite, c_pg / c_lite
    print(f"compare {args.metrics} metrics x {args.samples} samples per side, median of {args.rounds} alternating rounds:")
    print(f"  from the store: SQLite {a_lite:.3f} s, PostgreSQL {a_pg:.3f} s: ratio {ratio:.2f} "
          f"(target {TARGET}) {'PASS' if ratio <= TARGET else 'FAIL'}")
    print(f"  whole CLI `perflab compare base head`: SQLite {c_lite:.3f} s, PostgreSQL {c_pg:.3f} s: ratio {cli_ratio:.2f}")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""How long migration 0005 (64-bit ids) takes on an existing PostgreSQL store.

The upgrade alters the id columns of every table to bigint: PostgreSQL rewrites each
table and rebuilds its indexes and foreign keys, under an exclusive lock, so a lab
must plan for it. This loads a store at revision 0004 in a throwaway cluster
(tests/services.py, default durability) with RUNS runs and SAMPLES samples (made by
the server itself with generate_series, so that loading is quick), then times
`open_store`, which runs the upgrade, and prints the time and the sizes before and after.

    .venv/bin/python tools/bench/pg_bigint_upgrade.py [--runs 10000] [--samples 2000000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1] / "tests")]

from services import PostgresCluster  # noqa: E402
from sqlalchemy import create_engine, text  # noqa: E402

from perflab.store import open_store  # noqa: E402
from perflab.store.db import _as_url  # noqa: E402


def at_0004(url: str) -> None:
    from alembic import command
    from alembic.config import Config

    from perflab.store import db

    cfg = Config()
    cfg.set_main_option("script_location", str(Path(db.__file__).with_name("migrations")))
    engine = create_engine(_as_url(url))
    with engine.connect() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0004")
        conn.commit()
    engine.dispose()


def load(url: str, runs: int, samples: int) -> None:
    engine = create_engine(_as_url(url))
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO testbox (name) VALUES ('box')"))
        conn.execute(text("INSERT INTO environment (testbox_id, digest, facts) VALUES (1, 'd', '{}')"))
        conn.execute(text(
            "INSERT INTO run (uuid, testbox_id, environment_id, benchmark, name, params, started, status) "
            "SELECT 'u' || i, 1, 1, 'cmd', 'run', '{}', now(), 'finished' FROM generate_series(1, :n) i"), {"n": runs})
        conn.execute(text(
            "INSERT INTO sample (run_id, metric, value, unit, direction, repetition) "
            "SELECT 1 + i % :runs, 'm.metric' || (i % 50), random(), 's', -1, i % 10 FROM generate_series(1, :n) i"),
            {"runs": runs, "n": samples})
    with engine.connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT").execute(text("VACUUM ANALYZE"))
    engine.dispose()


def size(url: str) -> str:
    engine = create_engine(_as_url(url))
    with engine.connect() as conn:
        value = conn.execute(text("SELECT pg_size_pretty(pg_database_size(current_database()))")).scalar()
    engine.dispose()
    return value


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--samples", type=int, default=2_000_000)
    args = ap.parse_args()
    cluster = PostgresCluster(durable=True)
    try:
        cluster.start()
        url = cluster.url(cluster.create_database("bench"))
        at_0004(url)
        t0 = time.perf_counter()
        load(url, args.runs, args.samples)
        print(f"loaded {args.runs} runs and {args.samples} samples at revision 0004 in "
              f"{time.perf_counter() - t0:.1f} s; database {size(url)}")
        t0 = time.perf_counter()
        store = open_store(url)
        elapsed = time.perf_counter() - t0
        store.engine.dispose()
        print(f"upgrade 0004 -> 0005 (open_store): {elapsed:.1f} s, "
              f"{args.samples / elapsed / 1e6:.2f} million samples/s; database {size(url)}")
    finally:
        cluster.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())

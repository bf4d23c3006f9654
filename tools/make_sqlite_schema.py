#!/usr/bin/env python3
"""Write src/perflab/store/sqlite_schema.sql: the head schema the migrations make in SQLite.

A new SQLite store is created from that file in one transaction instead of running every
Alembic migration (perflab.store.engine.Database._create_sqlite_from_template): 5 ms instead
of 0.3-0.6 s, paid by every new store (each test of the suite that makes one, each `--db
new.db`). Run this after adding a migration; tests/test_store_schema.py fails until the file
matches what the migrations make.

    .venv/bin/python tools/make_sqlite_schema.py
"""

from __future__ import annotations

import sqlite3  # noqa: F401  (the driver SQLAlchemy uses below)
import sys
import tempfile
from pathlib import Path

from sqlalchemy import create_engine

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
from perflab.store.engine import SQLITE_SCHEMA, sqlite_schema_of, upgrade_with_alembic  # noqa: E402


def alembic_schema() -> str:
    with tempfile.TemporaryDirectory() as scratch:
        engine = create_engine(f"sqlite:///{scratch}/store.db")
        with engine.connect() as conn:
            upgrade_with_alembic(conn)
            conn.commit()
            schema = sqlite_schema_of(conn)
        engine.dispose()
    return schema


if __name__ == "__main__":
    SQLITE_SCHEMA.write_text(alembic_schema())
    print(f"wrote {SQLITE_SCHEMA}", file=sys.stderr)

"""The Store, and opening it.

`open_store(path or URL)` finds the database (perflab.store.engine), makes its
engine, brings its schema to the head revision and returns a `Store`: the
writing half (perflab.store.writes) and the reading half (perflab.store.queries)
of one object. The names other packages import from here stay here.
"""

from __future__ import annotations

from pathlib import Path  # noqa: F401 (tests/test_runner.py finds the migrations with db.Path)

from perflab.store.engine import (
    HEAD_REVISION,
    KNOWN_REVISIONS,
    NoRoom,
    as_url,
    default_url,
    locate,
    make_engine,
    read_only_url,
)
from perflab.store.queries import MAX_RUN_ID, Queries
from perflab.store.rows import copy_rows, process_start_time, redact
from perflab.store.writes import RESERVE_BYTES, Writes, check_run_strings, utcnow

__all__ = [
    "HEAD_REVISION", "KNOWN_REVISIONS", "MAX_RUN_ID", "RESERVE_BYTES", "Store", "as_url", "check_run_strings",
    "copy_rows", "default_url", "open_store", "process_start_time", "redact", "utcnow",
]

# The old private name of as_url, still used by tools/bench/pg_bigint_upgrade.py.
_as_url = as_url


class Store(Writes, Queries):
    """One open store: what it writes (Writes) and what it reads (Queries)."""


def open_store(target: str | None = None) -> Store:
    """Open the store at a path or URL, creating or upgrading its schema.

    An SQLite file this process may read but not write (its mode, a read-only
    mount, a disk so full that SQLite cannot create its -shm file) opens
    read-only: reading works, writing is refused saying why. An in-memory
    database is refused: it would keep nothing once perflab exits. Passwords
    in URLs are masked in every message.
    """
    url, label, path, read_only = locate(target or default_url())
    store = Store(make_engine(url, label), label, path=path, read_only=read_only)
    try:
        store.migrate()
    except NoRoom:
        store.engine.dispose()
        store = Store(make_engine(read_only_url(path, immutable=True), label), label, path=path,
                      read_only="is on a full disk")
        store.migrate()
    return store

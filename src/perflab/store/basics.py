"""What every way of opening a store (perflab.store.engine; perflab.store.reader and
perflab.store.recording, which open SQLite with the standard library) needs, without importing
SQLAlchemy or Alembic: where the default store is, the schema revision this perflab writes (read
from the migration scripts), the head schema of a new SQLite store, the SQLite connection's
settings, and the lengths of the strings users choose."""

from __future__ import annotations

import os
import re
from pathlib import Path


def default_url() -> str:
    """$PERFLAB_DB (a path or a URL), else the XDG data directory."""
    configured = os.environ.get("PERFLAB_DB")
    if configured:
        return configured
    data_home = os.environ.get("XDG_DATA_HOME") or os.path.join(Path.home(), ".local", "share")
    return os.path.join(data_home, "perflab", "perflab.db")


def _head_revision() -> tuple[str, frozenset[str]]:
    """The newest Alembic revision shipped and all of them."""
    revisions, parents = set(), set()
    for script in (Path(__file__).parent / "migrations" / "versions").glob("*.py"):
        body = script.read_text()
        rev = re.search(r'^revision = "([^"]+)"', body, re.M)
        down = re.search(r'^down_revision = "([^"]+)"', body, re.M)
        if rev:
            revisions.add(rev.group(1))
        if down:
            parents.add(down.group(1))
    heads = revisions - parents
    if len(heads) != 1:
        raise RuntimeError(f"store migrations have {len(heads)} heads: {sorted(heads)}")
    return heads.pop(), frozenset(revisions)


HEAD_REVISION, KNOWN_REVISIONS = _head_revision()


SQLITE_SCHEMA = Path(__file__).with_name("sqlite_schema.sql")

# The longest value of each string column users choose or a file names (perflab.store.schema
# declares the columns with these; perflab.store.writes.check_run_strings and an import's checks,
# perflab.exchange.transfer, refuse a longer value by name).
LENGTHS = {"testbox.name": 255, "run.benchmark": 100, "run.name": 500, "run.tag": 255, "run.commit": 64,
           "sample.metric": 255, "sample.unit": 32, "monitor_series.monitor": 50}


def sqlite_template() -> list[str] | None:
    """The statements that make a new SQLite store at the head revision (SQLITE_SCHEMA, which
    tools/make_sqlite_schema.py writes from the migrations), or None when the template is older
    than the migrations (a checkout between two commits): Alembic makes the store then."""
    first, _, body = SQLITE_SCHEMA.read_text().partition("\n")
    if first != f"-- revision {HEAD_REVISION}":
        return None
    return [statement for statement in body.split(";\n") if statement.strip()]


def sqlite_pragmas(cur) -> None:
    """The settings of every SQLite connection to a store, on a DB-API cursor."""
    # WAL lets readers and one writer work at once; the busy timeout lets two
    # perflab processes share one database; NORMAL sync in WAL mode survives a
    # process crash or kill -9 (it is power loss that it does not cover).
    cur.execute("PRAGMA busy_timeout=30000")
    set_wal(cur)
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")


def set_wal(cur, wait_s: float = 30.0) -> None:
    """PRAGMA journal_mode=WAL, retried while the file is locked.

    When processes open a new database file at once, two of them may both try to
    turn it to WAL: SQLite then returns "database is locked" to one at once, without
    the busy handler (waiting could deadlock). Once the other has turned it, the
    pragma only reads the mode. Seen in 1 of 800 opens with 4 processes at a time.
    """
    import sqlite3
    import time

    deadline = time.monotonic() + wait_s
    pause = 0.001
    while True:
        try:
            cur.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.05)

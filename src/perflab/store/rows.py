"""What the Store and the importer share when they write rows.

Both write testboxes, environments, runs and samples: the ids of a testbox and of
an environment (written first, then read), INSERT ... ON CONFLICT DO NOTHING,
PostgreSQL's COPY with its NUL rule, the identity of the writing process (to tell a
live writer from a dead one), and the one-line message of a database error with
passwords masked. They live here, below both, so that imports go one way:
db -> writes -> importing -> rows.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path

from typing import TYPE_CHECKING

from perflab.core.errors import PerflabError
from perflab.core.process import process_start_time  # noqa: F401  (its home is core; the store's callers import it here)
from perflab.store.basics import LENGTHS

if TYPE_CHECKING:
    from sqlalchemy.exc import SQLAlchemyError

# The status of the runs an import is still writing: every query of the store ignores them.
IMPORTING = "importing"

_URL_PASSWORD = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*:)[^\s@]+@")


# libpq also takes the password as a parameter: postgresql://u@h/db?password=..., "password=... host=...".
# The value ends at a space, an & or the ": " that follows a URL in a message.
_PARAM_PASSWORD = re.compile(r"(?i)(\bpassword=)[^\s&]+?(?=[\s&]|:\s|:?$)")


def redact(text: str) -> str:
    """`text` with the password of every URL in it (user:PASSWORD@ or ?password=) shown as ***."""
    return _PARAM_PASSWORD.sub(r"\1***", _URL_PASSWORD.sub(r"\1***@", str(text)))


# Free space kept beside an SQLite store (the file DATABASE-reserve): on a full
# disk, deleting it makes room to record why the run ended (a few WAL frames).
RESERVE_BYTES = 256 * 1024

# The strings of a run row that users choose, with what sets each: a longer value
# is refused before anything is written (PostgreSQL would refuse it half-way and
# SQLite would keep it whole, so two stores would differ).
_RUN_STRINGS = {
    "box": ("testbox.name", "--box (the testbox name)"),
    "benchmark": ("run.benchmark", "the benchmark name"),
    "name": ("run.name", "the run name (--name; by default the command line)"),
    "tag": ("run.tag", "--tag"),
    "commit": ("run.commit", "the commit id"),
}


def check_run_strings(**values: str | None) -> None:
    """Refuse a user string longer than the column that keeps it, naming what sets it.

    Keys are those of _RUN_STRINGS (box, benchmark, name, tag, commit).
    """
    for key, value in values.items():
        column, what = _RUN_STRINGS[key]
        limit = LENGTHS[column]
        if value is not None and len(value) > limit:
            raise PerflabError(f"{what} is {len(value)} characters long; the store keeps at most {limit}")


def check_sample_strings(rows: list[tuple]) -> None:
    """The metric name and unit of each sample row fit their columns (a backstop:
    the options that name them should have refused them already)."""
    for index, column, what in ((1, "sample.metric", "metric name"), (3, "sample.unit", "unit")):
        limit = LENGTHS[column]
        for value in {r[index] for r in rows}:
            if len(value) > limit:
                raise PerflabError(f"{what} {value[:40]!r}... is {len(value)} characters long; the store keeps at most {limit}")


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


class Reserve:
    """Free space held beside an SQLite store (`self.path`), for the Store and the SQLite recorder."""

    def _reserve_path(self) -> Path | None:
        return self.path.with_name(self.path.name + "-reserve") if self.path is not None else None

    def _keep_reserve(self) -> None:
        """Make sure RESERVE_BYTES of disk are held beside an SQLite store (best effort)."""
        reserve = self._reserve_path()
        if reserve is None or reserve.exists():
            return
        try:
            fd = os.open(reserve, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except OSError:
            return
        try:
            os.posix_fallocate(fd, 0, RESERVE_BYTES)
        except OSError:
            reserve.unlink(missing_ok=True)  # no room even for that: go without
        finally:
            os.close(fd)

    def _release_reserve(self) -> bool:
        reserve = self._reserve_path()
        try:
            reserve.unlink()
        except (AttributeError, OSError):
            return False
        return True


def database_error(label: str, e: Exception) -> PerflabError:
    """The one-line error of a failed database call on the store named `label`."""
    detail = str(getattr(e, "orig", e) or e).splitlines()[0]
    return PerflabError(f"database {label}: {redact(detail)}")


def disk_full(e: SQLAlchemyError) -> bool:
    orig = getattr(e, "orig", e)   # SQLAlchemy's wrapper, or the driver's own error (perflab.store.recording)
    # SQLITE_FULL is 13 (the low byte of an extended code); 53100 is PostgreSQL's disk_full.
    return (getattr(orig, "sqlite_errorcode", 0) & 0xFF) == 13 or getattr(orig, "sqlstate", None) == "53100"


def without_nul(value):
    """A string PostgreSQL can keep: text columns refuse NUL, which a benchmark's
    output tail or an imported file may hold; it becomes U+FFFD, as undecodable
    bytes do. Other values unchanged (JSON travels escaped as \\u0000)."""
    return value.replace("\x00", "\ufffd") if isinstance(value, str) and "\x00" in value else value


def copy_rows(conn, table: str, columns: tuple[str, ...], rows: Iterable[tuple], prefix: tuple = ()) -> None:
    """Write rows with PostgreSQL's COPY, inside the transaction of `conn` (a
    SQLAlchemy connection): half the time of psycopg's executemany for a batch of
    10,000 samples. Each row is `prefix + row`; NUL in strings becomes U+FFFD."""
    quote = conn.dialect.identifier_preparer.quote
    statement = f"COPY {quote(table)} ({', '.join(quote(c) for c in columns)}) FROM STDIN"
    cursor = conn.connection.driver_connection.cursor()
    try:
        with cursor.copy(statement) as copy:
            for row in rows:
                row = prefix + tuple(row)
                if any(isinstance(v, str) and "\x00" in v for v in row):
                    row = tuple(without_nul(v) for v in row)
                copy.write_row(row)
    except conn.dialect.loaded_dbapi.Error as e:
        from sqlalchemy.exc import DBAPIError

        # As SQLAlchemy reports a failed statement: callers handle SQLAlchemyError.
        raise DBAPIError.instance(statement, None, e, conn.dialect.loaded_dbapi.Error) from e


def insert_ignore(conn, label: str, table, values: dict) -> None:
    """INSERT that does nothing when a unique key already exists (`label` names the store in errors).

    Writing first (rather than select-then-insert) matters with two writers:
    it takes SQLite's write lock, waiting under the busy timeout, instead of
    racing another process between the read and the write.
    """
    name = conn.dialect.name
    if name == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as dialect_insert
    elif name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as dialect_insert
    else:
        raise PerflabError(f"database {label}: unsupported backend {name}")
    conn.execute(dialect_insert(table).values(**values).on_conflict_do_nothing())


def box_id_of(conn, label: str, name: str) -> int:
    """The id of the box `name` (a row of the testbox table), written if it is new."""
    # SQLAlchemy where it is used: process_start_time and redact serve commands that never load it.
    from sqlalchemy import select

    from perflab.store import schema as s

    insert_ignore(conn, label, s.testbox, {"name": name})
    return conn.execute(select(s.testbox.c.id).where(s.testbox.c.name == name)).scalar_one()


def environment_id(conn, label: str, box_id: int, facts: dict) -> int:
    """The id of the environment `facts` (by their digest), written if it is new."""
    from sqlalchemy import select

    from perflab.store import schema as s

    digest = hashlib.sha256(json.dumps(facts, sort_keys=True, default=str).encode()).hexdigest()
    insert_ignore(conn, label, s.environment, {"testbox_id": box_id, "digest": digest, "facts": facts})
    return conn.execute(select(s.environment.c.id).where(s.environment.c.digest == digest)).scalar_one()

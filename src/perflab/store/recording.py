"""Recording runs in an SQLite store with the standard library's sqlite3 (`perflab run`, `import`).

`perflab run` is the command started most often (by people in loops, by the test suite some
hundreds of times), and importing SQLAlchemy to write a run and its samples cost it 0.1-0.3 s
of its start (issue 47). An SQLite store that needs nothing but rows added - a new file (made
from the head schema's template, as the Store makes it) or a writable one at this perflab's
revision with no dead run to reap - opens here; anything else (a URL, an old, read-only or
foreign store, a run to reap) returns None, and the command opens the Store (perflab.store.db),
which upgrades, refuses and reaps, and says why.

A `Recorder` writes what a run writes - the run row with its testbox and environment, samples,
monitors and their series, failures, the closing status, the deletion of a run refused before it
measured - exactly as the Store's writes do on SQLite: the same statements, the same encoding of
each column's type (JSON text as json.dumps writes it, times as SQLAlchemy's DateTime keeps them
on SQLite, booleans as 0/1), the same reserve for a full disk. Its `begin_import` writes an
import (`perflab import`, 0.35 s of start-up before, most of it SQLAlchemy) in the batches of
perflab.store.importing, as the Store's ImportWriter does. tests/test_recording.py writes runs
and imports both ways and compares every row. The table definitions stay in perflab.store.schema
(the template is made from them through the migrations); this module names columns only.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import uuid as uuidlib
from collections.abc import Iterable
from contextlib import contextmanager

from perflab.core.errors import PerflabError
from perflab.core.model import Sample
from perflab.store.basics import HEAD_REVISION, sqlite_pragmas, sqlite_template
from perflab.store.exactness import stored_unit
from perflab.store.importing import ImportBatches
from perflab.store.reader import Reader, _anything_to_reap
from perflab.store.rows import (IMPORTING, Reserve, check_run_strings, check_sample_strings, disk_full,
                                process_start_time, utcnow)


def _json(value, none_as_null: bool = False):
    """A JSON column's value as SQLAlchemy's JSON type binds it on SQLite (json.dumps; None is
    SQL NULL for a column declared none_as_null, else the JSON text null)."""
    if value is None and none_as_null:
        return None
    return json.dumps(value)


def _time(value):
    """A datetime as SQLAlchemy's DateTime keeps it on SQLite: its fields, microseconds always, any
    time zone left out (perflab's are naive UTC; an imported file's time may carry one)."""
    if value is None:
        return None
    return (f"{value.year:04d}-{value.month:02d}-{value.day:02d} "
            f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}.{value.microsecond:06d}")


def _boolean(value):
    """A boolean as SQLAlchemy's Boolean binds it on SQLite: 0/1, NULL for None; what is not a
    boolean (an imported file's "dirty": "yes") is refused as it refuses it."""
    if value is None:
        return None
    if value not in (True, False):   # 1 and 0 are True and False here, as there
        raise TypeError(f"Not a boolean value: {value!r}" if not isinstance(value, int)
                        else f"Value {value!r} is not None, True, or False")
    return int(bool(value))


class Recorder(Reserve, Reader):
    """An SQLite store opened by open_recorder: the Store's run writes, and a Reader's queries."""

    @contextmanager
    def _transaction(self):
        """One transaction, committed on the way out (short: two perflab processes share a file);
        rolled back on any error or interruption, so the next write starts clean."""
        cursor = self.connection.cursor()
        try:
            if self.connection.in_transaction:
                self.connection.rollback()   # one cut short by an interruption between BEGIN and its end
            cursor.execute("BEGIN")
            yield cursor
            cursor.execute("COMMIT")
        except BaseException as e:
            if self.connection.in_transaction:
                self.connection.rollback()
            if isinstance(e, self._errors):
                raise self._fail(e) from None
            raise
        finally:
            cursor.close()

    def create_run(self, *, box: str, environment: dict, benchmark: str, name: str, params: dict,
                   tag: str | None = None, commit: str | None = None, dirty: bool | None = None,
                   comment: str | None = None, job: dict | None = None) -> int:
        check_run_strings(box=box, benchmark=benchmark, name=name, tag=tag, commit=commit)
        self._keep_reserve()
        digest = hashlib.sha256(json.dumps(environment, sort_keys=True, default=str).encode()).hexdigest()
        with self._transaction() as cur:
            # written first, then read: the write lock is taken before the read (perflab.store.rows.insert_ignore)
            cur.execute("INSERT INTO testbox (name) VALUES (?) ON CONFLICT DO NOTHING", (box,))
            (box_id,) = cur.execute("SELECT testbox.id FROM testbox WHERE testbox.name = ?", (box,)).fetchone()
            cur.execute("INSERT INTO environment (testbox_id, digest, facts) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                        (box_id, digest, _json(environment)))
            (env_id,) = cur.execute("SELECT environment.id FROM environment WHERE environment.digest = ?",
                                    (digest,)).fetchone()
            pid = os.getpid()
            cur.execute(
                'INSERT INTO run (uuid, testbox_id, environment_id, benchmark, name, params, tag, "commit", dirty, '
                "started, status, comment, host, pid, pid_start, job) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (str(uuidlib.uuid4()), box_id, env_id, benchmark, name, _json(params), tag, commit,
                 None if dirty is None else int(bool(dirty)), _time(utcnow()), "running", comment,
                 socket.gethostname(), pid, process_start_time(pid), _json(job, none_as_null=True)))
            return cur.lastrowid

    def add_samples(self, run_id: int, repetition: int, samples: Iterable[Sample], process: int | None = None) -> int:
        """Store and commit samples of one repetition (from its `process`-th process)."""
        rows = [(run_id, x.metric, float(x.value), stored_unit(x.metric, x.unit, x.exact), int(x.direction), repetition,
                 process) for x in samples]
        if rows:
            check_sample_strings(rows)
            with self._transaction() as cur:
                cur.executemany("INSERT INTO sample (run_id, metric, value, unit, direction, repetition, process) "
                                "VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        return len(rows)

    def set_run_monitors(self, run_id: int, record: dict) -> None:
        with self._transaction() as cur:
            cur.execute("UPDATE run SET monitors=? WHERE run.id = ?", (_json(record or None, none_as_null=True), run_id))

    def add_monitor_series(self, run_id: int, monitor: str, repetition: int,
                           rows: Iterable[tuple[int | None, float, dict]]) -> int:
        values = [(run_id, monitor, repetition, p, float(t),
                   _json({k: v for k, v in vals.items() if v == v and abs(v) != float("inf")}))
                  for p, t, vals in rows]
        if values:
            with self._transaction() as cur:
                cur.executemany('INSERT INTO monitor_series (run_id, monitor, repetition, process, t, "values") '
                                "VALUES (?, ?, ?, ?, ?, ?)", values)
        return len(values)

    def add_failure(self, run_id: int, item: str, message: str) -> None:
        with self._transaction() as cur:
            cur.execute("DELETE FROM failure WHERE failure.run_id = ? AND failure.item = ?", (run_id, item))
            cur.execute("INSERT INTO failure (run_id, item, message) VALUES (?, ?, ?)", (run_id, item, message))

    def finish_run(self, run_id: int, status: str, error: str | None = None) -> None:
        """Close a run with its status; on a full disk, the reserve makes room for it."""
        def close() -> None:
            with self._transaction() as cur:
                cur.execute("UPDATE run SET finished=?, status=?, error=? WHERE run.id = ?",
                            (_time(utcnow()), status, error, run_id))

        try:
            close()
        except PerflabError as e:
            # the driver's error is the context of the one-line error (_transaction)
            if not (e.__context__ is not None and disk_full(e.__context__) and self._release_reserve()):
                raise
            close()

    def delete_run(self, run_id: int) -> None:
        """Remove a run that holds no samples (bad input found before any measurement)."""
        with self._transaction() as cur:
            for table in ("failure", "sample", "monitor_series"):
                cur.execute(f"DELETE FROM {table} WHERE {table}.run_id = ?", (run_id,))
            cur.execute("DELETE FROM run WHERE run.id = ?", (run_id,))

    def annotate(self, run_id: int, comment: str) -> None:
        """`perflab annotate`: the run's comment (the caller found the run)."""
        with self._transaction() as cur:
            cur.execute("UPDATE run SET comment=? WHERE run.id = ?", (comment, run_id))

    def begin_import(self, check=None) -> RecorderImport:
        """An import in short transactions, shown at once by its commit() (Store.begin_import)."""
        return RecorderImport(self, check)


class RecorderImport(ImportBatches):
    """perflab.store.importing's batches written through a Recorder's sqlite3 connection, with the
    statements and encodings of the Store's ImportWriter on SQLite."""

    def __init__(self, recorder: Recorder, check=None):
        super().__init__(check)
        self.recorder = recorder

    def _transaction(self):
        return self.recorder._transaction()

    def _box_id(self, cur, name: str) -> int:
        cur.execute("INSERT INTO testbox (name) VALUES (?) ON CONFLICT DO NOTHING", (name,))
        (box_id,) = cur.execute("SELECT testbox.id FROM testbox WHERE testbox.name = ?", (name,)).fetchone()
        return box_id

    def _environment_id(self, cur, box_id: int, facts: dict) -> int:
        digest = hashlib.sha256(json.dumps(facts, sort_keys=True, default=str).encode()).hexdigest()
        cur.execute("INSERT INTO environment (testbox_id, digest, facts) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                    (box_id, digest, _json(facts)))
        (env_id,) = cur.execute("SELECT environment.id FROM environment WHERE environment.digest = ?",
                                (digest,)).fetchone()
        return env_id

    def _add_run_row(self, cur, v: dict) -> tuple:
        try:
            row = (v["uuid"], v["testbox_id"], v["environment_id"], v["benchmark"], v["name"], _json(v["params"]),
                   v["tag"], v["commit"], _boolean(v["dirty"]), _time(v["started"]), _time(v["finished"]),
                   v["status"], v["comment"], v["error"], v["host"], v["pid"], v["pid_start"],
                   _json(v["job"], none_as_null=True), _json(v["monitors"], none_as_null=True))
        except (TypeError, ValueError) as e:   # a value no column takes: as the Store says it, one line
            raise self.recorder._fail(e) from None
        cur.execute(
            'INSERT INTO run (uuid, testbox_id, environment_id, benchmark, name, params, tag, "commit", dirty, started, '
            "finished, status, comment, error, host, pid, pid_start, job, monitors) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING", row)
        return cur.execute("SELECT run.id, run.status, run.host, run.pid, run.pid_start FROM run WHERE run.uuid = ?",
                           (v["uuid"],)).fetchone()

    def _add_failures(self, cur, run_id: int, failures) -> None:
        cur.executemany("INSERT INTO failure (run_id, item, message) VALUES (?, ?, ?)",
                        [(run_id, item, message) for item, message in failures])

    def _add_series(self, cur, run_id: int, series) -> None:
        cur.executemany('INSERT INTO monitor_series (run_id, monitor, repetition, process, t, "values") '
                        "VALUES (?, ?, ?, ?, ?, ?)", [(run_id, m, r, p, t, _json(v)) for m, r, p, t, v in series])

    def _add_samples(self, cur, run_id: int, rows) -> None:
        # the importer's rows as they are (the Store's ImportWriter hands them to the driver too)
        if rows and len(rows[0]) == 6:
            cur.executemany(f"INSERT INTO sample (run_id, metric, value, unit, direction, repetition, process) "
                            f"VALUES ({int(run_id)}, ?, ?, ?, ?, ?, ?)", rows)
        else:
            cur.executemany(f"INSERT INTO sample (run_id, metric, value, unit, direction, repetition) "
                            f"VALUES ({int(run_id)}, ?, ?, ?, ?, ?)", rows)

    def _set_status(self, cur, status: str, ids: list[int]) -> None:
        cur.execute(f"UPDATE run SET status=?, host=NULL, pid=NULL, pid_start=NULL WHERE run.id IN ({_marks(ids)})",
                    (status, *ids))

    def _delete_samples(self, cur, run_ids: list[int], limit: int) -> int:
        cur.execute(f"DELETE FROM sample WHERE sample.id IN (SELECT sample.id FROM sample "
                    f"WHERE sample.run_id IN ({_marks(run_ids)}) LIMIT ?)", (*run_ids, int(limit)))
        return cur.rowcount

    def _delete_runs(self, cur, run_ids: list[int]) -> None:
        for table in ("failure", "monitor_series"):
            cur.execute(f"DELETE FROM {table} WHERE {table}.run_id IN ({_marks(run_ids)})", run_ids)
        cur.execute(f"DELETE FROM run WHERE run.id IN ({_marks(run_ids)}) AND run.status = ?", (*run_ids, IMPORTING))


def _marks(values) -> str:
    return ", ".join("?" * len(values))


def open_recorder(target: str) -> Recorder | None:
    """A Recorder of the SQLite store file `target` (a path), or None where the Store must open it."""
    import sqlite3

    if "://" in target or target == ":memory:" or target.startswith("file:"):
        return None
    path = os.path.abspath(os.path.expanduser(target))
    folder = os.path.dirname(path)
    if not (os.path.isdir(folder) and os.access(folder, os.W_OK)):
        return None   # the Store makes the folder or says why it cannot
    if os.path.exists(path) and not (os.path.isfile(path) and os.access(path, os.R_OK | os.W_OK)):
        return None   # read-only or not a file: the Store says what it can do with it
    try:
        # As the Store's engine: the same settings (perflab.store.basics.sqlite_pragmas); no implicit
        # transactions (each write is one explicit transaction).
        connection = sqlite3.connect(path, timeout=30, isolation_level=None)
    except sqlite3.Error:
        return None
    recorder = Recorder(connection, target, path)
    try:
        sqlite_pragmas(connection.cursor())
        if not _at_head(connection, folder):
            recorder.close()
            return None
        if _anything_to_reap(connection):
            recorder.close()
            return None
    except sqlite3.Error:
        recorder.close()
        return None   # the Store opens it again and says what is wrong
    return recorder


def _at_head(connection, folder: str) -> bool:
    """The store is at the head revision, made so here when the file is new (empty): from the
    template, in one transaction, under the Store's lock for making a schema (a lock of the
    store's folder, perflab.store.engine.Database._migration_lock)."""
    import fcntl
    import sqlite3

    def revision():
        try:
            (found,) = connection.execute("SELECT version_num FROM alembic_version").fetchone() or (None,)
        except sqlite3.OperationalError:
            return None   # no such table: a new file, or not a perflab store
        return found

    if revision() == HEAD_REVISION:
        return True
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if revision() == HEAD_REVISION:
            return True
        (tables,) = connection.execute("SELECT count(*) FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'").fetchone()
        statements = sqlite_template()
        if tables or statements is None:
            return False   # an old store, someone else's tables, or a template behind the migrations
        connection.execute("BEGIN")
        try:
            for statement in statements:
                connection.execute(statement)
            connection.execute("INSERT INTO alembic_version (version_num) VALUES (?)", (HEAD_REVISION,))
            connection.execute("COMMIT")
        except BaseException:
            connection.rollback()
            raise
        return True
    finally:
        os.close(fd)


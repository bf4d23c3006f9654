"""Writing an import in short transactions, all or nothing for readers.

A big import (a 48 MB hyperfine file holds 2.5 million samples) written in one
transaction holds SQLite's write lock for tens of seconds, and a `perflab run`
beside it fails with "database is locked". Instead:

- the runs are created with status 'importing', which every query of the
  store ignores (Store._run_select, Store.log_rows), with the host, pid and
  process start time of the importing process;
- runs and samples are written in batches of at most BATCH_ROWS samples (or
  BATCH_RUNS runs), one transaction each, with a pause after each so that
  another writer waiting on the lock gets it;
- at the end one short transaction gives every run its real status: the whole
  import appears at once;
- on an error or a signal, what was written is deleted, again in batches;
- after kill -9 the 'importing' runs remain, invisible; the next perflab
  command on this host finds their writer gone and deletes them
  (Store.discard_dead_imports, called by Store.reap_dead_runs).
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from itertools import islice
from dataclasses import dataclass

from perflab.core.errors import PerflabError
from perflab.store.rows import IMPORTING, database_error, process_start_time

# One batch of 10,000 samples is one transaction of about 50 ms on a laptop-class
# disk (SQLite, WAL); see tools/bench/import_speed.py for the lock figures.
BATCH_ROWS = 10_000
BATCH_RUNS = 500
# After each transaction the writer sleeps PAUSE_RATIO of the time it held the
# lock (at least PAUSE_MIN): SQLite's busy handler polls, so a waiting writer
# only gets in when it polls while the lock is free.
PAUSE_RATIO = 0.25
PAUSE_MIN = 0.002
_SKIPPED = 0  # a handle's run id when its uuid is already in the store
_ROW_COLUMNS = ("metric", "value", "unit", "direction", "repetition")
# perflab's own exports (version 2) also say which process of the repetition a sample came from.
_ROW_COLUMNS_WITH_PROCESS = _ROW_COLUMNS + ("process",)
_RUN_ID_MARK = "987654321987654321"  # stands for the run id in the INSERT template


@dataclass
class FileCounts:
    runs: int = 0  # runs imported
    skipped: int = 0  # runs already present (same uuid)
    samples: int = 0  # samples of the imported runs


class ImportBatches:
    """The sink of perflab.exchange.importers: add_run, add_samples, then commit or rollback.

    The batches, the counts and the all-or-nothing rules, the same whichever way the rows are
    written: ImportWriter through the Store's SQLAlchemy engine (SQLite or PostgreSQL), and
    perflab.store.recording.RecorderImport through sqlite3 (an SQLite store `perflab import`
    can simply add to, without SQLAlchemy's import). A subclass writes: _transaction,
    _box_id, _environment_id, _add_run_row, _add_failures, _add_series, _add_samples,
    _set_status, _delete_samples, _delete_runs.

    `check` is called between transactions (never inside one): it raises to
    stop the import at a point where nothing is half-written (a signal turned
    into a flag by the caller).
    """

    _sqlite = True   # pause after each transaction (_pause)

    def __init__(self, check: Callable[[], None] | None = None):
        self.check = check or (lambda: None)
        self.files: list[FileCounts] = []
        self._writer = (socket.gethostname(), os.getpid(), process_start_time(os.getpid()))
        self._pending_runs: list[tuple[int, dict]] = []
        self._pending_rows: list[tuple[int, list[tuple]]] = []  # (handle, rows)
        self._pending_count = 0
        self._ids: list[int | None] = []  # per handle: None until written, _SKIPPED, or the run id
        self._file_of: list[int] = []
        self._final: dict[int, str] = {}  # run id -> the status it gets at commit
        self._written: list[int] = []
        self._uuids: set[str] = set()
        self._boxes: dict[str, int] = {}
        self._environments: dict[str, int] = {}

    # -- the sink ---------------------------------------------------------------
    def begin_file(self) -> None:
        self.files.append(FileCounts())

    def add_run(self, run: dict) -> int:
        """A run dictionary (perflab export shape, checked, without samples); returns its handle."""
        if not self.files:
            self.begin_file()
        handle = len(self._ids)
        self._file_of.append(len(self.files) - 1)
        if run["uuid"] in self._uuids:  # the same run twice in this import (a file named twice)
            self._ids.append(_SKIPPED)
            self.files[-1].skipped += 1
        else:
            self._uuids.add(run["uuid"])
            self._ids.append(None)
            self._pending_runs.append((handle, run))
            if len(self._pending_runs) >= BATCH_RUNS:
                self._flush()
        return handle

    def add_samples(self, handle: int, rows: Iterable[tuple]) -> None:
        """Rows (metric, value, unit, direction, repetition) of the run `handle`,
        taken in slices (no copy of each row) and written a batch at a time."""
        if self._ids[handle] == _SKIPPED:
            return
        rows = iter(rows)
        while True:
            chunk = list(islice(rows, BATCH_ROWS - self._pending_count))
            if not chunk:
                return
            self._pending_rows.append((handle, chunk))
            self._pending_count += len(chunk)
            if self._pending_count >= BATCH_ROWS:
                self._flush()

    @property
    def wrote_anything(self) -> bool:
        """Whether a transaction of this import was committed (and so rollback has work)."""
        return bool(self._written)

    # -- the end ----------------------------------------------------------------
    def commit(self) -> list[FileCounts]:
        """Write what is pending, then show every run at once (one short transaction)."""
        self._flush()
        self.check()
        by_status: dict[str, list[int]] = {}
        for run_id, status in self._final.items():
            by_status.setdefault(status, []).append(run_id)
        with self._transaction() as conn:
            for status, ids in by_status.items():
                for i in range(0, len(ids), 5000):
                    self._set_status(conn, status, ids[i : i + 5000])
        self._written = []
        return self.files

    def rollback(self) -> None:
        """Delete what this import wrote (in batches: other writers go on meanwhile)."""
        self._pending_runs, self._pending_rows, self._pending_count = [], [], 0
        written, self._written = self._written, []
        self.discard(written)

    def discard(self, run_ids: list[int]) -> None:
        """Delete runs of an import that did not complete, with their samples: a
        batch of samples per transaction, and the same pauses as writing."""
        delete_batch = BATCH_ROWS * 5  # deleting is cheaper than inserting
        for i in range(0, len(run_ids), 500):
            chunk = run_ids[i : i + 500]
            while True:
                start = time.monotonic()
                with self._transaction() as conn:
                    deleted = self._delete_samples(conn, chunk, delete_batch)
                self._pause(time.monotonic() - start)
                if deleted < delete_batch:
                    break
            with self._transaction() as conn:
                self._delete_runs(conn, chunk)

    # -- writing ------------------------------------------------------------------
    def _flush(self) -> None:
        self.check()
        runs, chunks = self._pending_runs, self._pending_rows
        self._pending_runs, self._pending_rows, self._pending_count = [], [], 0
        if not runs and not chunks:
            return
        new: list[tuple[int, int, str]] = []  # (handle, run id, final status)
        skipped: list[int] = []
        start = time.monotonic()
        try:
            with self._transaction() as conn:
                for handle, run in runs:
                    run_id = self._insert_run(conn, run)
                    if run_id == _SKIPPED:
                        skipped.append(handle)
                    else:
                        new.append((handle, run_id, "interrupted" if run["status"] == "running" else run["status"]))
                    self._ids[handle] = run_id
                ids = self._ids
                # One executemany per run: Go output hands over a few rows per line.
                by_run: dict[int, list[tuple]] = {}
                for handle, rows in chunks:
                    if ids[handle]:
                        by_run.setdefault(ids[handle], []).extend(rows)
                for run_id, rows in by_run.items():
                    self._add_samples(conn, run_id, rows)
        except BaseException:
            for handle, _run in runs:
                self._ids[handle] = None
            raise
        held = time.monotonic() - start
        for handle, run_id, status in new:
            self._written.append(run_id)
            self._final[run_id] = status
            self.files[self._file_of[handle]].runs += 1
        for handle in skipped:
            self.files[self._file_of[handle]].skipped += 1
        for handle, rows in chunks:
            if ids[handle]:
                self.files[self._file_of[handle]].samples += len(rows)
        self._pause(held)

    def _insert_run(self, conn, run: dict) -> int:
        """Insert one run as 'importing'; _SKIPPED when its uuid is already stored."""
        box_id = self._boxes.get(run["testbox"])
        if box_id is None:
            box_id = self._boxes[run["testbox"]] = self._box_id(conn, run["testbox"])
        key = json.dumps(run["environment"], sort_keys=True, default=str)
        env_id = self._environments.get(key)
        if env_id is None:
            env_id = self._environments[key] = self._environment_id(conn, box_id, run["environment"])
        host, pid, pid_start = self._writer
        # Insert first, then read: the insert takes the write lock (waiting under the busy
        # timeout) instead of racing another writer between a read and a write.
        run_id, status, *writer = self._add_run_row(conn, dict(
            uuid=run["uuid"], testbox_id=box_id, environment_id=env_id, benchmark=run["benchmark"],
            name=run["name"], params=run["params"], tag=run.get("tag"), commit=run.get("commit"),
            dirty=run.get("dirty"), started=run["started"], finished=run.get("finished"), status=IMPORTING,
            comment=run.get("comment"), error=run.get("error"), host=host, pid=pid, pid_start=pid_start,
            job=run.get("job"), monitors=run.get("monitors"),
        ))
        if status != IMPORTING:
            return _SKIPPED
        if tuple(writer) != self._writer:
            raise PerflabError(
                f"run {run['uuid']} ({run['name'][:60]}) is being imported by another perflab process "
                f"(pid {writer[1]} on {writer[0]}); try again when it has finished")
        if run.get("failures"):
            self._add_failures(conn, run_id, run["failures"])
        if run.get("monitor_series"):
            self._add_series(conn, run_id, run["monitor_series"])
        return run_id

    def _pause(self, held: float) -> None:
        """Let a waiting SQLite writer in after a transaction that held the lock for
        `held` seconds. PostgreSQL has no database-wide write lock: no pause."""
        if self._sqlite:
            time.sleep(max(PAUSE_MIN, held * PAUSE_RATIO))

    # -- what a subclass writes with ------------------------------------------------
    def _transaction(self):
        """A context: one transaction, committed on the way out, rolled back on an error, which
        it raises as a one-line PerflabError naming the store; gives what the writes take."""
        raise NotImplementedError

    def _box_id(self, conn, name: str) -> int:
        raise NotImplementedError

    def _environment_id(self, conn, box_id: int, facts: dict) -> int:
        raise NotImplementedError

    def _add_run_row(self, conn, values: dict) -> tuple:
        """INSERT ... ON CONFLICT DO NOTHING of a run, then (id, status, host, pid, pid_start) of its uuid."""
        raise NotImplementedError

    def _add_failures(self, conn, run_id: int, failures: list[tuple[str, str]]) -> None:
        raise NotImplementedError

    def _add_series(self, conn, run_id: int, series: list[tuple]) -> None:
        raise NotImplementedError

    def _add_samples(self, conn, run_id: int, rows: list[tuple]) -> None:
        raise NotImplementedError

    def _set_status(self, conn, status: str, ids: list[int]) -> None:
        """Give runs their real status and forget their writer: they appear."""
        raise NotImplementedError

    def _delete_samples(self, conn, run_ids: list[int], limit: int) -> int:
        """Delete at most `limit` samples of the runs; how many were deleted."""
        raise NotImplementedError

    def _delete_runs(self, conn, run_ids: list[int]) -> None:
        """Delete the runs still 'importing', with their failures and series."""
        raise NotImplementedError


class ImportWriter(ImportBatches):
    """An import through the Store's SQLAlchemy engine: SQLite or PostgreSQL."""

    def __init__(self, store, check: Callable[[], None] | None = None):
        super().__init__(check)
        self.store = store
        self._sqlite = store.engine.dialect.name == "sqlite"
        self._sample_sql, self._sample_order = _sample_insert(store.engine.dialect, _ROW_COLUMNS)
        self._sample_sql6, self._sample_order6 = _sample_insert(store.engine.dialect, _ROW_COLUMNS_WITH_PROCESS)

    @contextmanager
    def _transaction(self):
        from sqlalchemy.exc import SQLAlchemyError

        try:
            with self.store.engine.begin() as conn:
                yield conn
        except SQLAlchemyError as e:
            raise database_error(self.store.label, e) from None

    def _box_id(self, conn, name: str) -> int:
        from perflab.store.rows import box_id_of

        return box_id_of(conn, self.store.label, name)

    def _environment_id(self, conn, box_id: int, facts: dict) -> int:
        from perflab.store.rows import environment_id

        return environment_id(conn, self.store.label, box_id, facts)

    def _add_run_row(self, conn, values: dict) -> tuple:
        from sqlalchemy import select

        from perflab.store import schema as s
        from perflab.store.rows import insert_ignore

        insert_ignore(conn, self.store.label, s.run, values)
        return tuple(conn.execute(select(s.run.c.id, s.run.c.status, s.run.c.host, s.run.c.pid, s.run.c.pid_start)
                                  .where(s.run.c.uuid == values["uuid"])).one())

    def _add_failures(self, conn, run_id: int, failures: list[tuple[str, str]]) -> None:
        from sqlalchemy import insert

        from perflab.store import schema as s

        for item, message in failures:
            conn.execute(insert(s.failure).values(run_id=run_id, item=item, message=message))

    def _add_series(self, conn, run_id: int, series: list[tuple]) -> None:
        from sqlalchemy import insert

        from perflab.store import schema as s

        conn.execute(insert(s.monitor_series), [
            {"run_id": run_id, "monitor": m, "repetition": r, "process": p, "t": t, "values": v}
            for m, r, p, t, v in series])

    def _add_samples(self, conn, run_id: int, rows: list[tuple]) -> None:
        """The driver's executemany straight from the importer's rows: the run id is
        part of the statement, so that no row is copied to add it (SQLAlchemy's
        per-row processing would be most of the cost of a big import). On
        PostgreSQL, COPY (rows.copy_rows)."""
        if rows and len(rows[0]) == len(_ROW_COLUMNS_WITH_PROCESS):
            columns, sql, order = _ROW_COLUMNS_WITH_PROCESS, self._sample_sql6, self._sample_order6
        else:
            columns, sql, order = _ROW_COLUMNS, self._sample_sql, self._sample_order
        if conn.dialect.name == "postgresql":
            from perflab.store.rows import copy_rows

            copy_rows(conn, "sample", ("run_id", *columns), rows, prefix=(int(run_id),))
            return
        text = sql.replace(_RUN_ID_MARK, str(int(run_id)))
        if order is None:  # a driver with named parameters (psycopg)
            params = [dict(zip(columns, row)) for row in rows]
        elif order != list(range(len(columns))):
            params = [tuple(row[i] for i in order) for row in rows]
        else:
            params = rows
        conn.exec_driver_sql(text, params)

    def _set_status(self, conn, status: str, ids: list[int]) -> None:
        from sqlalchemy import update

        from perflab.store import schema as s

        conn.execute(update(s.run).where(s.run.c.id.in_(ids)).values(status=status, host=None, pid=None, pid_start=None))

    def _delete_samples(self, conn, run_ids: list[int], limit: int) -> int:
        from sqlalchemy import select

        from perflab.store import schema as s

        doomed = select(s.sample.c.id).where(s.sample.c.run_id.in_(run_ids)).limit(limit)
        return conn.execute(s.sample.delete().where(s.sample.c.id.in_(doomed))).rowcount

    def _delete_runs(self, conn, run_ids: list[int]) -> None:
        from perflab.store import schema as s

        conn.execute(s.failure.delete().where(s.failure.c.run_id.in_(run_ids)))
        conn.execute(s.monitor_series.delete().where(s.monitor_series.c.run_id.in_(run_ids)))
        conn.execute(s.run.delete().where(s.run.c.id.in_(run_ids) & (s.run.c.status == IMPORTING)))


def _sample_insert(dialect, columns: tuple[str, ...]) -> tuple[str, list[int] | None]:
    """The INSERT of one sample, with _RUN_ID_MARK where the run id goes, and
    the order of its parameters in a row (None for a driver with named parameters)."""
    from sqlalchemy import bindparam, insert, literal_column

    from perflab.store import schema as s

    compiled = (insert(s.sample)
                .values(run_id=literal_column(_RUN_ID_MARK), **{c: bindparam(c) for c in columns})
                .compile(dialect=dialect))
    if _RUN_ID_MARK not in compiled.string:
        raise RuntimeError(f"cannot place the run id in {compiled.string!r}")
    order = [columns.index(c) for c in compiled.positiontup] if compiled.positional else None
    return compiled.string, order


def discard(store, run_ids: list[int]) -> None:
    """Delete runs of an import that did not complete (Store.discard_dead_imports)."""
    ImportWriter(store).discard(run_ids)

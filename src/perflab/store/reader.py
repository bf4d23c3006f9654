"""The store's run queries in plain SQL over a DB-API cursor, and a reader of SQLite stores without SQLAlchemy.

`perflab log` and `show` spend a few milliseconds in their queries and spent 0.1 s importing
SQLAlchemy to make them (issue 47). The queries the reading commands use - runs, the log's
means, samples and their sums, failures, run names, monitor series - are written here once, in SQL that SQLite and PostgreSQL both read, and
run on a DB-API cursor: the Store (perflab.store.queries) gets that cursor from its SQLAlchemy
engine, a `Reader` from the standard library's sqlite3. One read path per query, whichever
way the store was opened.

`open_reader(target)` opens an SQLite store for reading when that is all a command needs:
a file that exists, is writable (so nothing about it would be read-only), at this perflab's
schema revision, with no dead run to reap. Anything else - a URL, a new or old store, a run
whose process is gone - returns None and the command opens the Store (perflab.store.db), which
creates, upgrades and reaps. `perflab run` writes with perflab.store.recording, a Reader that
adds runs as the Store adds them.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
from collections import namedtuple
from contextlib import contextmanager
from functools import lru_cache, partial

from perflab.core.errors import PerflabError
from perflab.store.exactness import StoredSample
from perflab.store.basics import HEAD_REVISION
from perflab.store.rows import IMPORTING, database_error, process_start_time

# Ids are 64-bit integers on both backends (SQLite's rowid, PostgreSQL's bigint since
# revision 0005): a larger number names no run, and either database would refuse to
# even compare with it.
MAX_RUN_ID = 2**63 - 1

# The run table's columns in perflab.store.schema's order (tests/test_startup.py checks them),
# then the testbox's name as `box` and the environment's facts as `environment`.
RUN_COLUMNS = ("id", "uuid", "testbox_id", "environment_id", "benchmark", "name", "params", "tag", "commit",
               "dirty", "started", "finished", "status", "comment", "error", "host", "pid", "pid_start", "job",
               "monitors")


def _row(name: str, fields) -> type:
    """A row type: a named tuple that also answers `row._mapping[column]`, as SQLAlchemy's Row does."""
    base = namedtuple(name, fields)
    return type(name, (base,), {"__slots__": (), "_mapping": property(lambda self: dict(zip(self._fields, self)))})


RunRow = _row("RunRow", (*RUN_COLUMNS, "box", "environment"))
_JSON = [*(RUN_COLUMNS.index(c) for c in ("params", "job", "monitors")), len(RUN_COLUMNS) + 1]
_TIMES = {RUN_COLUMNS.index(c) for c in ("started", "finished")}
_DIRTY = RUN_COLUMNS.index("dirty")


def _columns(names) -> str:
    """Columns of table run, quoted: "commit" is a word of SQL."""
    return ", ".join(f'run."{c}"' for c in names)


_RUNS = (f"SELECT {_columns(RUN_COLUMNS)}, "
         "testbox.name AS box, environment.facts AS environment FROM run "
         "JOIN testbox ON testbox.id = run.testbox_id JOIN environment ON environment.id = run.environment_id")
FailureRow = _row("FailureRow", ("run_id", "item", "message"))
SeriesRow = _row("SeriesRow", ("run_id", "monitor", "repetition", "process", "t", "values"))
_LOG_FIELDS = ("id", "started", "status", "tag", "commit", "dirty", "comment", "name", "benchmark")


@lru_cache(maxsize=None)
def _log_row(metrics: int):
    """The row type of `log_rows` with `metrics` means (m0, m1, ...)."""
    return _row("LogRow", (*_LOG_FIELDS, *(f"m{i}" for i in range(metrics))))


def _time(value):
    """A stored time as SQLAlchemy's DateTime gives it: SQLite keeps text, PostgreSQL a timestamp."""
    return dt.datetime.fromisoformat(value) if isinstance(value, str) else value


def _run_rows(rows: list[tuple]) -> list[RunRow]:
    """Rows of run with the values SQLAlchemy's types gave: JSON decoded, times and booleans.

    Equal JSON text is decoded once per query: the store keeps one environment for all runs of
    an unchanged machine, and a thousand runs of one job have one params and job text (decoding
    each cost `perflab log` 25 ms of its 100). So rows of one query may share a decoded dict:
    they are records to read, never changed in place."""
    decoded: dict = {}

    def value(text):
        if not isinstance(text, (str, bytes)):
            return text   # NULL, or psycopg's own decoding
        if text not in decoded:
            decoded[text] = json.loads(text)
        return decoded[text]

    out = []
    for row in rows:
        values = list(row)
        for i in _JSON:
            values[i] = value(values[i])
        for i in _TIMES:
            values[i] = _time(values[i])
        if values[_DIRTY] is not None:
            values[_DIRTY] = bool(values[_DIRTY])
        out.append(RunRow._make(values))
    return out


class RunQueries:
    """The queries of runs and their samples; the class that mixes it in gives `_cursor()`
    (a DB-API cursor in a context), `_mark` (the driver's placeholder), `_sqlite` (times are
    text), `_errors` (the exceptions a failed query raises) and `label`."""

    _mark = "?"
    _sqlite = True
    _errors: tuple[type[BaseException], ...] = ()
    label: str

    def _fail(self, e: Exception) -> PerflabError:
        return database_error(self.label, e)

    def _marks(self, n: int) -> str:
        return ", ".join([self._mark] * n)

    def _query(self, sql: str, params: list | tuple = ()) -> list[tuple]:
        try:
            with self._cursor() as cursor:
                cursor.execute(sql, list(params))
                return cursor.fetchall()
        except self._errors as e:
            raise self._fail(e) from None

    def _runs(self, where: list[str], params: list, tail: str = "") -> list[RunRow]:
        # an import not yet complete is invisible
        sql = f"{_RUNS} WHERE {' AND '.join([f'run.status != {self._mark}', *where])}{tail}"
        return _run_rows(self._query(sql, [IMPORTING, *params]))

    def get_run(self, run_id: int | str) -> RunRow:
        from perflab.core.text import printable

        try:
            rid = int(str(run_id).lstrip("#"))
        except ValueError:
            raise PerflabError(f"run id '{printable(run_id, 40)}' is not a number") from None
        if not 1 <= rid <= MAX_RUN_ID:
            raise PerflabError(f"run id {printable(run_id, 40)} is out of range: run ids are 1 to {MAX_RUN_ID}")
        try:
            rows = self._runs([f"run.id = {self._mark}"], [rid])
        except ValueError as e:    # a JSON column that does not decode: the store was edited or damaged
            raise PerflabError(f"run #{rid} in {self.label}: a stored field is not valid JSON ({e}); "
                               "the record is damaged") from None
        if not rows:
            raise PerflabError(f"no run with id {rid} in {self.label}")
        return rows[0]

    def find_runs(self, *, benchmark=None, tag=None, box=None, since=None, status=None, limit=None, ids=None,
                  uuids=None) -> list[RunRow]:
        where, params = self._filters(benchmark=benchmark, tag=tag, box=box, since=since)
        if status:
            where.append(f"run.status = {self._mark}")
            params.append(status)
        for column, values in (("id", None if ids is None else [i for i in ids if 1 <= i <= MAX_RUN_ID]),
                               ("uuid", None if uuids is None else list(uuids))):
            if values is not None:
                if not values:
                    return []
                where.append(f"run.{column} IN ({self._marks(len(values))})")
                params += values
        tail = " ORDER BY run.started, run.id" + (f" LIMIT {int(limit)}" if limit else "")
        try:
            return self._runs(where, params, tail)
        except ValueError as e:
            raise PerflabError(f"{self.label}: a run's stored field is not valid JSON ({e}); "
                               "`perflab show ID` names the run") from None

    def _filters(self, *, benchmark=None, tag=None, box=None, since=None) -> tuple[list[str], list]:
        """The WHERE terms (on table run) and parameters of the filters log, runs and export share."""
        where, params = [], []
        if benchmark:
            where.append(f"(run.benchmark = {self._mark} OR run.name = {self._mark})")
            params += [benchmark, benchmark]
        if tag:
            where.append(f"run.tag = {self._mark}")
            params.append(tag)
        if box:
            where.append(f"run.testbox_id IN (SELECT id FROM testbox WHERE name = {self._mark})")
            params.append(box)
        if since:
            where.append(f"run.started >= {self._mark}")
            # as SQLAlchemy's DateTime writes it on SQLite (text that sorts as the time); a timestamp on PostgreSQL
            params.append(since.strftime("%Y-%m-%d %H:%M:%S.%f") if self._sqlite else since)
        return where, params

    def run_names(self, limit: int = 10) -> tuple[list[str], list[str], int]:
        """(benchmark families, run names most recently run first, number of names),
        at most `limit` of each: what a filter that matched nothing could have named."""
        visible = f"WHERE status != {self._mark}"   # an import not yet complete is invisible
        n = int(limit)
        families = [f for (f,) in self._query(
            f"SELECT DISTINCT benchmark FROM run {visible} ORDER BY benchmark LIMIT {n}", [IMPORTING])]
        names = [m for (m,) in self._query(
            f"SELECT name FROM run {visible} GROUP BY name ORDER BY max(started) DESC LIMIT {n}", [IMPORTING])]
        ((count,),) = self._query(f"SELECT count(DISTINCT name) FROM run {visible}", [IMPORTING])
        return families, names, int(count)

    def log_rows(self, *, benchmark=None, tag=None, box=None, since=None,
                 metrics=("time.elapsed_time", "time.user_time", "time.system_time")):
        """One row per run, oldest first, with the mean of each named metric (one query)."""
        metrics = list(metrics)
        where, params = self._filters(benchmark=benchmark, tag=tag, box=box, since=since)
        means = "".join(f", avg(CASE WHEN sample.metric = {self._mark} THEN sample.value END)" for _ in metrics)
        sql = (f"SELECT {_columns(_LOG_FIELDS)}{means} FROM run "
               f"LEFT OUTER JOIN sample ON sample.run_id = run.id AND sample.metric IN ({self._marks(len(metrics))}) "
               f"WHERE {' AND '.join([f'run.status != {self._mark}', *where])} "
               "GROUP BY run.id ORDER BY run.started, run.id")
        row = _log_row(len(metrics))
        started, dirty = _LOG_FIELDS.index("started"), _LOG_FIELDS.index("dirty")
        out = []
        for r in self._query(sql, [*metrics, *metrics, IMPORTING, *params]):
            values = list(r)
            values[started] = _time(values[started])
            if values[dirty] is not None:
                values[dirty] = bool(values[dirty])
            out.append(row._make(values))
        return out

    def failures(self, run_ids):
        ids = list(run_ids)
        if not ids:
            return []
        return [FailureRow._make(r) for r in self._query(
            f"SELECT run_id, item, message FROM failure WHERE run_id IN ({self._marks(len(ids))}) ORDER BY id", ids)]

    def samples(self, run_ids) -> list[StoredSample]:
        """Every sample of these runs, ordered by run, metric, repetition and the order written;
        each row knows whether it is exact (perflab.store.exactness).

        Read through the DB-API cursor, as metric_values is: a StoredSample made from the
        driver's tuple costs what SQLAlchemy's Row did, so the rows carry their assumption at
        no cost (270,000 samples of 1,000 runs: 0.55 s before and after; SQLAlchemy's Rows
        remade as StoredSamples took 0.25 s more)."""
        ids = sorted({i for i in run_ids if 1 <= i <= MAX_RUN_ID})
        out: list[StoredSample] = []
        if not ids:
            return out
        row = partial(tuple.__new__, StoredSample)   # _make without its Python-level call
        # ids ascending in chunks ordered by run: the chunks follow one another in order
        for rows in self._sample_chunks(ids, "run_id, metric, value, unit, direction, repetition, process",
                                        order="ORDER BY run_id, metric, repetition, id"):
            out.extend(map(row, rows))
        return out

    def metric_values(self, run_ids, metrics) -> dict[tuple[int, str], list[float]]:
        """Every sample's value per (run, metric), in one query per 5,000 runs: for figures that
        are medians (the LMbench summary), which the database cannot reduce portably.

        Read through the DB-API cursor, not SQLAlchemy's rows: `report lmbench` over 1,000 runs
        reads ~270,000 values, and building a Row for each took 0.18 s of its second."""
        ids, names = list(run_ids), list(metrics)
        out: dict[tuple[int, str], list[float]] = {}
        if not ids or not names:
            return out
        for rows in self._sample_chunks(ids, "run_id, metric, value", names):
            for rid, metric, value in rows:
                values = out.get((rid, metric))
                if values is None:
                    out[(rid, metric)] = [float(value)]
                else:
                    values.append(float(value))
        return out

    def metric_sums(self, run_ids, metrics) -> dict[tuple[int, str], tuple[float, int]]:
        """(sum, count) of the samples per (run, metric), computed by the database in one
        query per 5,000 runs; callers pool several runs or take a run's mean from it."""
        ids, names = list(run_ids), list(metrics)
        out: dict[tuple[int, str], tuple[float, int]] = {}
        if not ids or not names:
            return out
        for rows in self._sample_chunks(ids, "run_id, metric, sum(value), count(*)", names,
                                        order="GROUP BY run_id, metric"):
            for rid, metric, total, n in rows:
                out[(rid, metric)] = (float(total), int(n))
        return out

    def sample_counts(self, run_ids) -> dict[int, int]:
        """The number of samples of each run that has any."""
        ids = list(run_ids)
        out: dict[int, int] = {}
        if ids:
            for rows in self._sample_chunks(ids, "run_id, count(*)", order="GROUP BY run_id"):
                out.update((rid, int(n)) for rid, n in rows)
        return out

    def monitor_series(self, run_ids, monitor: str | None = None) -> list[SeriesRow]:
        """Rows (run_id, monitor, repetition, process, t, values) in recorded order."""
        ids = list(run_ids)
        if not ids:
            return []
        where = f"run_id IN ({self._marks(len(ids))})" + (f" AND monitor = {self._mark}" if monitor else "")
        rows = self._query(f'SELECT run_id, monitor, repetition, process, t, "values" FROM monitor_series '
                           f"WHERE {where} ORDER BY id", [*ids, *([monitor] if monitor else [])])
        return [SeriesRow(*r[:5], json.loads(r[5]) if isinstance(r[5], (str, bytes)) else r[5]) for r in rows]

    def _sample_chunks(self, ids: list[int], columns: str, metrics=(), order: str = ""):
        """The sample table's `columns` for these runs (and metrics), one list of driver tuples per
        5,000 runs: what the read paths that meet ~270,000 rows use (building SQLAlchemy Rows for
        them cost a fifth of a second)."""
        metrics = list(metrics)
        of_metrics = f" AND metric IN ({self._marks(len(metrics))})" if metrics else ""
        try:
            with self._cursor() as cursor:
                for chunk in range(0, len(ids), 5000):
                    part = ids[chunk : chunk + 5000]
                    cursor.execute(f"SELECT {columns} FROM sample "
                                   f"WHERE run_id IN ({self._marks(len(part))}){of_metrics} {order}",
                                   [*part, *metrics])
                    yield cursor.fetchall()
        except self._errors as e:
            raise self._fail(e) from None


class Reader(RunQueries):
    """An SQLite store opened for reading with the standard library's sqlite3 (open_reader)."""

    read_only = None   # nothing refused: a reader never writes

    def __init__(self, connection, label: str, path: str):
        import sqlite3
        from pathlib import Path

        self.connection = connection
        self.label = label
        self.path = Path(path)   # as the Store's
        self._errors = (sqlite3.Error,)

    @contextmanager
    def _cursor(self):
        cursor = self.connection.cursor()
        try:
            yield cursor
        finally:
            cursor.close()
            self.connection.rollback()   # no read transaction held open between queries

    def close(self) -> None:
        self.connection.close()


def open_reader(target: str) -> Reader | None:
    """A Reader of the SQLite store file `target` (a path), or None where the Store must open it."""
    import sqlite3

    if "://" in target or target == ":memory:" or target.startswith("file:"):
        return None
    path = os.path.abspath(os.path.expanduser(target))
    if not (os.path.isfile(path) and os.access(path, os.R_OK | os.W_OK) and os.access(os.path.dirname(path), os.W_OK)):
        return None   # new (the Store creates it) or read-only (the Store says why it cannot write)
    try:
        # As the Store's engine waits for a writer's lock (perflab.store.engine._sqlite_pragmas).
        connection = sqlite3.connect(path, timeout=30)
    except sqlite3.Error:
        return None
    reader = Reader(connection, target, path)
    try:
        (revision,) = connection.execute("SELECT version_num FROM alembic_version").fetchone() or (None,)
        if revision == HEAD_REVISION and not _anything_to_reap(connection):
            return reader
    except sqlite3.Error:
        pass   # no perflab store, or one the Store must upgrade or explain: it says what is wrong
    reader.close()
    return None


def _anything_to_reap(connection) -> bool:
    """A run or import of this host whose process is gone: the Store marks or discards it (reap_dead_runs)."""
    rows = connection.execute("SELECT pid, pid_start FROM run WHERE status IN ('running', ?) AND host = ?",
                              (IMPORTING, socket.gethostname())).fetchall()
    connection.rollback()
    return any(pid is None or process_start_time(pid) != start for pid, start in rows)

"""Opening the store, migrating it, and writing to it.

SQLite by default; any SQLAlchemy URL works (PostgreSQL through psycopg 3).
Nothing here is SQLite-only except the connection pragmas, which only apply
to SQLite connections.
"""

from __future__ import annotations

from contextlib import contextmanager

import datetime as dt
import hashlib
import json
import os
import socket
import uuid as uuidlib
from collections.abc import Iterable
from pathlib import Path

from sqlalchemy import bindparam, case, create_engine, event, func, insert, select, text, update
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, SQLAlchemyError

from perflab.errors import PerflabError
from perflab.model import Sample
from perflab.store import schema as s

HEAD_REVISION = "0001"


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


def default_url() -> str:
    """$PERFLAB_DB (a path or a URL), else the XDG data directory."""
    configured = os.environ.get("PERFLAB_DB")
    if configured:
        return configured
    data_home = os.environ.get("XDG_DATA_HOME") or os.path.join(Path.home(), ".local", "share")
    return os.path.join(data_home, "perflab", "perflab.db")


def _as_url(target: str) -> str:
    if "://" in target:
        return target
    return "sqlite:///" + os.path.abspath(os.path.expanduser(target))


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    # WAL lets readers and one writer work at once; the busy timeout lets two
    # perflab processes share one database; NORMAL sync in WAL mode survives a
    # process crash or kill -9 (it is power loss that it does not cover).
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def process_start_time(pid: int) -> str | None:
    """The kernel's start time of a process, to tell a live pid from a reused one."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode(errors="replace")
    except OSError:
        return None
    # The command name may contain spaces and parentheses; fields follow the last ')'.
    fields = data[data.rindex(")") + 2 :].split()
    return fields[19]  # field 22 of stat(5): starttime


def open_store(target: str | None = None) -> "Store":
    target = target or default_url()
    try:
        url = make_url(_as_url(target))
    except ArgumentError:
        raise PerflabError(f"invalid database URL {target!r}: expected a path or a URL like sqlite:///FILE or postgresql+psycopg://HOST/DB") from None
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
        path = Path(url.database)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise PerflabError(f"cannot create the database directory {path.parent}: {e.strerror}") from None
        if path.exists() and not os.access(path, os.R_OK | os.W_OK):
            raise PerflabError(f"database file {path} is not readable and writable")
        if not path.exists() and not os.access(path.parent, os.W_OK):
            raise PerflabError(f"cannot create database file {path}: directory {path.parent} is not writable")
    try:
        engine = create_engine(url)
    except (NoSuchModuleError, ArgumentError, ImportError) as e:
        raise PerflabError(f"cannot use database URL {target!r}: {e}") from None
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    store = Store(engine, str(target))
    store.migrate()
    return store


class Store:
    def __init__(self, engine: Engine, label: str):
        self.engine = engine
        self.label = label

    # -- setup ---------------------------------------------------------------
    def _fail(self, e: Exception) -> PerflabError:
        detail = str(getattr(e, "orig", e) or e).splitlines()[0]
        return PerflabError(f"database {self.label}: {detail}")

    def migrate(self) -> None:
        """Bring the schema to the head revision (Alembic), cheaply when it is there.

        Two processes may open a new database at once: the upgrade runs under a
        lock (a lock file beside an SQLite database, an advisory lock on
        PostgreSQL) and the revision is checked again once the lock is held.
        """
        try:
            if self._revision() == HEAD_REVISION:
                return
            with self._migration_lock():
                with self.engine.connect() as conn:
                    if self._revision(conn) == HEAD_REVISION:
                        return
                    # Import Alembic only when there is work for it: it costs start-up time.
                    from alembic import command
                    from alembic.config import Config

                    cfg = Config(str(Path(__file__).with_name("alembic.ini")))
                    cfg.set_main_option("script_location", str(Path(__file__).with_name("migrations")))
                    cfg.attributes["connection"] = conn
                    command.upgrade(cfg, "head")
                    conn.commit()
        except SQLAlchemyError as e:
            raise self._fail(e) from None

    def _revision(self, conn=None) -> str | None:
        if conn is None:
            with self.engine.connect() as c:
                return self._revision(c)
        if not self.engine.dialect.has_table(conn, "alembic_version"):
            return None
        return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()

    @contextmanager
    def _migration_lock(self):
        url = self.engine.url
        if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
            import fcntl

            # Lock the database's directory: no stray lock file is left behind.
            try:
                fd = os.open(Path(url.database).resolve().parent, os.O_RDONLY)
            except OSError:
                fd = None  # the upgrade itself will report what is wrong
            try:
                if fd is not None:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                if fd is not None:
                    os.close(fd)
        elif url.get_backend_name() == "postgresql":
            with self.engine.connect() as lock_conn:
                lock_conn.execute(text("SELECT pg_advisory_lock(7450811)"))
                try:
                    yield
                finally:
                    lock_conn.execute(text("SELECT pg_advisory_unlock(7450811)"))
                    lock_conn.commit()
        else:
            yield

    # -- writing -------------------------------------------------------------
    def _insert_ignore(self, conn, table, **values) -> None:
        """INSERT that does nothing when a unique key already exists.

        Writing first (rather than select-then-insert) matters with two writers:
        it takes SQLite's write lock, waiting under the busy timeout, instead of
        racing another process between the read and the write.
        """
        name = self.engine.dialect.name
        if name == "sqlite":
            from sqlalchemy.dialects.sqlite import insert as dialect_insert
        elif name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as dialect_insert
        else:
            raise PerflabError(f"database {self.label}: unsupported backend {name}")
        conn.execute(dialect_insert(table).values(**values).on_conflict_do_nothing())

    def _testbox_id(self, conn, name: str) -> int:
        self._insert_ignore(conn, s.testbox, name=name)
        return conn.execute(select(s.testbox.c.id).where(s.testbox.c.name == name)).scalar_one()

    def _environment_id(self, conn, testbox_id: int, facts: dict) -> int:
        digest = hashlib.sha256(json.dumps(facts, sort_keys=True, default=str).encode()).hexdigest()
        self._insert_ignore(conn, s.environment, testbox_id=testbox_id, digest=digest, facts=facts)
        return conn.execute(select(s.environment.c.id).where(s.environment.c.digest == digest)).scalar_one()

    def create_run(
        self,
        *,
        testbox: str,
        environment: dict,
        benchmark: str,
        name: str,
        params: dict,
        tag: str | None = None,
        commit: str | None = None,
        dirty: bool | None = None,
        comment: str | None = None,
    ) -> int:
        try:
            with self.engine.begin() as conn:
                box_id = self._testbox_id(conn, testbox)
                env_id = self._environment_id(conn, box_id, environment)
                pid = os.getpid()
                return conn.execute(
                    insert(s.run).values(
                        uuid=str(uuidlib.uuid4()),
                        testbox_id=box_id,
                        environment_id=env_id,
                        benchmark=benchmark,
                        name=name,
                        params=params,
                        tag=tag,
                        commit=commit,
                        dirty=dirty,
                        started=utcnow(),
                        status="running",
                        comment=comment,
                        host=socket.gethostname(),
                        pid=pid,
                        pid_start=process_start_time(pid),
                    )
                ).inserted_primary_key[0]
        except SQLAlchemyError as e:
            raise self._fail(e) from None

    def add_samples(self, run_id: int, repetition: int, samples: Iterable[Sample]) -> int:
        rows = [(run_id, x.metric, float(x.value), x.unit, int(x.direction), repetition) for x in samples]
        if rows:
            try:
                with self.engine.begin() as conn:
                    # The driver's executemany straight away: SQLAlchemy's per-row
                    # processing would be most of the cost of recording.
                    conn.exec_driver_sql(self._sample_insert_sql, self._sample_params(rows))
            except SQLAlchemyError as e:
                raise self._fail(e) from None
        return len(rows)

    _SAMPLE_COLUMNS = ("run_id", "metric", "value", "unit", "direction", "repetition")

    @property
    def _sample_insert_sql(self) -> str:
        if not hasattr(self, "_sample_sql"):
            compiled = insert(s.sample).values({c: bindparam(c) for c in self._SAMPLE_COLUMNS}).compile(dialect=self.engine.dialect)
            self._sample_sql = compiled.string
            self._sample_positional = compiled.positiontup if compiled.positional else None
        return self._sample_sql

    def _sample_params(self, rows: list[tuple]) -> list:
        order = self._sample_positional
        if order is None:
            return [dict(zip(self._SAMPLE_COLUMNS, r)) for r in rows]
        index = [self._SAMPLE_COLUMNS.index(name) for name in order]
        return [tuple(r[i] for i in index) for r in rows]

    def add_failure(self, run_id: int, item: str, message: str) -> None:
        try:
            with self.engine.begin() as conn:
                conn.execute(s.failure.delete().where((s.failure.c.run_id == run_id) & (s.failure.c.item == item)))
                conn.execute(insert(s.failure).values(run_id=run_id, item=item, message=message))
        except SQLAlchemyError as e:
            raise self._fail(e) from None

    def finish_run(self, run_id: int, status: str, error: str | None = None) -> None:
        try:
            with self.engine.begin() as conn:
                conn.execute(
                    update(s.run).where(s.run.c.id == run_id)
                    .values(status=status, finished=utcnow(), error=error)
                )
        except SQLAlchemyError as e:
            raise self._fail(e) from None

    def delete_run(self, run_id: int) -> None:
        """Remove a run that holds no samples (bad input found before any measurement)."""
        try:
            with self.engine.begin() as conn:
                conn.execute(s.failure.delete().where(s.failure.c.run_id == run_id))
                conn.execute(s.sample.delete().where(s.sample.c.run_id == run_id))
                conn.execute(s.run.delete().where(s.run.c.id == run_id))
        except SQLAlchemyError as e:
            raise self._fail(e) from None

    def annotate(self, run_id: int, comment: str) -> None:
        self.get_run(run_id)
        with self.engine.begin() as conn:
            conn.execute(update(s.run).where(s.run.c.id == run_id).values(comment=comment))

    def reap_dead_runs(self) -> int:
        """Mark as interrupted the runs of this host whose writer process is gone."""
        host = socket.gethostname()
        try:
            with self.engine.begin() as conn:
                rows = conn.execute(
                    select(s.run.c.id, s.run.c.pid, s.run.c.pid_start)
                    .where((s.run.c.status == "running") & (s.run.c.host == host))
                ).all()
                dead = [r.id for r in rows if r.pid is None or process_start_time(r.pid) != r.pid_start]
                if dead:
                    conn.execute(
                        update(s.run).where(s.run.c.id.in_(dead))
                        .values(status="interrupted", error="the perflab process was killed (found gone by a later command)")
                    )
                return len(dead)
        except SQLAlchemyError as e:
            raise self._fail(e) from None

    # -- reading -------------------------------------------------------------
    def run_columns(self):
        return [s.run, s.testbox.c.name.label("testbox"), s.environment.c.facts.label("environment")]

    def _run_select(self):
        return (
            select(*self.run_columns())
            .join(s.testbox, s.testbox.c.id == s.run.c.testbox_id)
            .join(s.environment, s.environment.c.id == s.run.c.environment_id)
        )

    def get_run(self, run_id: int | str):
        try:
            rid = int(str(run_id).lstrip("#"))
        except ValueError:
            raise PerflabError(f"run id {run_id!r} is not a number") from None
        try:
            with self.engine.connect() as conn:
                row = conn.execute(self._run_select().where(s.run.c.id == rid)).first()
        except SQLAlchemyError as e:
            raise self._fail(e) from None
        if row is None:
            raise PerflabError(f"no run with id {rid} in {self.label}")
        return row

    def find_runs(self, *, benchmark=None, tag=None, box=None, since=None, status=None, limit=None, ids=None):
        q = self._run_select()
        if benchmark:
            q = q.where((s.run.c.benchmark == benchmark) | (s.run.c.name == benchmark))
        if tag:
            q = q.where(s.run.c.tag == tag)
        if box:
            q = q.where(s.testbox.c.name == box)
        if since:
            q = q.where(s.run.c.started >= since)
        if status:
            q = q.where(s.run.c.status == status)
        if ids is not None:
            q = q.where(s.run.c.id.in_(list(ids)))
        q = q.order_by(s.run.c.started, s.run.c.id)
        if limit:
            q = q.limit(limit)
        try:
            with self.engine.connect() as conn:
                return conn.execute(q).all()
        except SQLAlchemyError as e:
            raise self._fail(e) from None

    def samples(self, run_ids: Iterable[int]):
        ids = list(run_ids)
        try:
            with self.engine.connect() as conn:
                return conn.execute(
                    select(s.sample.c.run_id, s.sample.c.metric, s.sample.c.value, s.sample.c.unit,
                           s.sample.c.direction, s.sample.c.repetition)
                    .where(s.sample.c.run_id.in_(ids))
                    .order_by(s.sample.c.run_id, s.sample.c.metric, s.sample.c.repetition, s.sample.c.id)
                ).all()
        except SQLAlchemyError as e:
            raise self._fail(e) from None

    def failures(self, run_ids: Iterable[int]):
        ids = list(run_ids)
        with self.engine.connect() as conn:
            return conn.execute(
                select(s.failure.c.run_id, s.failure.c.item, s.failure.c.message)
                .where(s.failure.c.run_id.in_(ids)).order_by(s.failure.c.id)
            ).all()

    def metric_sums(self, run_ids: Iterable[int], metrics: Iterable[str]) -> dict[tuple[int, str], tuple[float, int]]:
        """(sum, count) of the samples per (run, metric), computed by the database in one
        query per 5,000 runs; callers pool several runs or take a run's mean from it."""
        ids, names = list(run_ids), list(metrics)
        out: dict[tuple[int, str], tuple[float, int]] = {}
        try:
            with self.engine.connect() as conn:
                for chunk in range(0, len(ids), 5000):
                    part = ids[chunk : chunk + 5000]
                    for rid, metric, total, n in conn.execute(
                        select(s.sample.c.run_id, s.sample.c.metric, func.sum(s.sample.c.value), func.count())
                        .where(s.sample.c.run_id.in_(part) & s.sample.c.metric.in_(names))
                        .group_by(s.sample.c.run_id, s.sample.c.metric)
                    ):
                        out[(rid, metric)] = (float(total), int(n))
        except SQLAlchemyError as e:
            raise self._fail(e) from None
        return out


    def log_rows(self, *, benchmark=None, tag=None, box=None, since=None, metrics=("time.elapsed_time", "time.user_time", "time.system_time")):
        """One row per run, oldest first, with the mean of each named metric (one query)."""
        means = [
            func.avg(case((s.sample.c.metric == m, s.sample.c.value))).label(f"m{i}")
            for i, m in enumerate(metrics)
        ]
        q = (
            select(s.run.c.id, s.run.c.started, s.run.c.status, s.run.c.tag, s.run.c.commit,
                   s.run.c.dirty, s.run.c.comment, s.run.c.name, s.run.c.benchmark, *means)
            .select_from(s.run.outerjoin(s.sample, (s.sample.c.run_id == s.run.c.id) & s.sample.c.metric.in_(list(metrics))))
            .group_by(s.run.c.id)
            .order_by(s.run.c.started, s.run.c.id)
        )
        if benchmark:
            q = q.where((s.run.c.benchmark == benchmark) | (s.run.c.name == benchmark))
        if tag:
            q = q.where(s.run.c.tag == tag)
        if box:
            q = q.where(s.run.c.testbox_id.in_(select(s.testbox.c.id).where(s.testbox.c.name == box)))
        if since:
            q = q.where(s.run.c.started >= since)
        try:
            with self.engine.connect() as conn:
                return conn.execute(q).all()
        except SQLAlchemyError as e:
            raise self._fail(e) from None

    def sample_counts(self, run_ids: Iterable[int]) -> dict[int, int]:
        ids = list(run_ids)
        out: dict[int, int] = {}
        try:
            with self.engine.connect() as conn:
                for chunk in range(0, len(ids), 5000):
                    part = ids[chunk : chunk + 5000]
                    out.update(conn.execute(
                        select(s.sample.c.run_id, func.count()).where(s.sample.c.run_id.in_(part))
                        .group_by(s.sample.c.run_id)
                    ).all())
        except SQLAlchemyError as e:
            raise self._fail(e) from None
        return out

    def import_runs(self, runs: list[dict]) -> tuple[int, int]:
        """Insert exported runs in one transaction; runs already present (by uuid) are skipped.

        Returns (runs imported, runs skipped).
        """
        imported = skipped = 0
        try:
            with self.engine.begin() as conn:
                for r in runs:
                    if conn.execute(select(s.run.c.id).where(s.run.c.uuid == r["uuid"])).scalar() is not None:
                        skipped += 1
                        continue
                    box_id = self._testbox_id(conn, r["testbox"])
                    env_id = self._environment_id(conn, box_id, r["environment"])
                    run_id = conn.execute(insert(s.run).values(
                        uuid=r["uuid"], testbox_id=box_id, environment_id=env_id, benchmark=r["benchmark"],
                        name=r["name"], params=r["params"], tag=r.get("tag"), commit=r.get("commit"),
                        dirty=r.get("dirty"), started=r["started"], finished=r.get("finished"),
                        # A run still "running" elsewhere was cut short as far as this store knows.
                        status="interrupted" if r["status"] == "running" else r["status"],
                        comment=r.get("comment"), error=r.get("error"), host=None, pid=None, pid_start=None,
                    )).inserted_primary_key[0]
                    if r["samples"]:
                        conn.execute(insert(s.sample), [
                            dict(run_id=run_id, metric=m, value=v, unit=u, direction=d, repetition=rep)
                            for m, v, u, d, rep in r["samples"]
                        ])
                    for item, message in r["failures"]:
                        conn.execute(insert(s.failure).values(run_id=run_id, item=item, message=message))
                    imported += 1
        except SQLAlchemyError as e:
            raise self._fail(e) from None
        return imported, skipped

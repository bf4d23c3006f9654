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
import re
import socket
import uuid as uuidlib
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import quote

from sqlalchemy import bindparam, case, create_engine, event, func, insert, select, text, update
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, OperationalError, SQLAlchemyError

from perflab.core.errors import PerflabError
from perflab.core.model import Sample
from perflab.store import schema as s

def _head_revision() -> tuple[str, frozenset[str]]:
    """The newest Alembic revision shipped and all of them (read from the scripts, without importing Alembic)."""
    import re

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


# Ids are 64-bit integers on both backends (SQLite's rowid, PostgreSQL's bigint since
# revision 0005): a larger number names no run, and either database would refuse to
# even compare with it.
MAX_RUN_ID = 2**63 - 1

# Free space kept beside an SQLite store (the file DATABASE-reserve): on a full
# disk, deleting it makes room to record why the run ended (a few WAL frames).
RESERVE_BYTES = 256 * 1024

# The strings of a run row that users choose, with what sets each: a longer value
# is refused before anything is written (PostgreSQL would refuse it half-way and
# SQLite would keep it whole, so two stores would differ).
_RUN_STRINGS = {
    "testbox": (s.testbox.c.name, "--box (the testbox name)"),
    "benchmark": (s.run.c.benchmark, "the benchmark name"),
    "name": (s.run.c.name, "the run name (--name; by default the command line)"),
    "tag": (s.run.c.tag, "--tag"),
    "commit": (s.run.c.commit, "the commit id"),
}

_URL_PASSWORD = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*:)[^\s@]+@")


# libpq also takes the password as a parameter: postgresql://u@h/db?password=..., "password=... host=...".
# The value ends at a space, an & or the ": " that follows a URL in a message.
_PARAM_PASSWORD = re.compile(r"(?i)(\bpassword=)[^\s&]+?(?=[\s&]|:\s|:?$)")


def redact(text: str) -> str:
    """`text` with the password of every URL in it (user:PASSWORD@ or ?password=) shown as ***."""
    return _PARAM_PASSWORD.sub(r"\1***", _URL_PASSWORD.sub(r"\1***@", str(text)))


def check_run_strings(**values: str | None) -> None:
    """Refuse a user string longer than the column that keeps it, naming what sets it.

    Keys are those of _RUN_STRINGS (testbox, benchmark, name, tag, commit).
    """
    for key, value in values.items():
        column, what = _RUN_STRINGS[key]
        limit = column.type.length
        if value is not None and len(value) > limit:
            raise PerflabError(f"{what} is {len(value)} characters long; the store keeps at most {limit}")


def _check_sample_strings(rows: list[tuple]) -> None:
    """The metric name and unit of each sample row fit their columns (a backstop:
    the options that name them should have refused them already)."""
    for index, column, what in ((1, s.sample.c.metric, "metric name"), (3, s.sample.c.unit, "unit")):
        limit = column.type.length
        for value in {r[index] for r in rows}:
            if len(value) > limit:
                raise PerflabError(f"{what} {value[:40]!r}... is {len(value)} characters long; the store keeps at most {limit}")


def _disk_full(e: SQLAlchemyError) -> bool:
    orig = getattr(e, "orig", None)
    # SQLITE_FULL is 13 (the low byte of an extended code); 53100 is PostgreSQL's disk_full.
    return (getattr(orig, "sqlite_errorcode", 0) & 0xFF) == 13 or getattr(orig, "sqlstate", None) == "53100"


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


def default_url() -> str:
    """$PERFLAB_DB (a path or a URL), else the XDG data directory."""
    configured = os.environ.get("PERFLAB_DB")
    if configured:
        return configured
    data_home = os.environ.get("XDG_DATA_HOME") or os.path.join(Path.home(), ".local", "share")
    return os.path.join(data_home, "perflab", "perflab.db")


def _as_url(target: str) -> URL:
    """The SQLAlchemy URL of a path or URL. PostgreSQL URLs without a driver
    (postgresql://, postgres:// as libpq writes them) get psycopg 3, perflab's
    driver: SQLAlchemy's own default for them is psycopg2."""
    if "://" not in target:
        return make_url("sqlite:///" + os.path.abspath(os.path.expanduser(target)))
    url = make_url(target)
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    return url


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


def _without_nul(value):
    """A string PostgreSQL can keep: text columns refuse NUL, which a benchmark's
    output tail or an imported file may hold; it becomes U+FFFD, as undecodable
    bytes do. Other values unchanged (JSON travels escaped as \\u0000)."""
    return value.replace("\x00", "\ufffd") if isinstance(value, str) and "\x00" in value else value


def _scrub_params(params):
    if isinstance(params, dict):
        if any(isinstance(v, str) and "\x00" in v for v in params.values()):
            return {k: _without_nul(v) for k, v in params.items()}
        return params
    if isinstance(params, (list, tuple)):
        if params and isinstance(params[0], (dict, list, tuple)):  # executemany: one per row
            scrubbed = [_scrub_params(p) for p in params]
            return scrubbed if any(a is not b for a, b in zip(scrubbed, params)) else params
        if any(isinstance(v, str) and "\x00" in v for v in params):
            return type(params)(_without_nul(v) for v in params)
    return params


def _postgres_nul_guard(conn, cursor, statement, parameters, context, executemany):
    return statement, _scrub_params(parameters)


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
                    row = tuple(_without_nul(v) for v in row)
                copy.write_row(row)
    except conn.dialect.loaded_dbapi.Error as e:
        # As SQLAlchemy reports a failed statement: callers handle SQLAlchemyError.
        raise DBAPIError.instance(statement, None, e, conn.dialect.loaded_dbapi.Error) from e


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


def _in_memory(target: str, url: URL) -> bool:
    """An SQLite database that lives in memory (sqlite://, sqlite:///, :memory:, file::memory:, mode=memory)."""
    if "://" not in target:
        return target == ":memory:" or target.startswith("file::memory:")
    if url.get_backend_name() != "sqlite":
        return False
    database = url.database or ""
    return (database in ("", ":memory:") or database.startswith("file::memory:")
            or url.query.get("mode") == "memory" or "mode=memory" in database)


def _read_only_url(path: Path, immutable: bool = False) -> URL:
    """A URL that opens the SQLite file at `path` read-only.

    mode=ro still needs WAL's -shm file, which SQLite creates beside the database
    when the directory is writable, or uses when the -wal and -shm are there.
    Otherwise (a read-only mount; a full disk with no -wal) no process can have
    commits in a -wal, so the main file is complete and immutable=1 reads it
    without locks or a -shm.
    """
    beside = [path.with_name(path.name + suffix) for suffix in ("-wal", "-shm")]
    if immutable or not (os.access(path.parent, os.W_OK) or all(p.exists() for p in beside)):
        flags = {"immutable": "1"}
    else:
        flags = {"mode": "ro"}
    return URL.create("sqlite", database="file:" + quote(str(path.resolve())), query={**flags, "uri": "true"})


def _no_room(e: SQLAlchemyError) -> bool:
    """SQLite could not make room to even read: the disk is full, or it could not
    size the -shm file (SQLITE_IOERR_SHMOPEN/SHMSIZE/SHMMAP, on a full tmpfs)."""
    code = getattr(getattr(e, "orig", None), "sqlite_errorcode", 0)
    return _disk_full(e) or code in (10 | 18 << 8, 10 | 19 << 8, 10 | 21 << 8)


def _engine(url: URL, label: str) -> Engine:
    backend = url.get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        raise PerflabError(f"cannot use database URL {label}: perflab keeps its store in SQLite (a path) "
                           f"or PostgreSQL (postgresql://USER@HOST:PORT/DB), not {backend}")
    options = {}
    if backend == "postgresql":
        # A server that does not answer is an error within seconds, not a hang;
        # pool_pre_ping lets a long-lived process (a worker) outlive a server restart.
        options = {"pool_pre_ping": True}
        if "connect_timeout" not in url.query:
            options["connect_args"] = {"connect_timeout": 10}
    try:
        engine = create_engine(url, **options)
    except (NoSuchModuleError, ArgumentError) as e:
        raise PerflabError(f"cannot use database URL {label}: {redact(e)}") from None
    except ImportError as e:
        if url.drivername == "postgresql+psycopg":
            hint = "perflab's PostgreSQL driver, psycopg 3, is not installed: pip install 'perflab[postgres]'"
        elif backend == "postgresql":
            hint = f"its driver ({url.get_driver_name()}) is not installed; perflab's is psycopg 3: write postgresql://..."
        else:
            hint = "its driver is not installed"
        raise PerflabError(f"cannot use database URL {label}: {hint} ({redact(e)})") from None
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    else:
        event.listen(engine, "before_cursor_execute", _postgres_nul_guard, retval=True)
    return engine


def open_store(target: str | None = None) -> "Store":
    """Open the store at a path or URL, creating or upgrading its schema.

    An SQLite file this process may read but not write (its mode, a read-only
    mount, a disk so full that SQLite cannot create its -shm file) opens
    read-only: reading works, writing is refused saying why. An in-memory
    database is refused: it would keep nothing once perflab exits. Passwords
    in URLs are masked in every message.
    """
    target = target or default_url()
    try:
        url = _as_url(target)
    except ArgumentError:
        raise PerflabError(f"invalid database URL {redact(target)!r}: expected a path or a URL like sqlite:///FILE or postgresql://USER@HOST:PORT/DB") from None
    # Messages name the URL as the user wrote it (without its password), not as completed here.
    label = redact(make_url(target).render_as_string(hide_password=True)) if "://" in target else target
    if _in_memory(target, url):
        raise PerflabError(f"database {label} is in memory: it would keep nothing once perflab exits; give a file path or a server URL")
    path, read_only = None, None
    if url.get_backend_name() == "sqlite" and url.query.get("uri") is None:
        path = Path(url.database)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise PerflabError(f"cannot create the database directory {path.parent}: {e.strerror}") from None
        if path.exists():
            if not os.access(path, os.R_OK):
                raise PerflabError(f"database file {path} is not readable")
            if not os.access(path, os.W_OK):
                read_only, url = "is read-only here", _read_only_url(path)
        elif not os.access(path.parent, os.W_OK):
            raise PerflabError(f"cannot create database file {path}: directory {path.parent} is not writable")
    store = Store(_engine(url, label), label, path=path, read_only=read_only)
    try:
        store.migrate()
    except _NoRoom:
        store.engine.dispose()
        store = Store(_engine(_read_only_url(path, immutable=True), label), label, path=path, read_only="is on a full disk")
        store.migrate()
    return store


class _NoRoom(PerflabError):
    """An SQLite store that cannot be opened for want of disk space, and whose -wal holds no commits."""


class Store:
    def __init__(self, engine: Engine, label: str, *, path: Path | None = None, read_only: str | None = None):
        self.engine = engine
        self.label = redact(label)
        self.path = path  # of an SQLite file store
        # Why this store can be read but not written ("is read-only here"), or None.
        self.read_only = read_only

    # -- setup ---------------------------------------------------------------
    def _fail(self, e: Exception) -> PerflabError:
        detail = str(getattr(e, "orig", e) or e).splitlines()[0]
        return PerflabError(f"database {self.label}: {redact(detail)}")

    def _check_writable(self, what: str) -> None:
        if self.read_only:
            raise PerflabError(f"database file {self.label} {self.read_only}: cannot {what}")

    def migrate(self) -> None:
        """Bring the schema to the head revision (Alembic), cheaply when it is there.

        Two processes may open a new database at once: the upgrade runs under a
        lock (a lock file beside an SQLite database, an advisory lock on
        PostgreSQL) and the revision is checked again once the lock is held.
        """
        try:
            revision = self._revision()
            if revision == HEAD_REVISION:
                return
            if revision is not None and revision not in KNOWN_REVISIONS:
                # A newer perflab upgraded this (shared) store: this one cannot read it safely.
                raise PerflabError(f"database {self.label}: its schema is at revision {revision}, newer than this "
                                   f"perflab knows (up to {HEAD_REVISION}); upgrade perflab to use it")
            if self.read_only:
                found = f"its schema is at revision {revision}" if revision else "it holds no perflab store"
                raise PerflabError(f"database file {self.label} {self.read_only} and {found}; "
                                   f"this perflab needs revision {HEAD_REVISION}: open it once with write access")
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
            if self.path is not None and not self.read_only and _no_room(e) and self._wal_is_empty():
                raise _NoRoom(str(self._fail(e))) from None
            raise self._fail(e) from None

    def _wal_is_empty(self) -> bool:
        try:
            return self.path.with_name(self.path.name + "-wal").stat().st_size == 0
        except FileNotFoundError:
            return True
        except OSError:
            return False

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
        job: dict | None = None,
    ) -> int:
        self._check_writable("record a run")
        check_run_strings(testbox=testbox, benchmark=benchmark, name=name, tag=tag, commit=commit)
        self._keep_reserve()
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
                        job=job,
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

    def add_samples(self, run_id: int, repetition: int, samples: Iterable[Sample], process: int | None = None) -> int:
        """Store and commit samples of one repetition (from its `process`-th process)."""
        rows = [(run_id, x.metric, float(x.value), x.unit, int(x.direction), repetition, process) for x in samples]
        if rows:
            _check_sample_strings(rows)
            try:
                with self.engine.begin() as conn:
                    # The driver's executemany straight away: SQLAlchemy's per-row
                    # processing would be most of the cost of recording.
                    if self.engine.dialect.name == "postgresql":
                        copy_rows(conn, s.sample.name, self._SAMPLE_COLUMNS, rows)
                    else:
                        conn.exec_driver_sql(self._sample_insert_sql, self._sample_params(rows))
            except SQLAlchemyError as e:
                raise self._fail(e) from None
        return len(rows)

    _SAMPLE_COLUMNS = ("run_id", "metric", "value", "unit", "direction", "repetition", "process")

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

    def set_run_monitors(self, run_id: int, record: dict) -> None:
        """Record which monitors ran with a run, their options, what was unsupported and what failed."""
        try:
            with self.engine.begin() as conn:
                conn.execute(update(s.run).where(s.run.c.id == run_id).values(monitors=record or None))
        except SQLAlchemyError as e:
            raise self._fail(e) from None

    def add_monitor_series(self, run_id: int, monitor: str, repetition: int,
                           rows: Iterable[tuple[int | None, float, dict]]) -> int:
        """Store a monitor's time series of one repetition: (process, t, {field: value}) per interval."""
        values = [{"run_id": run_id, "monitor": monitor, "repetition": repetition, "process": p, "t": float(t),
                   "values": {k: v for k, v in vals.items() if v == v and abs(v) != float("inf")}}
                  for p, t, vals in rows]
        if values:
            try:
                with self.engine.begin() as conn:
                    conn.execute(insert(s.monitor_series), values)
            except SQLAlchemyError as e:
                raise self._fail(e) from None
        return len(values)

    def monitor_series(self, run_ids: Iterable[int], monitor: str | None = None):
        """Rows (run_id, monitor, repetition, process, t, values) in recorded order."""
        q = select(s.monitor_series.c.run_id, s.monitor_series.c.monitor, s.monitor_series.c.repetition,
                   s.monitor_series.c.process, s.monitor_series.c.t, s.monitor_series.c["values"]) \
            .where(s.monitor_series.c.run_id.in_(list(run_ids))).order_by(s.monitor_series.c.id)
        if monitor:
            q = q.where(s.monitor_series.c.monitor == monitor)
        try:
            with self.engine.connect() as conn:
                return conn.execute(q).all()
        except SQLAlchemyError as e:
            raise self._fail(e) from None

    def robot_reports(self, robot: str):
        """The culprits a robot reported: rows (culprit, metric, good, bad, created, subject)."""
        t = s.robot_report
        try:
            with self.engine.connect() as conn:
                return conn.execute(select(t.c.culprit, t.c.metric, t.c.good, t.c.bad, t.c.created, t.c.subject)
                                    .where(t.c.robot == robot).order_by(t.c.id)).all()
        except SQLAlchemyError as e:
            raise self._fail(e) from None

    def add_robot_report(self, *, robot: str, culprit: str, metric: str, good: str, bad: str, subject: str,
                         text: str, sent_to: str | None = None) -> bool:
        """Remember a reported culprit; False when this robot had reported it already."""
        self._check_writable("record a report")
        try:
            with self.engine.begin() as conn:
                known = conn.execute(select(s.robot_report.c.id).where(
                    (s.robot_report.c.robot == robot) & (s.robot_report.c.culprit == culprit)
                    & (s.robot_report.c.metric == metric))).first()
                if known:
                    return False
                conn.execute(insert(s.robot_report).values(
                    robot=robot, culprit=culprit, metric=metric, good=good, bad=bad, created=utcnow(),
                    subject=subject, text=text, sent_to=sent_to))
                return True
        except SQLAlchemyError as e:
            raise self._fail(e) from None

    def add_failure(self, run_id: int, item: str, message: str) -> None:
        try:
            with self.engine.begin() as conn:
                conn.execute(s.failure.delete().where((s.failure.c.run_id == run_id) & (s.failure.c.item == item)))
                conn.execute(insert(s.failure).values(run_id=run_id, item=item, message=message))
        except SQLAlchemyError as e:
            raise self._fail(e) from None

    def finish_run(self, run_id: int, status: str, error: str | None = None) -> None:
        """Close a run with its status; on a full disk, the reserve makes room for it."""
        def close() -> None:
            with self.engine.begin() as conn:
                conn.execute(
                    update(s.run).where(s.run.c.id == run_id)
                    .values(status=status, finished=utcnow(), error=error)
                )

        try:
            try:
                close()
            except OperationalError as e:
                if not (_disk_full(e) and self._release_reserve()):
                    raise
                close()
        except SQLAlchemyError as e:
            raise self._fail(e) from None

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

    def delete_run(self, run_id: int) -> None:
        """Remove a run that holds no samples (bad input found before any measurement)."""
        try:
            with self.engine.begin() as conn:
                conn.execute(s.failure.delete().where(s.failure.c.run_id == run_id))
                conn.execute(s.sample.delete().where(s.sample.c.run_id == run_id))
                conn.execute(s.monitor_series.delete().where(s.monitor_series.c.run_id == run_id))
                conn.execute(s.run.delete().where(s.run.c.id == run_id))
        except SQLAlchemyError as e:
            raise self._fail(e) from None

    def annotate(self, run_id: int, comment: str) -> None:
        self._check_writable("annotate a run")
        self.get_run(run_id)
        try:
            with self.engine.begin() as conn:
                conn.execute(update(s.run).where(s.run.c.id == run_id).values(comment=comment))
        except SQLAlchemyError as e:
            raise self._fail(e) from None

    def reap_dead_runs(self) -> int:
        """Mark as interrupted the runs of this host whose writer process is gone.

        Housekeeping that every command does on the way in, so it never stops a
        reading command: on a store that cannot be written now (read-only, a full
        disk, a writer holding the lock) it is left to a later command.
        """
        if self.read_only:
            return 0
        self.discard_dead_imports()
        host = socket.gethostname()
        try:
            with self.engine.connect() as conn:
                rows = conn.execute(
                    select(s.run.c.id, s.run.c.pid, s.run.c.pid_start)
                    .where((s.run.c.status == "running") & (s.run.c.host == host))
                ).all()
        except SQLAlchemyError as e:
            raise self._fail(e) from None
        dead = [r.id for r in rows if r.pid is None or process_start_time(r.pid) != r.pid_start]
        if not dead:
            return 0
        try:
            with self.engine.begin() as conn:
                conn.execute(
                    # still running: a run that ended since the select keeps its own status
                    update(s.run).where(s.run.c.id.in_(dead) & (s.run.c.status == "running"))
                    .values(status="interrupted",
                            error="the perflab process recording it ended without closing it "
                                  "(killed, or it could not write); found by a later command")
                )
        except SQLAlchemyError:
            # A locked SQLite file; on PostgreSQL "permission denied" to a role that may only
            # read, or a read-only transaction on a standby: left to a command that may write.
            return 0
        return len(dead)

    # -- reading -------------------------------------------------------------
    def run_columns(self):
        return [s.run, s.testbox.c.name.label("testbox"), s.environment.c.facts.label("environment")]

    def _run_select(self):
        return (
            select(*self.run_columns())
            .join(s.testbox, s.testbox.c.id == s.run.c.testbox_id)
            .join(s.environment, s.environment.c.id == s.run.c.environment_id)
            .where(s.run.c.status != "importing")  # an import not yet complete is invisible
        )

    def get_run(self, run_id: int | str):
        from perflab.core.text import printable

        try:
            rid = int(str(run_id).lstrip("#"))
        except ValueError:
            raise PerflabError(f"run id '{printable(run_id, 40)}' is not a number") from None
        if not 1 <= rid <= MAX_RUN_ID:
            raise PerflabError(f"run id {printable(run_id, 40)} is out of range: run ids are 1 to {MAX_RUN_ID}")
        try:
            with self.engine.connect() as conn:
                row = conn.execute(self._run_select().where(s.run.c.id == rid)).first()
        except SQLAlchemyError as e:
            raise self._fail(e) from None
        if row is None:
            raise PerflabError(f"no run with id {rid} in {self.label}")
        return row

    def find_runs(self, *, benchmark=None, tag=None, box=None, since=None, status=None, limit=None, ids=None,
                  uuids=None):
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
            q = q.where(s.run.c.id.in_([i for i in ids if 1 <= i <= MAX_RUN_ID]))
        if uuids is not None:
            q = q.where(s.run.c.uuid.in_(list(uuids)))
        q = q.order_by(s.run.c.started, s.run.c.id)
        if limit:
            q = q.limit(limit)
        try:
            with self.engine.connect() as conn:
                return conn.execute(q).all()
        except SQLAlchemyError as e:
            raise self._fail(e) from None

    def run_names(self, limit: int = 10) -> tuple[list[str], list[str], int]:
        """(benchmark families, run names most recently run first, number of names),
        at most `limit` of each: what a filter that matched nothing could have named."""
        last = func.max(s.run.c.started)
        visible = s.run.c.status != "importing"  # an import not yet complete is invisible
        try:
            with self.engine.connect() as conn:
                families = conn.execute(select(s.run.c.benchmark).where(visible).distinct().order_by(s.run.c.benchmark).limit(limit)).scalars().all()
                names = conn.execute(select(s.run.c.name).where(visible).group_by(s.run.c.name).order_by(last.desc()).limit(limit)).scalars().all()
                count = conn.execute(select(func.count(s.run.c.name.distinct())).where(visible)).scalar_one()
        except SQLAlchemyError as e:
            raise self._fail(e) from None
        return families, names, count

    def samples(self, run_ids: Iterable[int]):
        ids = list(run_ids)
        try:
            with self.engine.connect() as conn:
                return conn.execute(
                    select(s.sample.c.run_id, s.sample.c.metric, s.sample.c.value, s.sample.c.unit,
                           s.sample.c.direction, s.sample.c.repetition, s.sample.c.process)
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
            .where(s.run.c.status != "importing")  # an import not yet complete is invisible
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

    # -- importing (perflab.store.importing: batches, all or nothing for readers) --
    def begin_import(self, check=None):
        """An ImportWriter: runs written as 'importing' in short transactions,
        shown at once by its commit(), deleted by its rollback()."""
        from perflab.store.importing import ImportWriter

        return ImportWriter(self, check)

    def import_runs(self, runs: list[dict]) -> tuple[int, int]:
        """Import checked runs (perflab export shape, samples included), all or
        nothing; runs already present (by uuid) are skipped.

        Returns (runs imported, runs skipped).
        """
        writer = self.begin_import()
        try:
            for run in runs:
                writer.add_samples(writer.add_run(run), run["samples"])
            (counts,) = writer.commit() or [None]
        except BaseException:
            writer.rollback()
            raise
        return (counts.runs, counts.skipped) if counts else (0, 0)

    def discard_dead_imports(self) -> int:
        """Delete the 'importing' runs of this host whose importing process is gone
        (killed mid-import); they were never visible. Like reap_dead_runs, it is
        left to a later command when the store cannot be written now."""
        from perflab.store.importing import IMPORTING, discard

        host = socket.gethostname()
        try:
            with self.engine.connect() as conn:
                rows = conn.execute(
                    select(s.run.c.id, s.run.c.pid, s.run.c.pid_start)
                    .where((s.run.c.status == IMPORTING) & (s.run.c.host == host))
                ).all()
            dead = [r.id for r in rows if r.pid is None or process_start_time(r.pid) != r.pid_start]
            if dead:
                discard(self, dead)
        except (SQLAlchemyError, PerflabError):
            return 0
        return len(dead)

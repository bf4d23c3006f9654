"""Opening a store: paths and URLs, the engine of each backend, and the schema's upgrade.

SQLite by default; any SQLAlchemy URL works (PostgreSQL through psycopg 3).
Nothing here is SQLite-only except the connection pragmas, which only apply
to SQLite connections. `Database` is the base of the Store: its engine, its
name in messages, whether it may be written, and `migrate` (Alembic, run only
when the schema is behind). perflab.store.db.open_store puts them together.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError

from perflab.core.errors import PerflabError
from perflab.core.text import printable
from perflab.store.basics import (  # noqa: F401 (SQLITE_SCHEMA: tools/make_sqlite_schema.py)
    HEAD_REVISION, KNOWN_REVISIONS, SQLITE_SCHEMA, default_url, set_wal, sqlite_pragmas, sqlite_template)
from perflab.store.rows import database_error, disk_full, redact, without_nul

def upgrade_with_alembic(conn) -> None:
    """Run the migrations up to the head revision on an open connection (not committed)."""
    # Import Alembic only when there is work for it: it costs start-up time.
    from alembic import command
    from alembic.config import Config

    cfg = Config(str(Path(__file__).with_name("alembic.ini")))
    cfg.set_main_option("script_location", str(Path(__file__).with_name("migrations")))
    cfg.attributes["connection"] = conn
    command.upgrade(cfg, "head")


def sqlite_schema_of(conn) -> str:
    """The schema of an SQLite store as SQLITE_SCHEMA holds it: every statement in sqlite_master
    (but SQLite's own tables), tables before indexes, each by name, and the revision."""
    rows = conn.exec_driver_sql(
        "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' "
        "ORDER BY CASE type WHEN 'table' THEN 0 ELSE 1 END, name").fetchall()
    revision = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
    return f"-- revision {revision}\n" + "".join(f"{sql};\n" for (sql,) in rows)


def as_url(target: str) -> URL:
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
    sqlite_pragmas(cur)
    cur.close()


_set_wal = set_wal   # the name tests/test_store_faults.py knows


def _scrub_params(params):
    if isinstance(params, dict):
        if any(isinstance(v, str) and "\x00" in v for v in params.values()):
            return {k: without_nul(v) for k, v in params.items()}
        return params
    if isinstance(params, (list, tuple)):
        if params and isinstance(params[0], (dict, list, tuple)):  # executemany: one per row
            scrubbed = [_scrub_params(p) for p in params]
            return scrubbed if any(a is not b for a, b in zip(scrubbed, params)) else params
        if any(isinstance(v, str) and "\x00" in v for v in params):
            return type(params)(without_nul(v) for v in params)
    return params


def _postgres_nul_guard(conn, cursor, statement, parameters, context, executemany):
    return statement, _scrub_params(parameters)


def _in_memory(target: str, url: URL) -> bool:
    """An SQLite database that lives in memory (sqlite://, sqlite:///, :memory:, file::memory:, mode=memory)."""
    if "://" not in target:
        return target == ":memory:" or target.startswith("file::memory:")
    if url.get_backend_name() != "sqlite":
        return False
    database = url.database or ""
    return (database in ("", ":memory:") or database.startswith("file::memory:")
            or url.query.get("mode") == "memory" or "mode=memory" in database)


def read_only_url(path: Path, immutable: bool = False) -> URL:
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
    return disk_full(e) or code in (10 | 18 << 8, 10 | 19 << 8, 10 | 21 << 8)


def make_engine(url: URL, label: str) -> Engine:
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


class NoRoom(PerflabError):
    """An SQLite store that cannot be opened for want of disk space, and whose -wal holds no commits."""


def locate(target: str) -> tuple[URL, str, Path | None, str | None]:
    """Where a store is: (URL, label for messages, SQLite file or None, why it is read-only or None).

    An SQLite file this process may read but not write opens read-only; an
    in-memory database is refused: it would keep nothing once perflab exits.
    """
    try:
        url = as_url(target)
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
                read_only, url = "is read-only here", read_only_url(path)
        elif not os.access(path.parent, os.W_OK):
            raise PerflabError(f"cannot create database file {path}: directory {path.parent} is not writable")
    return url, label, path, read_only


class Database:
    """An open store's engine and name, whether it may be written, and its schema's upgrade."""

    def __init__(self, engine: Engine, label: str, *, path: Path | None = None, read_only: str | None = None):
        self.engine = engine
        self.label = redact(label)
        self.path = path  # of an SQLite file store
        # Why this store can be read but not written ("is read-only here"), or None.
        self.read_only = read_only

    def _fail(self, e: Exception) -> PerflabError:
        return database_error(self.label, e)

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
            if revision is None:
                self._refuse_foreign()
            if self.read_only:
                found = f"its schema is at revision {revision}" if revision else "it holds no perflab store"
                raise PerflabError(f"database file {self.label} {self.read_only} and {found}; "
                                   f"this perflab needs revision {HEAD_REVISION}: open it once with write access")
            with self._migration_lock():
                with self.engine.connect() as conn:
                    if self._revision(conn) == HEAD_REVISION:
                        return
                    if not (revision is None and self._create_sqlite_from_template(conn)):
                        upgrade_with_alembic(conn)
                    conn.commit()
        except SQLAlchemyError as e:
            if self.path is not None and not self.read_only and _no_room(e) and self._wal_is_empty():
                raise NoRoom(str(self._fail(e))) from None
            raise self._fail(e) from None

    def _create_sqlite_from_template(self, conn) -> bool:
        """A new, empty SQLite store gets the head schema from SQLITE_SCHEMA, the statements the
        migrations leave in sqlite_master (tools/make_sqlite_schema.py writes it; a test checks it
        against Alembic's), in one transaction: 5 ms where running the migrations takes 0.3-0.6 s.
        False (nothing done) for any other database: Alembic upgrades it."""
        if self.engine.dialect.name != "sqlite" or conn.execute(
                text("SELECT count(*) FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'")).scalar():
            return False
        statements = sqlite_template()
        if statements is None:
            return False   # a template older than the migrations (a checkout between two commits)
        for statement in statements:
            conn.exec_driver_sql(statement)
        conn.execute(text("INSERT INTO alembic_version (version_num) VALUES (:v)"), {"v": HEAD_REVISION})
        return True

    def _refuse_foreign(self) -> None:
        """A database holding another application's tables is not made a store (perflab's tables added
        beside theirs): `--db` pointed at the wrong file. Tables of perflab's own (a first creation
        cut short) are not foreign: the upgrade finishes them."""
        from sqlalchemy import inspect

        from perflab.store.schema import metadata

        ours = set(metadata.tables) | {"alembic_version"}
        with self.engine.connect() as conn:
            foreign = sorted(set(inspect(conn).get_table_names()) - ours)
        if foreign:
            shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
            raise PerflabError(f"database {self.label}: not a perflab store (it holds other tables: "
                               f"{printable(shown, 200)}); give a new file or a perflab store to --db")

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

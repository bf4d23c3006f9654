"""The store under faults: read-only files, a full disk, in-memory URLs, secrets in URLs,
ids and ages out of range, an export that cannot be written."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest
from conftest import assert_one_line_error

IS_ROOT = os.geteuid() == 0


@contextlib.contextmanager
def tmpfs(directory: Path, size: str):
    """A small tmpfs mounted on `directory` for the test (root only)."""
    directory.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)], check=True)
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=False)


def remount(directory: Path, mode: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{mode}", str(directory)], check=True)


def fill(directory: Path) -> None:
    """Write zeros into `directory` until its filesystem has no space left."""
    block = b"\0" * 4096
    with open(directory / "filler", "wb", buffering=0) as f:
        try:
            while f.write(block):
                pass
        except OSError:
            pass


def test_password_of_a_url_is_never_printed(cli):
    # psycopg is optional: with it the connection fails, without it the import does;
    # either way the one line names the URL with its password masked.
    for url in ("postgresql://u:s3cret@127.0.0.1:1/x", "postgresql+psycopg://u:s3cret@127.0.0.1:1/x",
                "nosuchdialect://u:s3cret@host/x"):
        proc = cli("--db", url, "runs", check=False)
        assert_one_line_error(proc, "u:***@")
        assert "s3cret" not in proc.stderr + proc.stdout, proc.stderr
    # an environment fact that holds a URL ($CC here) is shown masked too
    for args in (["env"], ["env", "--json"]):
        out = cli(*args, env={"CC": "https://u:s3cret@example.com/cc"}).stdout
        assert "s3cret" not in out and "u:***@example.com" in out


def test_in_memory_database_is_refused(cli, monkeypatch, tmp_path):
    from perflab.core.errors import PerflabError
    from perflab.store import open_store

    monkeypatch.chdir(tmp_path)
    for url in ("sqlite://", "sqlite:///", "sqlite:///:memory:", ":memory:", "file::memory:",
                "sqlite:///file::memory:?uri=true", "sqlite:///file:x?mode=memory&uri=true"):
        with pytest.raises(PerflabError, match="in memory"):
            open_store(url)
    proc = cli("--db", "sqlite://", "run", "cmd", "--runs", "1", "--", "true", check=False)
    assert_one_line_error(proc, "sqlite://", "in memory")
    assert_one_line_error(cli("--db", ":memory:", "runs", check=False), "in memory")
    assert not list(tmp_path.glob("*memory*"))


def test_ids_and_ages_out_of_range_are_one_line_errors(cli):
    cli("run", "cmd", "--runs", "1", "--", "true")
    huge = "99999999999999999999999"
    for args in (["show", huge], ["annotate", huge, "x"], ["env", "--diff", "1", huge]):
        proc = cli(*args, check=False)
        assert_one_line_error(proc, huge)
        assert proc.returncode == 1, args
    proc = cli("show", "9" * 5000, check=False)
    assert_one_line_error(proc, "not a number")
    assert len(proc.stderr) < 300
    for args in (["runs", "--since", "99999999d"], ["export", "--run", huge]):
        proc = cli(*args, check=False)
        assert_one_line_error(proc, args[1])
        assert proc.returncode == 2, args


def test_ages_and_dates_out_of_the_calendar_are_refused():
    import click

    from perflab.cli.common import parse_since

    for text in ("99999999d", "9" * 5000 + "d", "0001-01-01T00:00+05:00"):
        with pytest.raises(click.BadParameter, match="out of range"):
            parse_since(text)
    for text in ("yesterday", "3\u00b2d", "1d2"):
        with pytest.raises(click.BadParameter, match="not a date"):
            parse_since(text)


def test_export_errors_name_the_target_file(cli, tmp_path):
    cli("run", "cmd", "--runs", "1", "--", "true")
    target = tmp_path / "no" / "such" / "dir" / "out.json"
    proc = cli("export", "-o", target, check=False)
    assert_one_line_error(proc, str(target))
    assert ".perflab-export" not in proc.stderr


@pytest.mark.skipif(not IS_ROOT, reason="mounting a small tmpfs needs root")
def test_export_to_a_full_disk_names_the_target_and_leaves_nothing(cli, tmp_path):
    cli("run", "cmd", "--runs", "200", "--", "true")
    with tmpfs(tmp_path / "small", "64k") as small:
        proc = cli("export", "-o", small / "out.json", check=False)
        assert_one_line_error(proc, str(small / "out.json"), "No space left")
        assert list(small.iterdir()) == []


@contextlib.contextmanager
def read_only_store(cli, tmp_path):
    """The CLI's store, with one finished run, made unwritable: a read-only mount
    when root (root ignores file modes), else mode 0444 in a 0555 directory."""
    if IS_ROOT:
        with tmpfs(tmp_path / "ro", "8m") as mnt:
            cli.db = mnt / "perflab.db"
            cli.env["PERFLAB_DB"] = str(cli.db)
            cli("run", "cmd", "--runs", "3", "--tag", "base", "--", "true")
            remount(mnt, "ro")
            yield cli
    else:
        directory = tmp_path / "ro"
        directory.mkdir()
        cli.db = directory / "perflab.db"
        cli.env["PERFLAB_DB"] = str(cli.db)
        cli("run", "cmd", "--runs", "3", "--tag", "base", "--", "true")
        os.chmod(cli.db, 0o444)
        os.chmod(directory, 0o555)
        try:
            yield cli
        finally:
            os.chmod(directory, 0o755)


def test_reading_commands_work_on_a_read_only_store(cli, tmp_path):
    with read_only_store(cli, tmp_path) as ro:
        assert "base" in ro("runs").stdout
        assert "true" in ro("log").stdout
        assert "run #1" in ro("show", "1").stdout
        assert '"perflab-export"' in ro("export").stdout
        assert "same environment" in ro("env", "--diff", "1", "1").stdout
        ro("compare", "base", "base")
        for args in (["annotate", "1", "note"], ["run", "cmd", "--runs", "1", "--", "true"]):
            assert_one_line_error(ro(*args, check=False), str(ro.db), "read-only")


@pytest.mark.skipif(not IS_ROOT, reason="mounting a small tmpfs needs root")
def test_reading_commands_work_on_a_full_disk(cli, tmp_path):
    with tmpfs(tmp_path / "full", "2m") as mnt:
        cli.db = mnt / "perflab.db"
        cli.env["PERFLAB_DB"] = str(cli.db)
        cli("run", "cmd", "--runs", "3", "--", "true")
        # A run whose process is gone: reaping it would be a write.
        with contextlib.closing(sqlite3.connect(cli.db)) as con, con:
            con.execute("UPDATE run SET status = 'running', pid = 999999999")
        (mnt / "perflab.db-reserve").unlink()
        fill(mnt)
        assert "running" in cli("runs").stdout
        assert "true" in cli("log").stdout
        assert_one_line_error(cli("annotate", "1", "x", check=False), "full disk")
        (mnt / "filler").unlink()
        assert "interrupted" in cli("runs").stdout


@pytest.mark.skipif(not IS_ROOT, reason="mounting a small tmpfs needs root")
def test_a_run_that_fills_the_disk_records_the_disk_full_error(cli, tmp_path):
    with tmpfs(tmp_path / "full", "1m") as mnt:
        cli.db = mnt / "perflab.db"
        cli.env["PERFLAB_DB"] = str(cli.db)
        proc = cli("run", "cmd", "--runs", "1000000", "--", "true", check=False)
        assert_one_line_error(proc, "database or disk is full")
        (status, error), = cli.sql("SELECT status, error FROM run")
        assert status == "failed" and "database or disk is full" in error
        assert "disk is full" in cli("show", "1").stdout
        assert "FAILED" in cli("log").stdout


def test_head_revision_is_alembics_and_an_old_store_is_upgraded(cli, tmp_path):
    from alembic import command
    from alembic.config import Config
    from alembic.script import ScriptDirectory
    from sqlalchemy import create_engine

    from perflab.store import db

    cfg = Config()
    cfg.set_main_option("script_location", str(Path(db.__file__).with_name("migrations")))
    assert db.HEAD_REVISION == ScriptDirectory.from_config(cfg).get_current_head()

    old = tmp_path / "old.db"
    engine = create_engine(f"sqlite:///{old}")
    with engine.connect() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0001")
        conn.exec_driver_sql("INSERT INTO testbox (id, name) VALUES (1, 'box')")
        conn.exec_driver_sql("INSERT INTO environment (id, testbox_id, digest, facts) VALUES (1, 1, 'd', '{}')")
        conn.exec_driver_sql("INSERT INTO run (id, uuid, testbox_id, environment_id, benchmark, name, params, started, status) "
                             "VALUES (1, 'u1', 1, 1, 'cmd', 'old run', '{}', '2026-01-01 00:00:00', 'finished')")
        conn.exec_driver_sql("INSERT INTO sample (run_id, metric, value, unit, direction, repetition) "
                             "VALUES (1, 'time.elapsed_time', 1.5, 's', -1, 0), (1, 'time.elapsed_time', 2.5, 's', -1, 1)")
        conn.commit()
    engine.dispose()
    cli.db = old
    assert "old run" in cli("--db", old, "runs").stdout
    assert cli.sql("SELECT version_num FROM alembic_version") == [(db.HEAD_REVISION,)]
    assert cli.sql("SELECT count(*) FROM sample") == [(2,)]


def test_turning_a_new_file_to_wal_waits_out_a_lock_that_sqlite_will_not_wait_for(tmp_path):
    """Processes opening a new store at once: SQLite can answer PRAGMA journal_mode=WAL with
    "database is locked" at once, busy timeout or not. Here another connection holds the file
    exclusively and the busy timeout is 0, so every attempt fails at once until it lets go."""
    import threading
    import time

    from perflab.store.engine import _set_wal

    path = tmp_path / "new.db"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    opener = sqlite3.connect(path, isolation_level=None)
    opener.execute("PRAGMA busy_timeout=0")
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        opener.execute("PRAGMA journal_mode=WAL")
    released = threading.Timer(0.3, lambda: holder.execute("COMMIT"))
    released.start()
    t0 = time.monotonic()
    _set_wal(opener.cursor())
    released.join()
    assert time.monotonic() - t0 >= 0.25  # it waited for the holder ...
    assert opener.execute("PRAGMA journal_mode").fetchone() == ("wal",)  # ... and then turned the file
    # Once the file is WAL, the pragma only reads the mode: a writer does not stop it.
    holder.execute("BEGIN EXCLUSIVE")
    _set_wal(sqlite3.connect(path, isolation_level=None).cursor(), wait_s=0)
    holder.execute("COMMIT")
    # A lock that never goes: the same error, after the wait.
    other = tmp_path / "other.db"
    holder = sqlite3.connect(other, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    stuck = sqlite3.connect(other, isolation_level=None)
    stuck.execute("PRAGMA busy_timeout=0")
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        _set_wal(stuck.cursor(), wait_s=0.2)
    holder.execute("COMMIT")

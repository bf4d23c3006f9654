"""A new SQLite store is made from src/perflab/store/sqlite_schema.sql: the same schema the
migrations make, checked here statement by statement (tools/make_sqlite_schema.py rewrites it)."""

from __future__ import annotations

import importlib.util
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import create_engine

from perflab.core.errors import PerflabError

from perflab.store.db import open_store
from perflab.store.engine import HEAD_REVISION, SQLITE_SCHEMA, sqlite_schema_of

TOOL = Path(__file__).resolve().parent.parent / "tools" / "make_sqlite_schema.py"


def _tool():
    spec = importlib.util.spec_from_file_location("make_sqlite_schema", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_template_is_what_the_migrations_make():
    made = _tool().alembic_schema()
    assert made.startswith(f"-- revision {HEAD_REVISION}\n")
    assert SQLITE_SCHEMA.read_text() == made, \
        "src/perflab/store/sqlite_schema.sql is not what the migrations make: run tools/make_sqlite_schema.py"


def test_a_new_store_has_the_head_schema_and_takes_runs(tmp_path):
    path = tmp_path / "new.db"
    store = open_store(str(path))
    run_id = store.create_run(box="b", benchmark="cmd", name="true", params={}, environment={"k": "v"})
    engine = create_engine(f"sqlite:///{path}")
    with engine.connect() as conn:
        assert sqlite_schema_of(conn) == SQLITE_SCHEMA.read_text()
    engine.dispose()
    with sqlite3.connect(path) as con:
        assert con.execute("SELECT id FROM run").fetchall() == [(run_id,)]


def test_a_database_with_tables_is_not_given_the_template(tmp_path):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE theirs (x)")
    with pytest.raises(PerflabError, match="not a perflab store"):
        open_store(str(path))
    with sqlite3.connect(path) as con:
        assert [n for (n,) in con.execute("SELECT name FROM sqlite_master")] == ["theirs"]

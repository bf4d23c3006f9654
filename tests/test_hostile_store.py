"""The store under hostile conditions (issue 23: M9, L11)."""

from __future__ import annotations

import contextlib
import os
import sqlite3

import pytest

from conftest import assert_one_line_error
from test_store_faults import fill, tmpfs


def test_another_applications_database_is_refused_untouched(cli, tmp_path):     # L11
    other = tmp_path / "other.db"
    with contextlib.closing(sqlite3.connect(other)) as con, con:
        con.execute("CREATE TABLE contacts (id INTEGER, name TEXT)")
    for args in (("--db", other, "runs"), ("--db", other, "run", "cmd", "--", "true")):
        assert_one_line_error(cli(*args, check=False), "not a perflab store", "contacts")
    with contextlib.closing(sqlite3.connect(other)) as con:
        assert con.execute("SELECT name FROM sqlite_master").fetchall() == [("contacts",)]
    # An empty file is a new store, as before.
    (tmp_path / "empty.db").touch()
    cli("--db", tmp_path / "empty.db", "runs")


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_import_and_run_on_a_full_disk_say_the_same(cli, tmp_path):                # M9
    export = tmp_path / "runs.json"
    cli("run", "cmd", "--runs", "2", "--", "true")
    cli("export", "-o", export)
    with tmpfs(tmp_path / "full", "2m") as mnt:
        cli.db = mnt / "perflab.db"
        cli.env["PERFLAB_DB"] = str(cli.db)
        cli("run", "cmd", "--", "true")
        (mnt / "perflab.db-reserve").unlink()
        fill(mnt)
        run = cli("run", "cmd", "--", "true", check=False)
        imported = cli("import", export, check=False)
        assert_one_line_error(run, "full disk")
        assert_one_line_error(imported, "full disk")
        assert "readonly" not in imported.stderr
        words = lambda proc: proc.stderr.split(": cannot ")[0]
        assert words(run) == words(imported)

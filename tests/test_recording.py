"""`perflab run` records into an SQLite store with the standard library's sqlite3 (issue 47:
SQLAlchemy's import was 0.1-0.3 s of each start): perflab.store.recording writes what the Store
writes, row for row and type for type, makes a new store with the Store's schema, and leaves to
the Store every store it cannot simply add rows to."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import socket
import sqlite3
import subprocess
import sys
import uuid

import pytest

from perflab.core.model import Sample
from perflab.store import open_store
from perflab.store import recording as recording_module
from perflab.store import writes as writes_module
from perflab.store.engine import sqlite_schema_of
from perflab.store.recording import open_recorder

TABLES = ("testbox", "environment", "run", "sample", "failure", "monitor_series", "alembic_version")


def _write_everything(store) -> None:
    """Every write `perflab run` makes, with values that test each column's encoding."""
    facts = {"testbox": "box1", "kernel_release": "6.1.0", "cpus": 2, "ratio": 0.1, "flags": ["a", "é"],
             "nested": {"none": None, "yes": True}, "quote": 'say "hi"\\'}
    job = {"benchmark": "cmd", "runs": 3, "params": {"argv": ["true", "ünïcode"]}}
    first = store.create_run(box="box1", environment=facts, benchmark="cmd", name="true", params={"command": "true"},
                             tag="base", commit="0" * 40, dirty=False, comment="a note", job=job)
    second = store.create_run(box="box1", environment=facts, benchmark="cmd", name="x", params={}, dirty=True)
    third = store.create_run(box="box2", environment={**facts, "testbox": "box2"}, benchmark="fio", name="y",
                             params={"size": 1 << 40, "rate": 1.5e-9})
    dropped = store.create_run(box="box1", environment=facts, benchmark="cmd", name="refused", params={})
    for rep in range(2):
        store.add_samples(first, rep, [Sample("time.elapsed_time", 0.1 + rep, "s", -1),
                                       Sample("time.exit_status", 0, "", 0),
                                       Sample("lmbench.lat_syscall", 12, "ns", -1, exact=True)], process=rep or None)
    assert store.add_samples(second, 0, []) == 0
    store.add_samples(third, 0, [Sample("fio.read.bw", 1e300, "MiB/s", 1)], process=3)
    store.set_run_monitors(first, {"vmstat": {"options": {"interval": 1}, "status": "ok", "errors": []}})
    store.set_run_monitors(second, {})
    store.add_monitor_series(first, "vmstat", 0, [(None, 0.5, {"us": 10.0, "nan": float("nan"),
                                                               "inf": float("inf")}), (1, 1.0, {"sy": 1})])
    store.add_failure(first, "part", "exited 3")
    store.add_failure(first, "part", "exited 4 the second time")
    store.add_failure(third, "other", "nul \x00 and newline\n")
    store.add_samples(dropped, 0, [Sample("time.exit_status", 0, "", 0)])
    store.add_failure(dropped, "x", "y")
    store.add_monitor_series(dropped, "vmstat", 0, [(None, 0.1, {"us": 1.0})])
    store.delete_run(dropped)
    store.finish_run(first, "finished")
    store.finish_run(second, "partial", "failed parts: part")
    store.finish_run(third, "failed", None)


def _rows(path) -> dict:
    """Every row of every table, each value with SQLite's type of it."""
    con = sqlite3.connect(path)
    try:
        out = {}
        for table in TABLES:
            columns = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
            picks = ", ".join(f'typeof("{c}"), "{c}"' for c in columns)
            out[table] = con.execute(f"SELECT {picks} FROM {table} ORDER BY rowid").fetchall()
        return out
    finally:
        con.close()


def test_the_recorder_writes_the_rows_the_store_writes(tmp_path, monkeypatch):
    """The same writes through the Store (SQLAlchemy) and a Recorder (sqlite3), the clock and the
    uuids fixed: every row of every table is equal, value and SQLite type; so is the schema."""
    state = {}

    def now():   # 20:00:00, then 0.25 s later each time
        return dt.datetime(2026, 11, 28, 20) + dt.timedelta(microseconds=250_000 * next(state["ticks"]))

    def restart():
        state["ticks"], state["ids"] = itertools.count(), itertools.count()

    restart()
    monkeypatch.setattr(uuid, "uuid4", lambda: uuid.UUID(int=next(state["ids"])))
    for module in (writes_module, recording_module):
        monkeypatch.setattr(module, "utcnow", now)

    by_store = tmp_path / "store.db"
    store = open_store(str(by_store))
    _write_everything(store)
    store.engine.dispose()

    restart()
    by_recorder = tmp_path / "recorder.db"
    recorder = open_recorder(str(by_recorder))
    assert recorder is not None and not by_recorder.with_name("recorder.db-journal").exists()
    _write_everything(recorder)
    recorder.close()

    expected, got = _rows(by_store), _rows(by_recorder)
    for table in TABLES:
        assert got[table] == expected[table], table
    assert len(expected["run"]) == 3 and len(expected["failure"]) == 2 and len(expected["sample"]) == 7
    with open_store(str(by_store)).engine.connect() as a, open_store(str(by_recorder)).engine.connect() as b:
        assert sqlite_schema_of(b) == sqlite_schema_of(a)
    # the Store's settings: WAL (two processes share a file), and the reserve for a full disk
    con = sqlite3.connect(by_recorder)
    assert con.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    con.close()
    assert by_recorder.with_name("recorder.db-reserve").exists()


def test_a_recorders_errors_are_one_line_naming_the_store(tmp_path):
    recorder = open_recorder(str(tmp_path / "perflab.db"))
    from perflab.core.errors import PerflabError

    with pytest.raises(PerflabError, match=r"^the run name \(--name; by default the command line\) is 501 "):
        recorder.create_run(box="b", environment={}, benchmark="cmd", name="n" * 501, params={})
    with pytest.raises(PerflabError, match=r"^database .*perflab\.db: FOREIGN KEY constraint failed$"):
        recorder.add_samples(12345, 0, [Sample("m", 1.0, "s", -1)])
    assert recorder.find_runs() == []


@pytest.mark.parametrize("why", ["old revision", "a URL", "a dead run to reap", "foreign tables", "no folder"])
def test_the_recorder_leaves_to_the_store_what_it_cannot_simply_add_to(tmp_path, why):
    """None, and nothing written, for a store the Store must upgrade, reap, refuse or make a folder
    for (it says why); a read-only file is the reader's case too (tests/test_startup.py)."""
    db = tmp_path / "perflab.db"
    if why == "no folder":
        db = tmp_path / "not" / "here.db"
    else:
        store = open_store(str(db))
        rid = store.create_run(box="b", environment={"testbox": "b"}, benchmark="cmd", name="n", params={})
        store.finish_run(rid, "finished")
        store.engine.dispose()
        con = sqlite3.connect(db)
        with con:
            if why == "old revision":
                con.execute("UPDATE alembic_version SET version_num = '0004'")
            elif why == "a dead run to reap":
                con.execute("UPDATE run SET status = 'running', host = ?, pid = ?, pid_start = '0'",
                            (socket.gethostname(), os.getpid()))
            elif why == "foreign tables":
                con.execute("CREATE TABLE theirs (x)")
                con.execute("DROP TABLE alembic_version")
        con.close()
    before = db.read_bytes() if db.exists() else None
    assert open_recorder(f"sqlite:///{db}" if why == "a URL" else str(db)) is None
    assert (db.read_bytes() if db.exists() else None) == before
    assert not (tmp_path / "not").exists()


def test_two_processes_making_one_new_store_at_once_both_record(tmp_path):
    """The recorder makes a new store under the Store's lock (the folder's): started together,
    four processes each record their run into one new file."""
    db = tmp_path / "perflab.db"
    script = ("import sys\n"
              "from perflab.store.recording import open_recorder\n"
              "r = open_recorder(sys.argv[1])\n"
              "rid = r.create_run(box='b', environment={'testbox': 'b'}, benchmark='cmd', name='n', params={})\n"
              "r.finish_run(rid, 'finished')\n")
    procs = [subprocess.Popen([sys.executable, "-c", script, str(db)], stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    for p in procs:
        assert p.wait(timeout=120) == 0, p.stderr.read()
    con = sqlite3.connect(db)
    assert con.execute("SELECT count(*), count(DISTINCT id) FROM run WHERE status = 'finished'").fetchone() == (4, 4)
    con.close()


def test_perflab_run_records_without_sqlalchemy_and_the_store_reads_it(cli):
    """`perflab run` on a new store and on an existing one imports no SQLAlchemy; what it wrote is
    what the Store reads."""
    script = ("import json, os, sys\n"
              "from perflab.cli import main\n"
              "rc = main(sys.argv[1:])\n"
              "print(json.dumps('sqlalchemy' in sys.modules), file=sys.stderr)\n"
              "sys.exit(rc)\n")
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-c", script, "run", "cmd", "--runs", "2", "--tag", "t", "--", "true"],
                              capture_output=True, text=True, timeout=120, env=cli.env, cwd=cli.tmp)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stderr.splitlines()[-1]) is False
    store = open_store(str(cli.db))
    runs = store.find_runs()
    assert [(r.status, r.tag, r.benchmark) for r in runs] == [("finished", "t", "cmd")] * 2
    assert len([x for x in store.samples([runs[0].id]) if x.metric == "time.elapsed_time"]) == 2

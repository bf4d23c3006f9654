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
    store.annotate(second, "a comment, then another")
    store.annotate(second, "é \x00 and more")
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


def _import_everything(store) -> list:
    """Every write `perflab import` makes, with values that test each column's encoding: runs with and
    without failures, monitors and series, a job, a dirty flag of each kind, a time with a zone, a
    run that was still running (it becomes interrupted), samples with and without their process, a
    run named twice in one import, then the same runs again (skipped), then an import rolled back."""
    from perflab.exchange.transfer import check_run_fields

    def run(i, **more):
        return check_run_fields({
            "uuid": f"00000000-0000-4000-8000-{i:012d}", "testbox": f"box{i % 2}", "benchmark": "cmd",
            "name": f"run {i}", "params": {"command": "true", "n": i, "ratio": 0.1}, "tag": "t" if i else None,
            "commit": "a" * 40 if i == 1 else None, "dirty": (None, True, False)[i % 3],
            "started": f"2026-11-{1 + i:02d}T10:00:0{i}.25", "finished": None if i == 2 else "2026-11-20T10:00:00",
            "status": "running" if i == 2 else "finished", "comment": "a note" if i == 1 else None, "error": None,
            "environment": {"testbox": f"box{i % 2}", "cpus": 2, "flags": ["a", "é"], "nested": {"none": None}},
            "failures": [["part", "exited 3"]] if i == 1 else [], "job": {"runs": 3} if i == 3 else None,
            "monitors": {"vmstat": {"status": "ok"}} if i == 1 else None,
            "monitor_series": [["vmstat", 0, None, 0.5, {"us": 10.0}], ["vmstat", 1, 2, 1.0, {"sy": 1}]] if i == 1 else [],
            **more}, f"run {i}")

    counts = []
    writer = store.begin_import()
    writer.begin_file()
    for i in range(4):
        r = run(i, started="2026-11-05T10:00:00+02:00") if i == 3 else run(i)
        rows = ([("time.elapsed_time", 0.5 + rep, "s", -1, rep) for rep in range(3)] if i % 2 else
                [("time.elapsed_time", 0.5 + rep, "s", -1, rep, rep or None) for rep in range(3)])
        writer.add_samples(writer.add_run(r), rows)
    writer.add_samples(writer.add_run(run(0)), [("m", 1.0, "", 0, 0)])   # the same run twice
    counts += [(c.runs, c.skipped, c.samples) for c in writer.commit()]
    again = store.begin_import()
    again.add_samples(again.add_run(run(1)), [("m", 1.0, "", 0, 0)])
    counts += [(c.runs, c.skipped, c.samples) for c in again.commit()]
    doomed = store.begin_import()
    doomed.add_samples(doomed.add_run(run(7)), [("m", 1.0, "", 0, rep) for rep in range(5)])
    doomed._flush()   # written, still invisible ...
    doomed.rollback()  # ... and removed
    return counts


def test_an_import_through_the_recorder_writes_the_rows_the_store_writes(tmp_path):
    """`perflab import` writes through sqlite3 too (perflab.store.recording.RecorderImport): the same
    import through the Store's ImportWriter (SQLAlchemy) and a Recorder leaves every row of every
    table equal, value and SQLite type, and says the same counts."""
    by_store = tmp_path / "store.db"
    store = open_store(str(by_store))
    expected_counts = _import_everything(store)
    store.engine.dispose()
    by_recorder = tmp_path / "recorder.db"
    recorder = open_recorder(str(by_recorder))
    counts = _import_everything(recorder)
    recorder.close()

    assert counts == expected_counts == [(4, 1, 12), (0, 1, 0)]
    expected, got = _rows(by_store), _rows(by_recorder)
    for table in TABLES:
        assert got[table] == expected[table], table
    runs = expected["run"]
    assert len(runs) == 4 and len(expected["sample"]) == 12 and len(expected["monitor_series"]) == 2
    statuses = [row[2 * 12 + 1] for row in runs]   # (typeof, value) pairs: column 12 is status
    assert statuses == ["finished", "finished", "interrupted", "finished"]


def test_perflab_import_and_export_load_no_sqlalchemy_nor_a_family(cli, tmp_path):
    """`perflab import` (other tools' files and perflab's own exports, into a new store and one that
    has runs) and `perflab export` import neither SQLAlchemy nor a benchmark family's module
    (pydantic, YAML): the recorder writes, the reader reads, the checks need five metric names."""
    from test_startup import HEAVY, _modules

    data = os.path.join(os.path.dirname(__file__), "data", "importers")
    env = dict(cli.env, PERFLAB_FS_STATE_DIR=str(tmp_path / "fs"))
    loaded, out = _modules(env, "import", os.path.join(data, "hyperfine.json"))
    assert "imported 2 runs (hyperfine JSON, 32 samples)" in out
    assert not loaded & set(HEAVY), loaded & set(HEAVY)
    export = tmp_path / "export.json"
    loaded, _ = _modules(env, "export", "-o", str(export))
    assert not loaded & set(HEAVY), loaded & set(HEAVY)
    loaded, out = _modules(dict(env, PERFLAB_DB=str(tmp_path / "other.db")), "import", "--tag", "again", str(export))
    assert "imported 2 runs" in out
    assert not loaded & set(HEAVY), loaded & set(HEAVY)
    assert sorted(open_store(str(tmp_path / "other.db")).find_runs(), key=lambda r: r.name)[0].tag == "again"
    # annotate writes its comment the same way
    loaded, out = _modules(env, "annotate", "1", "a note")
    assert out.startswith("run #1: a note") and "sqlalchemy" not in loaded
    assert open_store(str(cli.db)).get_run(1).comment == "a note"

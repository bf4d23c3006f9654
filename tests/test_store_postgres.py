"""The store on both backends: SQLite and a real PostgreSQL server (tests/services.py).

The same tests run on each backend (`store_url`), and CLI commands run with
--db postgresql://... must print what they print from SQLite for the same data.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.exc import SQLAlchemyError

from conftest import CLI, PERFLAB, assert_one_line_error
from perflab.core.errors import PerflabError
from perflab.core.model import Sample
from perflab.store import open_store
from perflab.store import schema as s
from perflab.store.engine import HEAD_REVISION, as_url

import fixtures_compare
import fixtures_lmbench

FACTS = {"testbox": "box", "kernel_release": "6.1.0", "cc_version": "gcc 12"}


def engine_of(url: str):
    return create_engine(as_url(url))


def rows(url: str, query: str, **params) -> list[tuple]:
    engine = engine_of(url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(query), params)]
    finally:
        engine.dispose()


def execute(url: str, *statements: str) -> None:
    """Run statements in one committed transaction."""
    engine = engine_of(url)
    try:
        with engine.begin() as conn:
            for statement in statements:
                conn.execute(text(statement))
    finally:
        engine.dispose()


def dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    return int(proc.stdout)


def new_run(store, tag="t", **kw) -> int:
    return store.create_run(box="box", environment=FACTS, benchmark="cmd", name="true", params={"command": "true"},
                            tag=tag, **kw)


def mark_dead(store, run_id: int) -> None:
    """As if the process writing the run had been killed: its pid names a process that is gone."""
    with store.engine.begin() as conn:
        conn.execute(s.run.update().where(s.run.c.id == run_id).values(pid=dead_pid()))


def dead_running_run(url: str) -> int:
    """A 'running' run whose writer is gone, left waiting to be reaped; the store's connections closed."""
    store = open_store(url)
    rid = new_run(store)
    mark_dead(store, rid)
    store.engine.dispose()
    return rid


# -- schema and migrations ---------------------------------------------------------------

def test_schema_is_the_same_on_both_backends(postgres_url, tmp_path):
    """Alembic's migrations make, on each backend, the tables, columns and indexes schema.py declares."""
    lite = str(tmp_path / "perflab.db")
    shapes = {}
    for url in (lite, postgres_url):
        open_store(url).engine.dispose()
        engine = engine_of(url)
        insp = inspect(engine)
        tables = set(insp.get_table_names()) - {"alembic_version"}
        shapes[url] = {
            t: ({c["name"]: (type(c["type"]).__name__ if "JSON" in type(c["type"]).__name__ else
                             c["type"].python_type.__name__, c["nullable"]) for c in insp.get_columns(t)},
                # indexes, then unique keys by their columns (PostgreSQL names them itself)
                sorted((i["name"], tuple(i["column_names"])) for i in insp.get_indexes(t) if "duplicates_constraint" not in i),
                sorted(tuple(u["column_names"]) for u in insp.get_unique_constraints(t)))
            for t in tables
        }
        assert rows(url, "SELECT version_num FROM alembic_version") == [(HEAD_REVISION,)]
        engine.dispose()
    assert shapes[lite] == shapes[postgres_url]
    assert set(shapes[postgres_url]) == set(s.metadata.tables)
    for name, table in s.metadata.tables.items():
        assert set(shapes[postgres_url][name][0]) == {c.name for c in table.columns}, name


def test_an_old_postgresql_store_is_upgraded_keeping_its_runs(postgres_url):
    from alembic import command
    from alembic.config import Config

    from perflab.store import db

    cfg = Config()
    cfg.set_main_option("script_location", os.path.join(os.path.dirname(db.__file__), "migrations"))
    engine = engine_of(postgres_url)
    with engine.connect() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0001")
        conn.execute(text("INSERT INTO testbox (name) VALUES ('old-box')"))
        conn.execute(text("INSERT INTO environment (testbox_id, digest, facts) VALUES (1, 'd', '{}')"))
        conn.execute(text("INSERT INTO run (uuid, testbox_id, environment_id, benchmark, name, params, started, status) "
                          "VALUES ('u1', 1, 1, 'cmd', 'old run', '{}', '2026-01-01 00:00:00', 'finished')"))
        conn.execute(text("INSERT INTO sample (run_id, metric, value, unit, direction, repetition) "
                          "VALUES (1, 'time.elapsed_time', 1.5, 's', -1, 0), (1, 'time.elapsed_time', 2.5, 's', -1, 1)"))
        conn.commit()
    engine.dispose()
    store = open_store(postgres_url)
    assert [r.name for r in store.find_runs()] == ["old run"]
    assert store.metric_sums([1], ["time.elapsed_time"]) == {(1, "time.elapsed_time"): (4.0, 2)}
    assert sorted(store.metric_values([1], ["time.elapsed_time"])[(1, "time.elapsed_time")]) == [1.5, 2.5]
    # The serial sequences go on after the old rows.
    assert new_run(store) == 2
    store.engine.dispose()
    assert rows(postgres_url, "SELECT version_num FROM alembic_version") == [(HEAD_REVISION,)]


def alembic_to(url: str, revision: str, direction: str = "upgrade") -> None:
    """Bring the store at `url` to `revision` with Alembic itself (as an older perflab left it)."""
    from alembic import command
    from alembic.config import Config

    from perflab.store import db

    cfg = Config()
    cfg.set_main_option("script_location", os.path.join(os.path.dirname(db.__file__), "migrations"))
    engine = engine_of(url)
    try:
        with engine.connect() as conn:
            cfg.attributes["connection"] = conn
            getattr(command, direction)(cfg, revision)
            conn.commit()
    finally:
        engine.dispose()


def id_columns() -> set[tuple[str, str]]:
    """Every surrogate id and every column naming one, as schema.py declares them."""
    return {(t.name, c.name) for t in s.metadata.tables.values() for c in t.columns if c.primary_key or c.foreign_keys}


def pg_id_types(url: str) -> tuple[dict, dict]:
    """({(table, column): data type} of the id columns, {sequence: (data type, max value)})."""
    columns = {(t, c): kind for t, c, kind in rows(
        url, "SELECT table_name, column_name, data_type FROM information_schema.columns WHERE table_schema = 'public'")
        if (t, c) in id_columns()}
    sequences = {name: (kind, int(top)) for name, kind, top in rows(
        url, "SELECT sequencename, data_type::text, max_value FROM pg_sequences WHERE schemaname = 'public'")}
    return columns, sequences


SERIAL_TABLES = ("testbox", "environment", "run", "sample", "failure", "monitor_series", "robot_report")


def test_every_id_is_64_bit_on_both_backends_and_sqlite_keeps_its_rowid(postgres_url, tmp_path):
    from sqlalchemy.dialects import postgresql, sqlite

    # What schema.py declares: bigint on PostgreSQL, plain INTEGER (the rowid's type) on SQLite.
    assert {("run", "id"), ("run", "testbox_id"), ("run", "environment_id"), ("environment", "testbox_id"),
            ("sample", "run_id"), ("failure", "run_id"), ("monitor_series", "run_id"), ("robot_report", "id")} <= id_columns()
    for table, column in id_columns():
        kind = s.metadata.tables[table].c[column].type
        assert (kind.compile(dialect=postgresql.dialect()), kind.compile(dialect=sqlite.dialect())) == ("BIGINT", "INTEGER"), (table, column)
    # What a fresh store at head has on PostgreSQL: the same, sequences included.
    open_store(postgres_url).engine.dispose()
    columns, sequences = pg_id_types(postgres_url)
    assert columns == {key: "bigint" for key in id_columns()}
    assert sequences == {f"{t}_id_seq": ("bigint", 2**63 - 1) for t in SERIAL_TABLES}
    # On SQLite every primary key is still the rowid itself (INTEGER PRIMARY KEY), 64-bit.
    lite = str(tmp_path / "perflab.db")
    store = open_store(lite)
    for table in SERIAL_TABLES:
        (sql,), = rows(lite, "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = :t", t=table)
        assert re.search(r"\bid INTEGER NOT NULL\b", sql) and "PRIMARY KEY (id)" in sql, sql
    with store.engine.begin() as conn:
        conn.execute(s.testbox.insert().values(id=2**62, name="far"))
    assert rows(lite, "SELECT rowid, id FROM testbox") == [(2**62, 2**62)]  # an alias of the rowid, not a copy
    store.engine.dispose()


def test_revision_0005_goes_down_to_0004s_types_and_up_again(postgres_url):
    open_store(postgres_url).engine.dispose()
    alembic_to(postgres_url, "0004", "downgrade")
    columns, sequences = pg_id_types(postgres_url)
    # 0004's types: only sample.id and monitor_series.id were bigint (bigserial) already.
    assert {k for k, kind in columns.items() if kind == "bigint"} == {("sample", "id"), ("monitor_series", "id")}
    assert set(columns.values()) == {"bigint", "integer"}
    assert sequences["run_id_seq"] == ("integer", 2**31 - 1) and sequences["sample_id_seq"] == ("bigint", 2**63 - 1)
    alembic_to(postgres_url, "head")
    columns, sequences = pg_id_types(postgres_url)
    assert set(columns.values()) == {"bigint"} and {kind for kind, _ in sequences.values()} == {"bigint"}


def test_a_postgresql_store_at_0004_upgrades_to_64_bit_ids_keeping_its_data(postgres_url):
    """The previous head with data in every table: the upgrade alters the columns and sequences in
    place; every row is as it was, the foreign keys still hold, and the sequences go on from where they were."""
    alembic_to(postgres_url, "0004")
    execute(postgres_url,
        "INSERT INTO testbox (name) VALUES ('old-box'), ('other-box')",
        "INSERT INTO environment (testbox_id, digest, facts) VALUES (1, 'd1', '{\"kernel_release\": \"6.1.0\"}'), (2, 'd2', '{}')",
        "INSERT INTO run (uuid, testbox_id, environment_id, benchmark, name, params, tag, started, finished, status, job, monitors) "
        "VALUES ('u1', 1, 1, 'cmd', 'old run', '{\"command\": \"true\"}', 'base', '2026-01-01 00:00:00', '2026-01-01 00:01:00', "
        "'finished', '{\"benchmark\": \"cmd\"}', '{\"vmstat\": {\"status\": \"ok\"}}'), "
        "('u2', 2, 2, 'cmd', 'old run', '{}', 'head', '2026-01-02 00:00:00', NULL, 'failed', NULL, NULL)",
        "INSERT INTO sample (run_id, metric, value, unit, direction, repetition, process) "
        "VALUES (1, 'time.elapsed_time', 1.5, 's', -1, 0, 0), (1, 'time.elapsed_time', 2.5, 's', -1, 1, 0), (2, 'x.ops', 7, 'ops/s', 1, 0, NULL)",
        "INSERT INTO failure (run_id, item, message) VALUES (2, 'lat_ipc', 'refused')",
        "INSERT INTO monitor_series (run_id, monitor, repetition, process, t, \"values\") VALUES (1, 'vmstat', 0, NULL, 0.5, '{\"us\": 3.0}')",
        "INSERT INTO robot_report (robot, culprit, metric, good, bad, created, subject, text) "
        "VALUES ('r', 'abc', 'x.ops', 'g', 'b', '2026-01-03 00:00:00', 'subject', 'text')",
    )
    columns, sequences = pg_id_types(postgres_url)
    assert columns[("run", "id")] == columns[("sample", "run_id")] == "integer" and columns[("sample", "id")] == "bigint"
    assert sequences["run_id_seq"] == ("integer", 2**31 - 1)
    dump = lambda: {t: [tuple(map(str, r)) for r in rows(postgres_url, f'SELECT * FROM "{t}" ORDER BY id')] for t in SERIAL_TABLES}
    before = dump()
    foreign_keys = lambda: {t: sorted((tuple(f["constrained_columns"]), f["referred_table"], f["options"].get("ondelete"))
                                      for f in inspect(engine).get_foreign_keys(t)) for t in SERIAL_TABLES}
    engine = engine_of(postgres_url)
    keys_before = foreign_keys()
    engine.dispose()
    # A lab's grants (docs/lab.md) are kept: the tables and sequences are altered, not recreated.
    execute(postgres_url, "GRANT SELECT ON ALL TABLES IN SCHEMA public TO PUBLIC",
            "GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO PUBLIC")
    grants = "SELECT relname, relacl::text FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relacl IS NOT NULL ORDER BY 1"
    grants_before = rows(postgres_url, grants)
    assert len(grants_before) == 2 * len(SERIAL_TABLES) + 1  # the tables, their sequences, alembic_version

    store = open_store(postgres_url)
    assert rows(postgres_url, "SELECT version_num FROM alembic_version") == [(HEAD_REVISION,)]
    columns, sequences = pg_id_types(postgres_url)
    assert columns == {key: "bigint" for key in id_columns()}
    assert sequences == {f"{t}_id_seq": ("bigint", 2**63 - 1) for t in SERIAL_TABLES}
    assert dump() == before and sum(map(len, before.values())) == 12
    engine = engine_of(postgres_url)
    assert foreign_keys() == keys_before and sum(map(len, keys_before.values())) == 6
    engine.dispose()
    assert rows(postgres_url, grants) == grants_before
    with pytest.raises(SQLAlchemyError, match="foreign key"):  # still enforced
        execute(postgres_url, "INSERT INTO sample (run_id, metric, value, unit, direction, repetition) VALUES (99, 'a', 1, 's', -1, 0)")
    # Read through the store as before, and the sequences go on after the old rows.
    assert [(r.id, r.tag, r.box) for r in store.find_runs()] == [(1, "base", "old-box"), (2, "head", "other-box")]
    assert store.get_run(1).monitors == {"vmstat": {"status": "ok"}}
    assert store.metric_sums([1], ["time.elapsed_time"]) == {(1, "time.elapsed_time"): (4.0, 2)}
    assert new_run(store) == 3
    assert rows(postgres_url, "SELECT max(id) FROM testbox") == [(3,)] and rows(postgres_url, "SELECT max(id) FROM environment") == [(3,)]
    store.engine.dispose()


def test_revision_0005_leaves_an_sqlite_store_as_it_was(tmp_path):
    """SQLite's ids are 64-bit already: the upgrade from 0004 changes no table (no copy of a big file)."""
    lite = str(tmp_path / "perflab.db")
    alembic_to(lite, "0004")
    execute(lite, "INSERT INTO testbox (name) VALUES ('old-box')")
    tables = "SELECT name, sql FROM sqlite_master ORDER BY name"
    before = rows(lite, tables)
    open_store(lite).engine.dispose()
    assert rows(lite, "SELECT version_num FROM alembic_version") == [(HEAD_REVISION,)]
    assert rows(lite, tables) == before and rows(lite, "SELECT id, name FROM testbox") == [(1, "old-box")]


def test_runs_environments_and_testboxes_past_2_31_on_postgresql(postgres_url, tmp_path, shared_cache):
    """After the upgrade, ids past 2^31 in every table: recorded, read, compared and exported by
    the CLI (through psycopg, which casts each parameter to its column's type), and imported elsewhere."""
    alembic_to(postgres_url, "0004")
    execute(postgres_url, "INSERT INTO testbox (name) VALUES ('old-box')")
    open_store(postgres_url).engine.dispose()  # 0004 -> head
    start = {t: 3_000_000_000 + i * 100_000_000 for i, t in enumerate(SERIAL_TABLES)}
    for table, value in start.items():
        rows(postgres_url, f"SELECT setval('{table}_id_seq', {value})")
    pg = CLI(postgres_url, tmp_path, shared_cache)
    pg("run", "cmd", "--runs", "2", "--tag", "local", "--", "true")
    fixtures_compare.load(pg, tmp_path)  # two base and two head runs on testbox lkp-box
    ids = {tag: [i for (i,) in rows(postgres_url, "SELECT id FROM run WHERE tag = :t ORDER BY id", t=tag)]
           for tag in ("local", "base", "head")}
    assert ids == {"local": [start["run"] + 1], "base": [start["run"] + 2, start["run"] + 3],
                   "head": [start["run"] + 4, start["run"] + 5]}
    assert rows(postgres_url, "SELECT min(id), max(id) FROM testbox WHERE name <> 'old-box'") == [(start["testbox"] + 1, start["testbox"] + 2)]
    assert rows(postgres_url, "SELECT min(id), min(testbox_id) FROM environment") == [(start["environment"] + 1, start["testbox"] + 1)]
    assert rows(postgres_url, "SELECT min(run_id) FROM sample") == [(start["run"] + 1,)]

    local, base, head = ids["local"][0], ids["base"][0], ids["head"][0]
    show = pg("show", str(local)).stdout
    assert f"run #{local}" in show and re.search(r"time\.elapsed_time\s+s\s+2\s", show), show
    assert re.search(rf"^\s*{base}\s.*finished.*base", pg("runs").stdout, re.M)
    pg("annotate", f"#{head}", "past 2^31")
    by_tag = pg("compare", "base", "head").stdout
    by_id = pg("compare", str(base), str(head)).stdout
    for output in (by_tag, by_id):  # the fixture's two changed metrics are found from the big-id runs
        assert "bench.latency_us" in output and "bench.ops_per_sec" in output, output

    exported = tmp_path / "big-ids.json"
    pg("export", "--run", str(base), "--run", str(ids["base"][1]), "--run", str(head), "--run", str(ids["head"][1]), "-o", exported)
    doc = json.loads(exported.read_text())
    assert sorted(r["tag"] for r in doc["runs"]) == ["base", "base", "head", "head"]
    assert {r["comment"] for r in doc["runs"]} == {None, "past 2^31"}
    lite = _sqlite_cli(tmp_path, shared_cache)
    assert "imported 4 runs" in (lambda p: p.stdout + p.stderr)(lite("import", exported))
    assert lite("compare", "base", "head").stdout == by_tag  # the same verdicts from small ids

    # The store's own calls, with every table's ids past 2^31.
    store = open_store(postgres_url)
    assert store.get_run(head).comment == "past 2^31" and store.get_run(f"#{local}").box
    assert [r.id for r in store.find_runs(ids=[base, 2**62, 2**63 - 1])] == [base]
    store.add_failure(local, "item", "failed")
    assert store.add_robot_report(robot="r", culprit="c", metric="m", good="g", bad="b", subject="s", text="t")
    assert rows(postgres_url, "SELECT min(id) FROM failure") == [(start["failure"] + 1,)]
    assert rows(postgres_url, "SELECT id FROM robot_report") == [(start["robot_report"] + 1,)]
    with pytest.raises(PerflabError, match=rf"no run with id {2**63 - 1} in"):
        store.get_run(2**63 - 1)
    store.delete_run(local)
    with pytest.raises(PerflabError, match=f"no run with id {local} in"):
        store.get_run(local)
    store.engine.dispose()


def test_processes_opening_a_new_store_at_once_migrate_it_once_and_record(store_url, tmp_path):
    """The migration runs under a lock (flock on SQLite, an advisory lock on PostgreSQL)."""
    # ... and then record a run each on the same testbox and environment, rows that all of them insert if absent.
    code = ("import sys; from perflab.store import open_store; from perflab.core.model import Sample\n"
            "store = open_store(sys.argv[1])\n"
            "rid = store.create_run(box='box', environment={'k': 1}, benchmark='cmd', name='true', params={})\n"
            "store.add_samples(rid, 0, [Sample('m.x', float(i), 's', -1) for i in range(100)])\n"
            "store.finish_run(rid, 'finished')\n")
    procs = [subprocess.Popen([sys.executable, "-c", code, store_url], stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    assert rows(store_url, "SELECT version_num FROM alembic_version") == [(HEAD_REVISION,)]
    assert rows(store_url, "SELECT count(*) FROM testbox") == [(1,)]
    assert rows(store_url, "SELECT count(*) FROM environment") == [(1,)]
    assert rows(store_url, "SELECT status, count(*) FROM run GROUP BY status") == [("finished", 4)]
    assert rows(store_url, "SELECT count(*) FROM sample") == [(400,)]


def test_a_store_upgraded_by_a_newer_perflab_is_refused_in_one_line(store_url):
    """In a lab, one box may run a newer perflab that upgraded the shared store."""
    open_store(store_url).engine.dispose()
    engine = engine_of(store_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    engine.dispose()
    with pytest.raises(PerflabError, match=rf"schema is at revision 9999, newer than this perflab knows \(up to {HEAD_REVISION}\); upgrade perflab"):
        open_store(store_url)


# -- writing and reading -------------------------------------------------------------------

def test_runs_samples_failures_and_monitors_round_trip(store_url):
    store = open_store(store_url)
    rid = new_run(store, tag="v1", commit="abc123", dirty=True, comment="first", job={"benchmark": "cmd", "runs": 2})
    assert store.add_samples(rid, 0, [Sample("time.elapsed_time", 1.25, "s", -1), Sample("x.ops", 10.0, "ops/s", 1)], process=0) == 2
    assert store.add_samples(rid, 1, [Sample("time.elapsed_time", 1.75, "s", -1), Sample("x.ops", 30.0, "ops/s", 1)], process=0) == 2
    store.add_failure(rid, "lat_ipc", "refused")
    store.add_failure(rid, "lat_ipc", "refused again")  # replaces: one failure per item
    store.set_run_monitors(rid, {"vmstat": {"interval": 1.0, "status": "ok", "unsupported": []}})
    assert store.add_monitor_series(rid, "vmstat", 0, [(None, 0.5, {"us": 3.0, "sy": float("nan")}), (0, 1.0, {"us": 4.0})]) == 2
    store.finish_run(rid, "partial", error="one item failed")
    store.annotate(rid, "looked at it")

    run = store.get_run(rid)
    assert (run.status, run.tag, run.commit, run.dirty, run.comment, run.box) == ("partial", "v1", "abc123", True, "looked at it", "box")
    assert run.params == {"command": "true"} and run.job == {"benchmark": "cmd", "runs": 2}
    assert run.environment == FACTS and run.monitors["vmstat"]["status"] == "ok"
    assert run.finished >= run.started and run.started.tzinfo is None
    assert [tuple(r) for r in store.samples([rid])] == [
        (rid, "time.elapsed_time", 1.25, "s", -1, 0, 0), (rid, "time.elapsed_time", 1.75, "s", -1, 1, 0),
        (rid, "x.ops", 10.0, "ops/s", 1, 0, 0), (rid, "x.ops", 30.0, "ops/s", 1, 1, 0)]
    assert store.metric_sums([rid], ["x.ops", "time.elapsed_time"]) == {(rid, "x.ops"): (40.0, 2), (rid, "time.elapsed_time"): (3.0, 2)}
    assert store.sample_counts([rid]) == {rid: 4}
    assert [tuple(f) for f in store.failures([rid])] == [(rid, "lat_ipc", "refused again")]
    series = store.monitor_series([rid], "vmstat")
    assert [(r.process, r._mapping["t"], r._mapping["values"]) for r in series] == [(None, 0.5, {"us": 3.0}), (0, 1.0, {"us": 4.0})]
    (log,) = store.log_rows(metrics=("time.elapsed_time",))
    assert log.id == rid and log.m0 == pytest.approx(1.5)
    assert [r.id for r in store.find_runs(tag="v1", box="box", benchmark="cmd", status="partial")] == [rid]
    assert store.find_runs(tag="nope") == []
    assert store.run_names() == (["cmd"], ["true"], 1)
    # The same environment is one row, however many runs share it.
    new_run(store)
    assert rows(store_url, "SELECT count(*) FROM environment") == [(1,)]
    assert rows(store_url, "SELECT count(*) FROM testbox") == [(1,)]


def test_ids_out_of_range_and_missing_runs_are_one_line_errors(store_url):
    store = open_store(store_url)
    rid = new_run(store)
    with pytest.raises(PerflabError, match=r"no run with id 99999999999 in"):
        store.get_run(99999999999)  # beyond 32 bits: just "no such run" on both backends
    with pytest.raises(PerflabError, match="out of range"):
        store.get_run(2**63)
    assert store.find_runs(ids=[rid, 2**40])[0].id == rid
    store.delete_run(rid)
    with pytest.raises(PerflabError, match=f"no run with id {rid}"):
        store.get_run(rid)


def test_sample_ids_go_past_32_bits_on_postgresql(postgres_url):
    """sample.id and monitor_series.id are 64-bit on PostgreSQL, as SQLite's are: a shared
    store outgrows 2^31 samples before it has 2^31 runs."""
    store = open_store(postgres_url)
    for table in ("sample", "monitor_series"):
        (kind,), = rows(postgres_url, "SELECT data_type FROM information_schema.columns "
                                      "WHERE table_name = :t AND column_name = 'id'", t=table)
        assert kind == "bigint", table
        rows(postgres_url, f"SELECT setval('{table}_id_seq', 3000000000)")
    rid = new_run(store)
    store.add_samples(rid, 0, [Sample("a.b", 1.0, "s", -1), Sample("a.b", 2.0, "s", -1)])
    store.add_monitor_series(rid, "vmstat", 0, [(None, 0.5, {"us": 1.0})])
    (run, *_) = checked_runs(fixtures_compare.export_document())
    assert store.import_runs([run]) == (1, 0)
    assert [r.value for r in store.samples([rid])] == [1.0, 2.0]
    assert rows(postgres_url, "SELECT min(id) > 3000000000 FROM sample") == [(True,)]
    assert store.metric_sums([rid], ["a.b"]) == {(rid, "a.b"): (3.0, 2)}
    store.delete_run(rid)  # deleting by id beyond 2^31 too
    assert store.sample_counts([rid]) == {}


def test_text_with_nul_bytes_is_kept(store_url):
    """A benchmark's output tail may hold NUL bytes, which PostgreSQL's text refuses:
    they are stored as U+FFFD there, as they are in SQLite."""
    store = open_store(store_url)
    rid = new_run(store)
    store.add_samples(rid, 0, [Sample("x.a\x00b", 1.0, "s\x00", -1)])
    assert [(r.metric, r.unit) for r in store.samples([rid])][0] in (("x.a\x00b", "s\x00"), ("x.a\ufffdb", "s\ufffd"))
    store.add_failure(rid, "item", "out: a\x00b")
    store.finish_run(rid, "failed", error="exited 3: x\x00y")
    run = store.get_run(rid)
    assert run.status == "failed" and run.error in ("exited 3: x\x00y", "exited 3: x\ufffdy")
    assert store.failures([rid])[0].message in ("out: a\x00b", "out: a\ufffdb")


def test_a_failed_copy_is_a_one_line_error_and_writes_nothing(postgres_url):
    """Samples go to PostgreSQL by COPY; a row it refuses fails the batch like any statement."""
    store = open_store(postgres_url)
    (run, *_) = checked_runs(fixtures_compare.export_document())
    writer = store.begin_import()
    writer.add_samples(writer.add_run(run), [("a.b", 1.0, "s", -1, 0), ("a.c", 2.0, "s", "x", 1)])  # unchecked rows
    with pytest.raises(PerflabError, match=r'^database postgresql://perflab@\S+: invalid input syntax for type integer: "x"$'):
        writer.commit()
    writer.rollback()
    assert rows(postgres_url, "SELECT count(*) FROM run") == [(0,)]
    assert rows(postgres_url, "SELECT count(*) FROM sample") == [(0,)]
    assert store.import_runs([run]) == (1, 0)  # the pool's connection is usable again


def test_dead_writers_runs_are_reaped_and_live_ones_kept(store_url):
    store = open_store(store_url)
    live, dead = new_run(store), new_run(store)
    engine = store.engine
    mark_dead(store, dead)
    assert store.reap_dead_runs() == 1
    assert store.get_run(dead).status == "interrupted" and "ended without closing it" in store.get_run(dead).error
    assert store.get_run(live).status == "running"
    assert store.reap_dead_runs() == 0


def checked_runs(doc: dict) -> list[dict]:
    """The runs of an export document as `perflab import` hands them to the store."""
    from perflab.exchange import transfer

    return transfer.read_text("fixture.json", json.dumps(doc))


def test_import_is_all_or_nothing_and_skips_known_uuids(store_url):
    store = open_store(store_url)
    runs = checked_runs(fixtures_compare.export_document())
    assert store.import_runs(runs) == (4, 0)
    assert store.import_runs(checked_runs(fixtures_compare.export_document())) == (4, 0)  # new uuids
    assert store.import_runs(runs) == (0, 4)
    n = 2 * sum(len(r["samples"]) for r in runs)
    assert rows(store_url, "SELECT count(*) FROM sample") == [(n,)]
    # Stopped after a batch was committed (as by Ctrl-C between transactions): nothing stays.
    calls = []

    def stop_at_second_batch():
        calls.append(1)
        if len(calls) > 2:
            raise KeyboardInterrupt

    writer = store.begin_import(stop_at_second_batch)
    fresh = checked_runs(fixtures_compare.export_document())
    with pytest.raises(KeyboardInterrupt):
        for run in fresh:
            writer.add_samples(writer.add_run(run), run["samples"])
            writer._flush()
        writer.commit()
    assert writer.wrote_anything
    writer.rollback()
    assert len(store.find_runs()) == 8
    assert rows(store_url, "SELECT count(*) FROM run") == [(8,)]
    assert rows(store_url, "SELECT count(*) FROM sample") == [(n,)]


def test_an_import_killed_midway_is_discarded_by_the_next_command(store_url):
    store = open_store(store_url)
    writer = store.begin_import()
    (run, *_) = checked_runs(fixtures_compare.export_document())
    writer.add_samples(writer.add_run(run), run["samples"])
    writer._flush()  # written as 'importing', invisible
    assert store.find_runs() == [] and rows(store_url, "SELECT count(*) FROM run") == [(1,)]
    with store.engine.begin() as conn:  # as if its process had been killed
        conn.execute(s.run.update().values(pid=dead_pid()))
    assert store.discard_dead_imports() == 1
    assert rows(store_url, "SELECT count(*) FROM run") == [(0,)]
    assert rows(store_url, "SELECT count(*) FROM sample") == [(0,)]


# -- the CLI against PostgreSQL -------------------------------------------------------------

@pytest.fixture
def pg_cli(postgres_url, tmp_path, shared_cache) -> CLI:
    assert PERFLAB, "the perflab command is not installed in this environment"
    return CLI(postgres_url, tmp_path, shared_cache)


def _sqlite_cli(tmp_path, shared_cache) -> CLI:
    (tmp_path / "lite").mkdir()
    return CLI(tmp_path / "lite" / "perflab.db", tmp_path / "lite", shared_cache)


def test_cli_run_runs_show_log_rerun_annotate_on_postgresql(pg_cli):
    # (compare from PostgreSQL: test_cli_reports_from_postgresql_match_sqlite)
    pg_cli("run", "cmd", "--runs", "3", "--tag", "base", "--", "true")
    pg_cli("run", "cmd", "--runs", "3", "--tag", "head", "--", "sh", "-c", "exit 0")
    runs = pg_cli("runs").stdout
    assert re.search(r"^\s*1\s.*finished.*base.*\btrue\b", runs, re.M), runs
    assert re.search(r"^\s*2\s.*finished.*head", runs, re.M), runs
    show = pg_cli("show", "1").stdout
    assert "run #1" in show and re.search(r"time\.elapsed_time\s+s\s+3\s", show), show
    pg_cli("annotate", "1", "the baseline")
    log = pg_cli("log").stdout
    assert "the baseline" in log and len([l for l in log.splitlines() if re.match(r"\s+\d+\s+20\d\d-", l)]) == 2
    rerun = pg_cli("rerun", "1", "--tag", "again")
    assert "run #3" in rerun.stdout + rerun.stderr
    (tag, status, job), = rows(pg_cli.db, "SELECT tag, status, job FROM run WHERE id = 3")
    (first_job,), = rows(pg_cli.db, "SELECT job FROM run WHERE id = 1")
    assert (tag, status) == ("again", "finished")
    assert job["benchmark"] == first_job["benchmark"] == "cmd" and job["params"] == first_job["params"]


def test_cli_reports_from_postgresql_match_sqlite(pg_cli, tmp_path, shared_cache):
    """The same imported runs give the same report lmbench and compare output on both backends."""
    lite = _sqlite_cli(tmp_path, shared_cache)
    files = [tmp_path / "lmbench.json", tmp_path / "compare.json"]
    files[0].write_text(json.dumps(fixtures_lmbench.export_document()))
    files[1].write_text(json.dumps(fixtures_compare.export_document()))
    outputs = {}
    for cli in (lite, pg_cli):
        cli("import", *files)
        outputs[cli] = [cli("report", "lmbench", "--box", "k6-2").stdout,
                        cli("compare", "base", "head").stdout]
    assert outputs[lite] == outputs[pg_cli]
    lm, cmp_text = outputs[pg_cli]
    assert lm.startswith("L M B E N C H  2 . 0   S U M M A R Y")
    assert "2.6.0-test3" in lm
    assert "bench.latency_us" in cmp_text and "bench.ops_per_sec" in cmp_text


def test_cli_export_import_between_backends_round_trips(pg_cli, postgres_cluster, tmp_path, shared_cache):
    """PostgreSQL -> SQLite -> a fresh PostgreSQL database keeps every run and sample as it was;
    into the first store again, nothing is duplicated."""
    pg_cli("run", "cmd", "--runs", "2", "--tag", "a", "--", "true")
    fixtures_compare.load(pg_cli, pg_cli.tmp)
    first = tmp_path / "from-pg.json"
    pg_cli("export", "-o", first)
    lite = _sqlite_cli(tmp_path, shared_cache)
    out = lite("import", first)
    assert "imported 5 runs" in out.stdout + out.stderr
    second = tmp_path / "from-sqlite.json"
    lite("export", "-o", second)
    a, b = json.loads(first.read_text()), json.loads(second.read_text())
    key = lambda doc: sorted((r["uuid"], json.dumps(r, sort_keys=True)) for r in doc["runs"])
    assert len(a["runs"]) == 5 and key(a) == key(b)
    fresh = CLI(postgres_cluster.url(postgres_cluster.create_database()), tmp_path, shared_cache)
    fresh("import", second)
    third = tmp_path / "from-fresh-pg.json"
    fresh("export", "-o", third)
    assert key(json.loads(third.read_text())) == key(a)
    # Into the same PostgreSQL store again: every run is known, nothing is duplicated.
    out = pg_cli("import", second)
    assert "imported 0 runs, skipped 5" in out.stdout + out.stderr
    assert rows(pg_cli.db, "SELECT count(*) FROM run") == [(5,)]
    assert rows(pg_cli.db, "SELECT count(*) FROM sample") == [(sum(len(r["samples"]) for r in a["runs"]),)]


def test_cli_run_killed_on_postgresql_is_marked_interrupted(pg_cli):
    proc = pg_cli.popen("run", "cmd", "--runs", "1000", "--", "sleep", "0.05")
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            try:  # the schema may not be there yet
                if rows(pg_cli.db, "SELECT count(*) FROM sample") != [(0,)]:
                    break
            except SQLAlchemyError:
                pass
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()
        proc.kill()
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "interrupted" in pg_cli("runs").stdout
    (status, error), = rows(pg_cli.db, "SELECT status, error FROM run")
    assert status == "interrupted" and "ended without closing it" in error


def test_errors_from_postgresql_are_one_line_with_the_password_masked(postgres_cluster, tmp_path, shared_cache):
    port = postgres_cluster.port
    cases = [
        (f"postgresql://perflab:s3cret@127.0.0.1:{port}/no_such_db", ['database "no_such_db" does not exist']),
        ("postgresql://perflab:s3cret@127.0.0.1:1/x", ["Connection refused"]),
        ("postgresql+psycopg2://perflab:s3cret@127.0.0.1/x", ["psycopg 3"]),
        ("mysql://perflab:s3cret@127.0.0.1/x", ["SQLite", "PostgreSQL"]),
        # libpq's parameters pass through: this server has no TLS
        (f"postgresql://perflab:s3cret@127.0.0.1:{port}/postgres?sslmode=require", ["SSL"]),
    ]
    # libpq also takes the password as a parameter
    with pytest.raises(PerflabError) as caught:
        open_store("postgresql://perflab@127.0.0.1:1/x?password=s3cret&sslmode=disable")
    assert "password=***&sslmode=disable: connection failed" in str(caught.value) and "s3cret" not in str(caught.value)
    for url, needles in cases:
        with pytest.raises(PerflabError) as caught:
            open_store(url)
        message = str(caught.value)
        assert "\n" not in message and "s3cret" not in message and "perflab:***@" in message, message
        assert all(n in message for n in needles), message
    # And through the CLI: one line on stderr, non-zero exit.
    proc = CLI(tmp_path / "unused.db", tmp_path, shared_cache)("--db", cases[0][0], "runs", check=False)
    assert_one_line_error(proc, 'database "no_such_db" does not exist', "perflab:***@")
    assert "s3cret" not in proc.stderr + proc.stdout


def test_cli_a_stopped_server_is_a_one_line_error_and_a_restarted_one_works(postgres_cluster, postgres_url, tmp_path, shared_cache):
    cli = CLI(postgres_url, tmp_path, shared_cache)
    store = open_store(postgres_url)
    store.finish_run(new_run(store), "finished")
    store.engine.dispose()
    postgres_cluster.stop()
    try:
        assert_one_line_error(cli("runs", check=False), "Connection refused")
    finally:
        postgres_cluster.start()
    assert re.search(r"^\s*1\s.*finished", cli("runs").stdout, re.M)


def test_a_role_that_may_only_read_reads_and_is_refused_writes_in_one_line(postgres_cluster, postgres_url, tmp_path, shared_cache):
    """A lab's viewers get SELECT only (docs/postgresql.md): reading commands work, also when a
    dead run is waiting to be reaped (housekeeping is left to a writer), and writes are one-line errors."""
    rid = dead_running_run(postgres_url)
    database = postgres_url.rsplit("/", 1)[1]
    postgres_cluster.sql(database, "CREATE ROLE viewer_%s LOGIN PASSWORD 'vpw'" % database)
    postgres_cluster.sql(database, "GRANT SELECT ON ALL TABLES IN SCHEMA public TO viewer_%s" % database)
    viewer_url = postgres_url.replace("://perflab@", f"://viewer_{database}:vpw@")
    try:
        viewer = CLI(viewer_url, tmp_path, shared_cache)
        assert re.search(rf"^\s*{rid}\s.*running", viewer("runs").stdout, re.M)
        proc = viewer("annotate", str(rid), "note", check=False)
        assert_one_line_error(proc, "permission denied for table run", f"viewer_{database}:***@")
        with pytest.raises(PerflabError, match="permission denied"):
            new_run(open_store(viewer_url))
        # The owner's next command reaps it.
        owner = open_store(postgres_url)
        assert owner.reap_dead_runs() == 1 and owner.get_run(rid).status == "interrupted"
        owner.engine.dispose()
    finally:
        postgres_cluster.sql(database, f"DROP OWNED BY viewer_{database}")
        postgres_cluster.sql("postgres", f"DROP ROLE viewer_{database}")


def test_one_store_object_outlives_a_server_restart(postgres_cluster, postgres_url):
    """What a long-lived process (a worker) needs: while the server is down each call is a
    one-line error; once it is back, the same Store works again (the pool's dead
    connections are noticed by pre-ping, not handed out)."""
    store = open_store(postgres_url)
    rid = new_run(store)
    store.add_samples(rid, 0, [Sample("a.b", 1.0, "s", -1)])
    postgres_cluster.stop()
    try:
        with pytest.raises(PerflabError, match=r"^database postgresql://perflab@\S+: .*(refused|closed|terminat)"):
            store.add_samples(rid, 1, [Sample("a.b", 2.0, "s", -1)])
        with pytest.raises(PerflabError):
            store.get_run(rid)
    finally:
        postgres_cluster.start()
    store.add_samples(rid, 1, [Sample("a.b", 3.0, "s", -1)])
    store.finish_run(rid, "finished")
    assert [r.value for r in store.samples([rid])] == [1.0, 3.0]
    assert store.get_run(rid).status == "finished"


def test_a_read_only_server_still_serves_reading(postgres_cluster, postgres_url):
    """A hot standby (every transaction read-only): reading works, the housekeeping write is left out."""
    rid = dead_running_run(postgres_url)
    database = postgres_url.rsplit("/", 1)[1]
    postgres_cluster.sql("postgres", f'ALTER DATABASE "{database}" SET default_transaction_read_only = on')
    standby = open_store(postgres_url)
    assert standby.reap_dead_runs() == 0
    assert [(r.id, r.status) for r in standby.find_runs()] == [(rid, "running")]
    with pytest.raises(PerflabError, match="read-only transaction"):
        standby.annotate(rid, "x")
    standby.engine.dispose()


def test_the_worker_grants_of_the_docs_are_enough_to_record(postgres_cluster, postgres_url):
    """docs/postgresql.md's worker role: record, import, reap and discard, without owning the tables."""
    open_store(postgres_url).engine.dispose()  # the owner makes the schema
    database = postgres_url.rsplit("/", 1)[1]
    role = f"worker_{database}"
    for statement in (f"CREATE ROLE {role} LOGIN PASSWORD 'wpw'",
                      f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}",
                      f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {role}"):
        postgres_cluster.sql(database, statement)
    try:
        store = open_store(postgres_url.replace("://perflab@", f"://{role}:wpw@"))
        rid = new_run(store)
        store.add_samples(rid, 0, [Sample("a.b", 1.0, "s", -1)])
        store.add_failure(rid, "item", "failed")
        store.add_monitor_series(rid, "vmstat", 0, [(None, 0.5, {"us": 1.0})])
        store.finish_run(rid, "partial")
        assert store.import_runs(checked_runs(fixtures_compare.export_document())) == (4, 0)
        mark_dead(store, new_run(store))
        assert store.reap_dead_runs() == 1
        store.delete_run(new_run(store))
        assert len(store.find_runs()) == 6
        store.engine.dispose()
    finally:
        postgres_cluster.sql(database, f"DROP OWNED BY {role}")
        postgres_cluster.sql("postgres", f"DROP ROLE {role}")

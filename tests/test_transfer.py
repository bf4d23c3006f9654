"""Export and import round-trip runs without loss."""

import json

import pytest

from conftest import CLI, assert_one_line_error

RUN_COLUMNS = "r.uuid, b.name, r.benchmark, r.name, r.params, r.tag, r.\"commit\", r.dirty, r.started, r.finished, r.status, r.comment, r.error"


def snapshot(cli):
    runs = cli.sql(f"SELECT {RUN_COLUMNS}, e.facts FROM run r JOIN testbox b ON b.id=r.testbox_id JOIN environment e ON e.id=r.environment_id ORDER BY r.uuid")
    runs = [tuple(json.loads(v) if i in (4, 13) else v for i, v in enumerate(r)) for r in runs]
    samples = cli.sql("SELECT r.uuid, s.metric, s.value, s.unit, s.direction, s.repetition FROM sample s JOIN run r ON r.id=s.run_id ORDER BY r.uuid, s.metric, s.repetition")
    failures = cli.sql("SELECT r.uuid, f.item, f.message FROM failure f JOIN run r ON r.id=f.run_id ORDER BY 1, 2")
    return runs, samples, failures


def populate(cli):
    cli("run", "cmd", "--runs", "3", "--tag", "a", "--metric", r"v=(\d+\.\d+)", "--", "echo", "0.1234567890123")
    cli("run", "cmd", "--runs", "2", "--tag", "b", "--box", "other", "--comment", "with, comma \"quotes\"", "--", "sleep", "0.001")
    cli("run", "cmd", "--runs", "2", "--", "false", check=False)
    cli("annotate", "1", "héllo ünïcode")


@pytest.fixture(scope="module")
def populated(tmp_path_factory, shared_cache):
    """One store with populate's runs for the tests that only read it (export) and write into stores
    of their own: made once per module instead of once per test (four `perflab` processes each).
    No test may change it: checked after the last one."""
    tmp = tmp_path_factory.mktemp("transfer-source")
    source = CLI(tmp / "perflab.db", tmp, shared_cache)
    populate(source)
    before = snapshot(source)
    yield source
    assert snapshot(source) == before, "a test changed the shared store"


def test_json_round_trip(populated, tmp_path):
    cli = populated
    cli("export", "-o", tmp_path / "all.json")
    second = CLI(tmp_path / "second.db", tmp_path)
    assert "imported 3 runs" in second("import", tmp_path / "all.json").stdout
    assert snapshot(second) == snapshot(cli)
    # Importing again adds nothing.
    assert "skipped 3" in second("import", tmp_path / "all.json").stdout
    assert snapshot(second) == snapshot(cli)


def test_csv_round_trip(populated, tmp_path):
    cli = populated
    (tmp_path / "all.csv").write_text(cli("export", "--format", "csv").stdout)
    second = CLI(tmp_path / "second.db", tmp_path)
    second("import", tmp_path / "all.csv")
    assert snapshot(second) == snapshot(cli)


def test_export_filters(populated):
    cli = populated
    doc = json.loads(cli("export", "--tag", "b").stdout)
    assert [r["tag"] for r in doc["runs"]] == ["b"]
    assert doc["runs"][0]["environment"]["testbox"] == "other"
    assert len(doc["runs"][0]["samples"]) == 2 * 5


def test_bad_import_files_write_nothing(populated, tmp_path):
    cli = populated
    doc = json.loads(cli("export").stdout)
    second = CLI(tmp_path / "second.db", tmp_path)
    second("log")  # create the empty store
    cases = {
        "broken.json": '{"format": "perflab-export",\n "runs": [',
        "other.json": '{"benchmarks": []}',
        "missing.json": json.dumps({**doc, "runs": doc["runs"][:1] + [{k: v for k, v in doc["runs"][1].items() if k != "started"}]}),
        "badvalue.json": json.dumps({**doc, "runs": [{**doc["runs"][0], "samples": [["m", "fast", "s", -1, 0]]}]}),
        "garbage.txt": "hello",
        "dirty.json": json.dumps({**doc, "runs": [{**doc["runs"][0], "dirty": "yes"}]}),
    }
    needles = {"broken.json": "broken.json:2", "other.json": "not a perflab export", "missing.json": "'started'",
               "badvalue.json": "'fast'", "garbage.txt": "garbage.txt",
               "dirty.json": "run 0: dirty 'yes' is not true, false or null"}
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        assert_one_line_error(second("import", tmp_path / name, check=False), needles[name])
    assert second.sql("SELECT count(*) FROM run") == [(0,)]
    csv_text = cli("export", "--format", "csv").stdout.splitlines()
    csv_text[3] = csv_text[3][:-3]
    (tmp_path / "bad.csv").write_text("\n".join(csv_text))
    assert_one_line_error(second("import", tmp_path / "bad.csv", check=False), "bad.csv:4")
    assert second.sql("SELECT count(*) FROM run") == [(0,)]


def test_the_atomic_job_and_each_samples_process_travel_with_an_export(cli, tmp_path):
    """Version 2 exports carry run.job and sample.process (JSON and CSV); version 1 files still import."""
    cli("run", "cmd", "--runs", "2", "--prepare", "true", "--tag", "j", "--", "true")
    job = cli.sql("SELECT job FROM run")[0][0]
    doc = json.loads(cli("export").stdout)
    assert doc["version"] == 3 and doc["runs"][0]["job"] == json.loads(job)
    assert {tuple(smp[4:]) for smp in doc["runs"][0]["samples"]} == {(0, 1), (1, 1)}
    for fmt in ("json", "csv"):
        other = CLI(tmp_path / f"{fmt}.db", tmp_path)
        path = tmp_path / f"export.{fmt}"
        path.write_text(cli("export", "--format", fmt).stdout)
        other("import", path)
        assert other.sql("SELECT job FROM run") == [(job,)]
        assert other.sql("SELECT DISTINCT repetition, process FROM sample ORDER BY 1") == [(0, 1), (1, 1)]
    v1 = {**doc, "version": 1, "runs": [{**{k: v for k, v in doc["runs"][0].items() if k != "job"},
                                         "uuid": "00000000-0000-4000-8000-000000000001",
                                         "samples": [smp[:5] for smp in doc["runs"][0]["samples"]]}]}
    (tmp_path / "v1.json").write_text(json.dumps(v1))
    old = CLI(tmp_path / "v1.db", tmp_path)
    old("import", tmp_path / "v1.json")
    assert old.sql("SELECT job FROM run") == [(None,)]
    assert old.sql("SELECT count(*) FROM sample WHERE process IS NULL")[0][0] == 10


def test_monitors_and_their_series_travel_with_a_json_export(cli, tmp_path):
    """Version 3: run.monitors and monitor_series move with the run (a lab worker's spool uses this)."""
    cli("run", "cmd", "--runs", "2", "--monitor", "proc-stat:interval=0.05", "--", "/bin/sleep", "0.2")
    (monitors,), = cli.sql("SELECT monitors FROM run")
    series = cli.sql('SELECT monitor, repetition, process, t, "values" FROM monitor_series ORDER BY id')
    assert len(series) >= 4
    path = tmp_path / "export.json"
    path.write_text(cli("export").stdout)
    other = CLI(tmp_path / "other.db", tmp_path)
    other("import", path)
    assert other.sql("SELECT monitors FROM run") == [(monitors,)]
    copied = other.sql('SELECT monitor, repetition, process, t, "values" FROM monitor_series ORDER BY id')
    assert [(m, r, p, t, json.loads(v)) for m, r, p, t, v in copied] == \
        [(m, r, p, t, json.loads(v)) for m, r, p, t, v in series]
    # A bad series row is refused whole, naming the run and the row.
    doc = json.loads(path.read_text())
    doc["runs"][0]["uuid"] = "00000000-0000-4000-8000-000000000009"
    doc["runs"][0]["monitor_series"][1][3] = "soon"
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    assert_one_line_error(other("import", tmp_path / "bad.json", check=False), "run 0", "monitor_series 1")
    assert other.sql("SELECT count(*) FROM run") == [(1,)]

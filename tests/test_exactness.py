"""Exactness is a property of a sample and a metric (perflab.core.model.Sample.exact), decoded
from what the store keeps in one place (perflab.store.exactness): the store's rows, a bisection
record written before records said it, and imported files all come through that decoder."""

from __future__ import annotations

import json

from perflab import benchmarks
from perflab.automate import bisect
from perflab.benchmarks import measured
from perflab.benchmarks.base import Metric
from perflab.core.model import LOWER_IS_BETTER, Sample
from perflab.exchange.importers import import_files
from perflab.store import open_store
from perflab.store.exactness import exact_as_stored


def test_sample_and_metric_carry_the_assumption_and_four_arguments_still_make_a_sample():
    plain = Sample("time.elapsed_time", 1.5, "s", LOWER_IS_BETTER)
    assert plain.exact is False and plain == Sample("time.elapsed_time", 1.5, "s", LOWER_IS_BETTER, False)
    counted = Metric("x.instructions", "instructions", LOWER_IS_BETTER, "a count", exact=True)
    assert counted.sample(1e6) == Sample("x.instructions", 1e6, "instructions", LOWER_IS_BETTER, True)
    assert Metric("x.time", "s", LOWER_IS_BETTER).sample(2.0).exact is False


def test_the_store_rows_say_whether_each_sample_is_exact(store_url):
    store = open_store(store_url)
    try:
        first = store.create_run(box="b", environment={"kernel_release": "6.1"}, benchmark="lmbench",
                                 name="lmbench", params={})
        store.add_samples(first, 0, [Sample("lmbench.null_call", 335.2, "ns (icount)", LOWER_IS_BETTER, True),
                                     Sample("lmbench.wall", 1.25, "s", LOWER_IS_BETTER)])
        second = store.create_run(box="b", environment={"kernel_release": "6.1"}, benchmark="cmd",
                                  name="cmd", params={})
        store.add_samples(second, 0, [Sample("valgrind.instructions", 1e6, "instructions", LOWER_IS_BETTER, True),
                                      Sample("perf-stat.instructions", 2e6, "", LOWER_IS_BETTER)], process=1)
        rows = store.samples([second, first, second])      # any order, repeated: runs ascending, once
        assert [(r.run_id, r.metric, r.exact) for r in rows] == [
            (first, "lmbench.null_call", True), (first, "lmbench.wall", False),
            (second, "perf-stat.instructions", False), (second, "valgrind.instructions", True)]
        # the seven stored columns, as rows always were: the schema and exports stay as they are
        assert tuple(rows[0]) == (first, "lmbench.null_call", 335.2, "ns (icount)", -1, 0, None)
        assert tuple(rows[-1]) == (second, "valgrind.instructions", 1e6, "instructions", -1, 0, 1)
        assert all(type(r.value) is float and type(r.direction) is int for r in rows)
        assert store.samples([]) == [] and store.samples([2**70]) == []
    finally:
        store.engine.dispose()


def test_a_sample_made_exact_in_a_unit_of_its_own_is_read_back_exact(tmp_path):
    """The flag survives the store for a figure the stored rules would not read as exact: its
    unit is marked once, where it is written; the same unit of a statistical figure stays as it is."""
    store = open_store(str(tmp_path / "p.db"))
    try:
        run = store.create_run(box="b", environment={}, benchmark="cmd", name="cmd", params={})
        store.add_samples(run, 0, [Sample("sim.ticks", 42.0, "ticks", LOWER_IS_BETTER, True),
                                   Sample("sim.wall", 1.5, "ticks", LOWER_IS_BETTER),
                                   Sample("sim.bare", 7.0, "", LOWER_IS_BETTER, True)])
        rows = {r.metric: r for r in store.samples([run])}
        assert (rows["sim.ticks"].unit, rows["sim.ticks"].exact) == ("ticks (exact)", True)
        assert (rows["sim.wall"].unit, rows["sim.wall"].exact) == ("ticks", False)
        assert (rows["sim.bare"].unit, rows["sim.bare"].exact) == ("(exact)", True)
    finally:
        store.engine.dispose()


def _record(tmp_path, metric: str, unit: str, **kw) -> bisect.Record:
    return bisect.Record(id="cafe0001", repo=str(tmp_path), good="a" * 40, bad="b" * 40, build="",
                         job=bisect.command_job(["./prog"]), metric=metric, tag="bisect-cafe0001", unit=unit,
                         path=str(tmp_path / "cafe0001.json"), **kw)


def test_a_bisection_record_without_exact_decodes_it_once_and_then_keeps_it(tmp_path):
    path = tmp_path / "cafe0001.json"
    for metric, unit, exact in (("will-it-scale.getppid1.per_process_ops", "ops/s (icount)", True),
                                ("valgrind.instructions", "instructions", True),
                                ("time.elapsed_time", "s", False)):
        _record(tmp_path, metric, unit).save()
        data = json.loads(path.read_text())
        del data["exact"]                      # as a record of an earlier version was written
        path.write_text(json.dumps(data))
        old = bisect.Record.load(path)
        assert old.exact is exact, (metric, unit)
        old.save()
        assert json.loads(path.read_text())["exact"] is exact
        assert bisect.Record.load(path).exact is exact
    # a record that says it is not read from its unit: an icount bisection records exact=True with the
    # catalog's own unit, and what a record says stays said
    assert _record(tmp_path, "will-it-scale.getppid1.per_process_ops", "ops/s", exact=True).exact is True
    assert _record(tmp_path, "x.count", "instructions", exact=False).exact is False


GO_OUTPUT = """goos: linux
goarch: amd64
pkg: example.com/parse
BenchmarkParse   \t    1000\t      1234 ns/op\t    567890 instructions/op
BenchmarkParse   \t    1000\t      1241 ns/op\t    567890 instructions/op
PASS
"""


def _export(unit: str) -> dict:
    return {"uuid": "8d4b3f0e-7c1a-4e55-9a0b-000000000001", "testbox": "kbox", "benchmark": "lmbench",
            "name": "lmbench", "params": {"vm": "icount"}, "tag": "k47", "commit": None, "dirty": False,
            "started": "2026-11-01T10:00:00", "finished": "2026-11-01T10:00:00", "status": "finished",
            "comment": None, "error": None, "environment": {"testbox": "kbox"}, "failures": [],
            "samples": [["lmbench.null_call", 335.2, unit, -1, 0], ["lmbench.wall", 1.0, "s", -1, 0]]}


def test_imported_samples_are_exact_as_their_format_says(tmp_path):
    go = tmp_path / "bench.txt"
    go.write_text(GO_OUTPUT)
    export = tmp_path / "runs.json"
    export.write_text(json.dumps({"format": "perflab-export", "version": 1, "runs": [_export("ns (icount)")]}))
    store = open_store(str(tmp_path / "perflab.db"))
    try:
        import_files(store, [str(go), str(export)])
        by_metric = {r.metric: r.exact for r in store.samples([run.id for run in store.find_runs()])}
    finally:
        store.engine.dispose()
    assert by_metric == {"gotest.ns/op": False, "gotest.instructions/op": True,
                         "lmbench.null_call": True, "lmbench.wall": False}


def test_a_metric_declared_exact_is_read_back_exact():
    """The store keeps no column for exactness: a catalog's exact metric must be one the decoder
    reads as exact from its name and unit, or its stored samples would lose it. The families'
    catalogs agree with the decoder both ways."""
    catalogs = [dict(benchmarks.family(name).catalog) for name in benchmarks.FAMILIES]
    for catalog in catalogs:
        for m in catalog.values():
            assert m.exact == exact_as_stored(m.name, m.unit), m
    for m in measured.metrics("cache").values():     # valgrind's counts: all of them exact
        assert exact_as_stored(m.name, m.unit), m


def test_an_exact_figure_whose_samples_disagree_is_compared_statistically_and_says_so():
    """icount getppid1 right after a 6.12 boot read 2,506,481 and 3,036,927 ops/s (issue 33): exact by
    construction, but its samples spread by 19%: never passed off as exact, and the caveat says why."""
    from perflab.stats.compare import EXACT_TEST, NOT_EXACT, compare_many

    settled = ([3046414.0, 3046420.0], [3036920.0, 3036931.0], 1)
    unsettled = ([3046414.0, 3046420.0], [2506481.0, 3036927.0], 1)
    clean, noisy = compare_many([settled, unsettled], assume_exact=[True, True], exact_threshold=0.001)
    assert clean.test == EXACT_TEST and not any(getattr(w, "kind", "") == NOT_EXACT for w in clean.warnings)
    assert noisy.test != EXACT_TEST
    (caveat,) = [w for w in noisy.warnings if getattr(w, "kind", "") == NOT_EXACT]
    assert "spread by 19%" in caveat and "compared statistically" in caveat

"""perflab.analysis.series.build: the points of each series read from a real store, against a
straightforward computation from the same samples (every sample kept, each run's mean an
exact sum of its finite samples, one point per run in start order)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from perflab.analysis import series
from perflab.core.model import HIGHER_IS_BETTER, LOWER_IS_BETTER, Sample
from perflab.store import open_store


def _run(store, metrics: dict, box: str = "box", params: dict | None = None) -> int:
    run = store.create_run(box=box, environment={"testbox": box}, benchmark="bench", name="bench",
                           params=params or {"mode": "process"})
    for name, (unit, direction, values) in metrics.items():
        store.add_samples(run, 0, [Sample(name, float(v), unit, direction) for v in values])
    store.finish_run(run, "finished")
    return run


def test_build_matches_the_samples(tmp_path):
    store = open_store(str(tmp_path / "s.db"))
    rng = np.random.default_rng(5)
    expected: dict[tuple, list[tuple[int, list[float]]]] = {}
    for i in range(25):
        for box, params in (("a", {"mode": "process"}), ("b", {"mode": "thread"})):
            time_values = list(1 + 0.01 * rng.standard_normal(int(rng.integers(1, 5))))
            ops_values = list(500 + rng.standard_normal(3))
            if i == 3:
                time_values.append(math.inf)            # dropped from the point, the rest kept
            if i == 4:
                ops_values = [math.inf, -math.inf]      # no finite sample: no point for this run
            rid = _run(store, {"bench.time": ("s", LOWER_IS_BETTER, time_values),
                               "bench.ops": ("ops/s", HIGHER_IS_BETTER, ops_values),
                               "vmstat.cpu.sy": ("%", LOWER_IS_BETTER, [3.0])},   # a monitor's
                       box=box, params=params)
            for metric, values in (("bench.time", time_values), ("bench.ops", ops_values)):
                finite = [float(v) for v in values if math.isfinite(v)]
                if finite:
                    expected.setdefault((box, metric), []).append((rid, finite))

    history = series.build(store)
    assert history.order == series.BY_TIME and history.runs == 50
    got = {(s.box, s.metric): s for s in history.series}
    assert set(got) == set(expected)        # the monitor's metric only when asked for by name
    for key, runs in expected.items():
        s = got[key]
        assert s.unit == ("s" if key[1] == "bench.time" else "ops/s")
        assert s.direction == (LOWER_IS_BETTER if key[1] == "bench.time" else HIGHER_IS_BETTER)
        assert [p.run_ids for p in s.points] == [[rid] for rid, _ in runs]
        assert [p.samples for p in s.points] == [values for _, values in runs]
        assert [p.run_means for p in s.points] == [[math.fsum(values) / len(values)] for _, values in runs]
        # One figure per run (stats.descriptive.estimator): a rate's point is the harmonic mean of
        # its samples, a time's the mean
        if key[1] == "bench.ops":
            assert s.values.tolist() == pytest.approx([len(values) / math.fsum(1 / v for v in values) for _, values in runs], rel=1e-12)
        else:
            assert s.values.tolist() == [math.fsum(values) / len(values) for _, values in runs]
        assert all(p.started is not None and p.commit is None for p in s.points)
    assert len(got[("a", "bench.ops")].points) == 24     # run 4 had no finite sample

    # samples whose exact sum passes the largest double still have a mean
    huge = _run(store, {"bench.huge": ("B", HIGHER_IS_BETTER, [1.5e308, 1.5e308, math.inf])})
    (s,) = series.build(store, metrics=("bench.huge",)).series
    assert s.points[0].run_ids == [huge] and s.points[0].samples == [1.5e308, 1.5e308]
    assert s.points[0].value == 1.5e308

    monitors = series.build(store, metrics=("vmstat.*",))
    assert [(s.box, s.metric, len(s.points)) for s in monitors.series] == [("a", "vmstat.cpu.sy", 25),
                                                                                ("b", "vmstat.cpu.sy", 25)]
    only_a = series.build(store, box="a", metrics=("bench.t*",))
    assert [(s.box, s.metric) for s in only_a.series] == [("a", "bench.time")]
    assert series.build(store, box="nobody").series == []

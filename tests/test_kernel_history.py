"""History across kernels (issue 33): a series of guest runs on eight Debian kernels, run in a
shuffled order, is ordered by kernel version in `detect`, `log` and `report table`, and its two
exact steps (-0.61% at 6.1.0-50, -8.5% at 6.12.107) are both found and named by kernel."""

from __future__ import annotations

import json
import random

import pytest
from click.testing import CliRunner

from perflab.analysis import series
from perflab.core.model import HIGHER_IS_BETTER, Sample
from perflab.store import open_store

from fixtures_kernels import KERNELS, METRIC, SHUFFLED, environment


def _store(path):
    store = open_store(str(path))
    rng = random.Random(33)
    for i in SHUFFLED:
        release, upstream, figure = KERNELS[i]
        env = environment(release, upstream)
        run = store.create_run(box="vm1", environment=env, benchmark="will-it-scale", name="will-it-scale getppid1",
                               params={"test": "getppid1", "mode": "process", "nr_task": 1, "vm": "icount"})
        # Two repetitions: identical but for a timer tick now and then (a lower rate, never higher).
        for rep in range(2):
            value = figure * (1 - 2e-6) if rng.random() < 0.3 else figure
            store.add_samples(run, rep, [Sample(METRIC, value, "ops/s (icount)", HIGHER_IS_BETTER, exact=True)])
        store.finish_run(run, "finished")
    return store


@pytest.fixture
def kernel_db(tmp_path):
    path = tmp_path / "kernels.db"
    _store(path)
    return str(path)


def test_series_of_kernels_in_version_order(kernel_db):
    history = series.build(open_store(kernel_db))
    (s,) = history.series
    assert s.order == series.BY_KERNEL and history.order == series.BY_KERNEL
    assert [p.kernel for p in s.points] == [k[0] for k in KERNELS]
    # The exact figure is the undisturbed sample, not the mean.
    assert [p.value for p in s.points] == [k[2] for k in KERNELS]


def test_detect_finds_both_steps_named_by_kernel(kernel_db):
    from perflab.cli.detect import detect_cmd

    out = CliRunner().invoke(detect_cmd, ["--db", kernel_db, "--style", "json"])
    assert out.exit_code == 0, out.output
    found = json.loads(out.output)["series"][0]
    steps = [(c["at"]["kernel"], c["previous"]["kernel"], round(c["change"] * 100, 2)) for c in found["change_points"]]
    assert steps == [("6.1.0-50-amd64", "6.1.0-47-amd64", -0.61), ("6.12.107+deb13-amd64", "6.1.0-56-amd64", -8.5)]
    assert found["exact"] is True and not found["spikes"]
    text = CliRunner().invoke(detect_cmd, ["--db", kernel_db]).output
    assert "ordered by kernel release" in text
    assert "at kernel 6.1.0-50-amd64" in text and "previous kernel 6.1.0-47-amd64" in text
    assert "at kernel 6.12.107+deb13-amd64" in text


def test_detect_order_by_time_on_request(kernel_db):
    from perflab.cli.detect import detect_cmd

    out = CliRunner().invoke(detect_cmd, ["--db", kernel_db, "--style", "json", "--order", "time"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["order"] == "time"
    bad = CliRunner().invoke(detect_cmd, ["--db", kernel_db, "--order", "commit"])
    assert bad.exit_code != 0 and "--repo" in str(bad.exception)


def test_log_lists_kernels_in_version_order(kernel_db):
    from perflab.cli.history import log_cmd

    out = CliRunner().invoke(log_cmd, ["--db", kernel_db])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert "kernel" in lines[0]
    assert "(s)" not in lines[1]          # it prints ops/s, not seconds
    shown = [next(k for k, _, _ in KERNELS if k in line) for line in lines[2:]]
    assert shown == [k[0] for k in KERNELS]


def test_report_table_rows_in_kernel_order_and_host_runs_kept(kernel_db):
    from perflab.cli.report import report_group

    store = open_store(kernel_db)
    host = store.create_run(box="vm1", environment={"testbox": "vm1", "kernel_release": "6.1.0-47-amd64"},
                            benchmark="will-it-scale", name="will-it-scale getppid1",
                            params={"test": "getppid1", "mode": "process", "nr_task": 1})
    store.add_samples(host, 0, [Sample(METRIC, 2000000.0, "ops/s", HIGHER_IS_BETTER)])
    store.finish_run(host, "finished")
    out = CliRunner().invoke(report_group, ["table", "--db", kernel_db, "--rows", "kernel", "--cols", "vm", METRIC])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    rows = [line.split()[0] for line in lines[3:] if line.strip()]
    assert rows == [k[0] for k in KERNELS]
    assert "host" in lines[1] and "icount" in lines[1]


def test_exact_steps_found_when_most_points_step():
    """Kernel after kernel may each move an exact figure: with the points' own samples measuring the
    resolution, every step above it is a change point, the small beside the large, none a spike."""
    from perflab.stats import exact_series

    values = [100.0, 100.6, 100.6, 101.2, 100.7, 92.1, 92.1, 92.5, 93.0]
    found = exact_series.detect(values, point_resolution=2e-6, assume_exact=True, min_size=3, min_effect=0.001)
    assert [c.index for c in found.change_points] == [1, 3, 4, 5, 7, 8] and not found.outliers


def test_exact_figure_is_the_undisturbed_sample():
    from perflab.stats.exact import exact_figure     # detect's point figure and compare's side figure

    assert exact_figure([5.0, 5.0, 5.2], -1) == 5.0            # the value most samples share
    assert exact_figure([5.3, 5.0, 5.2], -1) == 5.0            # a time: the smallest
    assert exact_figure([2506481.0, 3036927.0], HIGHER_IS_BETTER) == 3036927.0   # a rate: the largest


def test_metric_named_exactly_is_not_a_substring_match():
    from perflab.analysis.selection import metric_wanted

    names = ["lmbench.syscall.null", "lmbench.syscall.null_io", "lmbench.fork"]
    assert metric_wanted(names, ["lmbench.syscall.null"]) == {"lmbench.syscall.null"}
    assert metric_wanted(names, ["syscall"]) == {"lmbench.syscall.null", "lmbench.syscall.null_io"}
    assert metric_wanted(names, ["null_"]) == {"lmbench.syscall.null_io"}
    assert metric_wanted(names, ["nothing"]) == set()
    assert metric_wanted(names, ["syscall.null"]) == {"lmbench.syscall.null"}   # its name after the family


def test_icount_lmbench_with_timer_ticks_is_split_exactly(tmp_path):
    """LMbench's null call under icount: five tries per run, identical but for a timer tick in one
    of them; the step of +0.62% at 6.1.0-50 is found exactly (the minimum is the figure)."""
    from perflab.core.model import LOWER_IS_BETTER

    store = open_store(str(tmp_path / "lm.db"))
    figures = {"6.1.0-47-amd64": 0.323028, "6.1.0-50-amd64": 0.325029, "6.1.0-53-amd64": 0.325029,
               "6.1.0-54-amd64": 0.325029, "6.1.0-55-amd64": 0.325029}
    for release in ["6.1.0-54-amd64", "6.1.0-47-amd64", "6.1.0-55-amd64", "6.1.0-50-amd64", "6.1.0-53-amd64"]:
        run = store.create_run(box="vm1", environment={"testbox": "vm1", "kernel_release": release},
                               benchmark="lmbench", name="lmbench", params={"vm": "icount"})
        for rep in range(5):
            value = figures[release] * (1.004 if rep == 2 else 1.0)   # a tick in the third try
            store.add_samples(run, rep, [Sample("syscall.null", value, "us (icount)", LOWER_IS_BETTER, exact=True)])
        store.finish_run(run, "finished")
    history = series.build(store, metrics=("syscall.null",))
    (result,) = series.analyse(history, alpha=0.001, min_size=3, min_effect=0.01, exact_min_effect=0.001)
    d = result.detection
    assert d.exact and [(c.index, round(c.change * 100, 2)) for c in d.change_points] == [(1, 0.62)]
    assert history.series[0].points[1].kernel == "6.1.0-50-amd64"

"""`report html` across kernels (issue 33): a series of guest runs on eight kernels, run in a
shuffled order, is one trend in kernel version order, labelled by release, with its change
points; several kernels compared at once read side by side, one column per variant, with a
one-line headline and what a variant did not measure said once."""

from __future__ import annotations

import random

import pytest

from perflab.analysis.views.page import Filters, build_page, short_labels
from perflab.core.model import HIGHER_IS_BETTER, Sample
from perflab.report import html_doc
from perflab.store import open_store

from fixtures_kernels import KERNELS, METRIC, SHUFFLED, environment
# page_fault1 was run on two of the kernels only.
PAGE_FAULT_ON = {"6.1.0-47-amd64", "6.1.0-56-amd64"}


def _run(store, release, upstream, test, figure, rng):
    env = environment(release, upstream)
    run = store.create_run(box="vm1", environment=env, benchmark="will-it-scale", name=f"will-it-scale {test}",
                           params={"test": test, "mode": "process", "nr_task": 1, "vm": "icount"},
                           tag=f"wis-{release}")
    for rep in range(3):
        # Identical but for a timer tick now and then in the first (a lower rate, never higher).
        value = figure * (1 - 2e-6) if rep == 0 and rng.random() < 0.5 else figure
        store.add_samples(run, rep, [Sample(METRIC, value, "ops/s (icount)", HIGHER_IS_BETTER, exact=True)])
    store.finish_run(run, "finished")


@pytest.fixture(scope="module")
def kernel_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("kernels") / "kernels.db"
    store = open_store(str(path))
    rng = random.Random(33)
    for i in SHUFFLED:
        release, upstream, figure = KERNELS[i]
        _run(store, release, upstream, "getppid1", figure, rng)
        if release in PAGE_FAULT_ON:
            _run(store, release, upstream, "page_fault1", 400000.0, rng)
    return str(path)


def test_trend_is_one_line_over_the_kernels_in_version_order(kernel_db):
    page = build_page(open_store(kernel_db), Filters())
    doc = html_doc.document(page)
    getppid = [t for t in doc["trends"] if "getppid1" in t["params"]]
    assert len(getppid) == 1, [t["name"] for t in doc["trends"]]
    (trend,) = getppid
    assert trend["order"] == "kernel"
    assert trend["labels"] == [k[0] for k in KERNELS]
    assert trend["y"] == [k[2] for k in KERNELS]    # the exact figure, the undisturbed sample
    steps = [(trend["labels"][c["index"]], round(c["change"] * 100, 2), c["kind"]) for c in trend["changes"]]
    assert steps == [("6.1.0-50-amd64", -0.61, "regression"), ("6.12.107+deb13-amd64", -8.5, "regression")]
    # page_fault1, on two kernels: one line of two points, in kernel order too
    (faults,) = [t for t in doc["trends"] if "page_fault1" in t["params"]]
    assert faults["labels"] == ["6.1.0-47-amd64", "6.1.0-56-amd64"]


def test_page_headline_counts_the_kernel_change_points(kernel_db, tmp_path):
    from perflab.report.html import report

    page = build_page(open_store(kernel_db), Filters())
    assert sum(len(r.detection.change_points) for r in page.trends.results) == 2
    out = tmp_path / "k.html"
    report(page, out)
    text = out.read_text()
    assert "kernel release (version order)" in text   # the x axis's title, in the script


def test_six_kernels_side_by_side(kernel_db):
    operands = tuple(f"wis-{KERNELS[i][0]}" for i in (0, 1, 2, 5, 6, 7))
    page = build_page(open_store(kernel_db), Filters(operands=operands))
    cmp = html_doc.document(page)["comparison"]
    grid = cmp["grid"]
    assert grid["columns"] == ["6.1.0-47", "6.1.0-50", "6.1.0-53", "6.1.0-56", "6.12.107+deb13", "6.12.117+deb13"]
    assert len(grid["rows"]) == 2          # one row per metric (getppid1, page_fault1), not per head
    by_test = {r["testcase"]: r for r in grid["rows"]}
    getppid = next(r for name, r in by_test.items() if "getppid1" in name)
    assert all(len(r["cells"]) == 5 for r in grid["rows"])
    # The verdicts are the comparison's, cell by cell.
    result = page.comparison.result
    row = next(r for r in result.own_rows if r.params["test"] == "getppid1")
    assert [c["verdict"] for c in getppid["cells"]] == [h.verdict for h in row.heads]
    assert [c["verdict"] for c in getppid["cells"]] == ["regression"] * 5
    # What a variant did not measure: once per variant, not a row per metric.
    faults = next(r for name, r in by_test.items() if "page_fault1" in name)
    assert [c is None for c in faults["cells"]] == [True, True, False, True, True]
    assert len(grid["absent"]) == 4
    assert grid["absent"][0].startswith("6.1.0-50: no ") and grid["absent"][0].endswith("page_fault1 runs")
    # One line, saying what changed where.
    headline = cmp["headline"]
    assert "\n" not in headline and len(headline.split()) < 25, headline
    assert headline.startswith("against 6.1.0-47 (2 metrics): 1 regression at 6.1.0-50, 6.1.0-53")


def test_one_head_keeps_the_headline_and_has_no_grid(kernel_db):
    page = build_page(open_store(kernel_db), Filters(operands=("wis-6.1.0-47-amd64", "wis-6.1.0-50-amd64")))
    cmp = html_doc.document(page)["comparison"]
    assert "grid" not in cmp
    assert cmp["headline"].startswith("1 regression, 0 improvements among 1 metric")


@pytest.mark.parametrize("labels, short", [
    (["wis-6.1.0-47-amd64", "wis-6.12.107+deb12-amd64"], ["6.1.0-47", "6.12.107+deb12"]),
    (["base", "head"], ["base", "head"]),
    (["run-1", "run-1"], ["run-1", "run-1"]),          # nothing tells them apart: as given
    (["a-x", "a-x-y"], ["x", "x-y"]),
])
def test_short_labels(labels, short):
    assert short_labels(labels) == short

"""One verdict per change (issue 33): one store rendered by compare (every layout), the 0-day
mail, the HTML comparison and check calls each change alike.

The store holds an exact metric moved by -0.6% (icount instruction-time: called by the exact
rule, 3 resolutions and the exact 0.1% minimum effect, below the t-test's 1%), a statistical
metric moved by a clear +20%, and one that did not move.
"""

from __future__ import annotations

import csv
import io
import json

import pytest

from perflab.analysis import gate, regression
from perflab.analysis.comparison import compare
from perflab.analysis.views.comparison import comparison_view
from perflab.analysis.views.page import Filters, build_page
from perflab.core.model import HIGHER_IS_BETTER, LOWER_IS_BETTER, Sample
from perflab.report import html_doc
from perflab.report.registry import LAYOUTS
from perflab.store import open_store

EXACT, CLEAR, STILL = "syscall.null_exact", "syscall.read_slow", "syscall.write_same"
JOB = {"benchmark": "cmd", "params": {"command": "true"}, "runs": 5}


def _side(store, tag: str, factor_exact: float, factor_clear: float) -> None:
    run = store.create_run(box="box1", environment={"testbox": "box1", "kernel_release": "6.1.0"}, benchmark="cmd",
                           name="cmd true", params={"command": "true"}, tag=tag, job=JOB)
    for rep in range(5):
        jitter = 1 + 0.004 * (rep - 2)
        store.add_samples(run, rep, [
            Sample(EXACT, 0.323028 * factor_exact, "us (icount)", LOWER_IS_BETTER, exact=True),
            Sample(CLEAR, 10.0 * factor_clear * jitter, "us", LOWER_IS_BETTER),
            Sample(STILL, 5.0 * (1 + 0.004 * ((rep * 3) % 5 - 2)), "us", LOWER_IS_BETTER),
        ])
    store.finish_run(run, "finished")


@pytest.fixture()
def store(tmp_path):
    s = open_store(str(tmp_path / "perflab.db"))
    _side(s, "base", 1.0, 1.0)
    _side(s, "head", 0.994, 1.2)
    return s


CALLS = {EXACT: "improvement", CLEAR: "regression", STILL: "no change"}
WORDS = ("regression", "improvement", "no change")


def _calls(layout: str, text: str) -> dict[str, str]:
    """Each metric's call as the layout prints it (its own habit of saying it)."""
    calls = {}
    if layout == "json":
        return {r["metric"]: r["verdict"] for r in json.loads(text)["metrics"]}
    if layout == "csv":
        return {r["metric"]: r["verdict"] for r in csv.DictReader(io.StringIO(text))}
    section = None
    for line in text.splitlines():
        words = line.split()
        if layout == "lkp":
            if line.strip().startswith("-- "):
                section = {"regressions": "regression", "improvements": "improvement"}.get(words[1], "no change")
            elif words and words[-1] in CALLS or len(words) > 1 and words[-2] in CALLS:
                calls[words[-1] if words[-1] in CALLS else words[-2]] = section
        elif layout == "mmtests" and words[:1] in (["Amean"], ["Exact"]):    # the figure's line, named by its estimator
            calls[words[1]] = ("improvement" if "(   0.60%)" in line else "regression") if line.endswith("*") else "no change"
        elif layout == "kernbench" and "[" in line and words[0] in CALLS and "%" in line:
            calls[words[0]] = next(w for w in WORDS if f"% {w}" in line)
        elif layout == "benchstat" and words and words[0] in CALLS:
            calls[words[0]] = "no change" if " ~ " in line else CALLS[words[0]] if "%" in words[-3] + line else "?"
    return calls


def test_compare_mail_html_and_check_call_each_change_alike(store):
    result = compare(store, ["base", "head"])
    verdicts = {r.metric: r.heads[0].verdict for r in result.rows}
    assert verdicts == CALLS

    view = comparison_view(result, [n for layout in LAYOUTS for n in layout.needs])
    for layout in LAYOUTS:
        text = layout.render(view)
        if layout.name == "lmbench":
            continue   # LMbench's figures alone: these metrics are none of its figures
        assert _calls(layout.name, text) == CALLS, layout.name

    mail = regression.build(store, "base", "head", mail={})
    mail = regression.build(store, "base", "head", mail={})
    assert mail.kind == "regression" and [r.metric for r in mail.regressions] == [CLEAR]
    mail_verdicts = {r.metric: r.heads[0].verdict for r in mail.comparison.rows}
    assert mail_verdicts == CALLS

    page = build_page(store, Filters(operands=("base", "head")))
    doc = html_doc.comparison(page.comparison)
    assert {r["metric"]: r["verdict"] for r in doc["rows"]} == CALLS
    assert doc["headline"].startswith("1 regression, 1 improvement")

    checked = gate.gate(compare(store, ["base", "head"]), 0.05)
    assert [r.metric for r in checked.regressions] == [CLEAR]


def test_lmbench_summary_under_icount_says_instruction_time_and_shows_a_001pct_step():
    from perflab.report.lmbench import render_summary

    text = render_summary([("6.1.0-47", {"syscall.null": 0.323028}),
                           ("6.1.0-50", {"syscall.null": 0.325029})], icount=True)
    assert "instruction-time (1 ns = 1 instruction)" in text and "times in microseconds" not in text
    assert "0.323028" in text and "0.325029" in text

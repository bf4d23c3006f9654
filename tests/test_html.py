"""`perflab report html` and the --plot pictures, checked in a real headless Chromium.

The store is built once per module through `perflab import` (a history of 12 runs with a
step, a tagged base and head, a will-it-scale sweep, an LMbench and a kernbench run, a
series of one point), with a tag and a comment that try to run script. Chromium is
started once per module; without it the browser tests fail and say to run tools/test.sh.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import CLI, PERFLAB, assert_one_line_error
from perflab.report.html import BUNDLE_ENV, CARTESIAN_BUNDLE, _package_bundle, bundle_banner, plotly_bundle
from services import until

EVIL_TAG = "<script>alert(1)</script><img src=x onerror=alert(2)>"
EVIL_COMMENT = "<!-- c --><script>alert(3)</script><img src=x onerror=alert(4)> </script> $x^2$"
EVIL_METRIC = "bench.<b>bold</b>_us"
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
ENV = {"testbox": "box1", "kernel_release": "6.8.0", "cc_version": "gcc 12.2.0", "arch": "x86_64",
       "cpu_model": "Test CPU <i>fast</i>"}


def _run(benchmark, params, tag, commit, started, samples, comment=None, kernel="6.8.0"):
    return {"uuid": str(uuid.uuid4()), "testbox": "box1", "benchmark": benchmark, "name": benchmark, "params": params,
            "tag": tag, "commit": commit, "dirty": False, "started": started, "finished": started, "status": "finished",
            "comment": comment, "error": None, "environment": {**ENV, "kernel_release": kernel}, "failures": [],
            "samples": samples}


def _document() -> dict:
    rnd = random.Random(7)
    runs = []
    # History: 12 runs, a 15% step after the 6th; run 5 has the hostile tag, run 8 the hostile comment.
    for i in range(12):
        level = 10.0 if i < 6 else 11.5
        samples = [["bench.latency_us", level + rnd.gauss(0, 0.03), "us", -1, k] for k in range(4)]
        samples += [["bench.ops_per_sec", 1000 + rnd.gauss(0, 3), "ops/s", 1, k] for k in range(4)]
        samples += [[EVIL_METRIC, 3 + rnd.gauss(0, 0.01), "us", -1, k] for k in range(4)]
        runs.append(_run("bench", {"mode": "process"}, EVIL_TAG if i == 5 else f"v{i}", f"{i + 1:02x}" * 20,
                         f"2026-11-{i + 2:02d}T10:00:00", samples, comment=EVIL_COMMENT if i == 8 else None,
                         kernel="6.8.0" if i < 6 else "6.9.0"))
    # A bimodal head: half the samples at the base level, half 30% slower.
    for tag, values in (("base", [5.0, 5.02, 4.98, 5.01, 4.99, 5.0]), ("head", [5.0, 6.5, 5.02, 6.52, 4.98, 6.48])):
        runs.append(_run("bimodal", {}, tag, "d55f34411b1b126429a823d06c3124c16283231f" if tag == "base" else
                         "0355322b3577eeab7669066df42c550a56801110", "2026-11-20T10:00:00",
                         [["bimodal.time_us", v, "us", -1, k] for k, v in enumerate(values)]
                         # a monitor that moved with the verdict (context switches doubled) and one that did not
                         + [["vmstat.cs.per_s", (1000 if tag == "base" else 2000) + 5 * k, "/s", 0, k] for k in range(6)]
                         + [["vmstat.cpu.sy", 5.0 + 0.01 * k, "%", 0, k] for k in range(6)],
                         kernel="6.8.0" if tag == "base" else "6.9.0"))
    for mode in ("process", "thread"):
        for tasks in (1, 2):
            runs.append(_run("will-it-scale", {"test": "page_fault1", "mode": mode, "nr_task": tasks}, "wis", "a" * 40,
                             "2026-11-21T10:00:00", [["will-it-scale.workload", 1e6 * tasks * (0.9 if tasks > 1 else 1)
                                                      + rnd.gauss(0, 1e3), "ops/s", 1, k] for k in range(3)]))
    runs.append(_run("lmbench", {}, "lm", "b" * 40, "2026-11-21T11:00:00",
                     [["syscall.null", 0.05, "us", -1, 0], ["syscall.stat", 0.4, "us", -1, 0]]))
    runs.append(_run("kernbench", {"load": "half", "jobs": 1}, "kb", "c" * 40, "2026-11-21T12:00:00",
                     [["kernbench.elapsed_time", 60 + k, "s", -1, k] for k in range(3)]))
    runs.append(_run("lonely", {}, "once", "e" * 40, "2026-11-22T10:00:00", [["lonely.time_s", 1.5, "s", -1, 0]]))
    return {"format": "perflab-export", "version": 1, "runs": runs}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    assert PERFLAB, "the perflab command is not installed in this environment"
    tmp = tmp_path_factory.mktemp("html")
    cli = CLI(tmp / "perflab.db", tmp, tmp / "cache")
    (tmp / "doc.json").write_text(json.dumps(_document()))
    cli("import", tmp / "doc.json")
    return cli


@pytest.fixture(scope="module")
def reports(store):
    """(comparison report of bimodal base/head, history report of everything)."""
    compared = store.tmp / "compare.html"
    store("report", "html", "base", "head", "-o", compared)
    everything = store.tmp / "all.html"
    store("report", "html", "-o", everything, "--title", "all <b>runs</b>")
    return compared, everything


def _banner(path: Path) -> str:
    return bundle_banner(path.read_text(encoding="utf-8")[:400])


CARRIED = _banner(plotly_bundle())   # the bundle `report html` inlines in this environment


def _data(path: Path) -> dict:
    text = path.read_text()
    m = re.search(r'<script type="application/json" id="perflab-data">(.*?)</script>', text, re.S)
    assert m, "the page embeds its data"
    return json.loads(m.group(1))


# -- the file ---------------------------------------------------------------------

def test_file_is_self_contained_and_escaped(reports):
    for path in reports:
        text = path.read_text()
        assert 1_000_000 < len(text) < 10_000_000          # plotly.js (1.5 or 4.8 MB) inlined, and little else
        # The page carries the bundle perflab finds, and says which (its banner, in the data and the footer).
        assert _data(path)["plotly"] == CARRIED and CARRIED in text[:text.index('id="perflab-data"')]
        # Nothing fetched: no external script, stylesheet, image or frame.
        assert not re.search(r'<(script|link|img|iframe)[^>]+(src|href)\s*=', text, re.I)
        # The hostile strings never appear as markup: only the JSON's \u003c escapes of them.
        for raw in ("<script>alert(", "<img src=x", "<!-- c -->", "<b>bold</b>", "<i>fast</i>"):
            assert raw not in text
        assert text.count("</script>") == 3                  # plotly, the data, the page's script
    data = _data(reports[1])
    tags = {r["tag"] for r in data["runs"].values()}
    comments = {r["comment"] for r in data["runs"].values()}
    assert EVIL_TAG in tags and EVIL_COMMENT in comments    # kept exactly, shown as text
    assert EVIL_METRIC in data["metrics"]
    assert "<title>all &lt;b&gt;runs&lt;/b&gt;</title>" in reports[1].read_text()


def test_cartesian_bundle_is_installed_and_carried(reports):
    """tools/install.sh installs plotly.js's cartesian bundle, the same release as the plotly package's."""
    if not CARTESIAN_BUNDLE.is_file():
        pytest.fail(f"{CARTESIAN_BUNDLE} is missing: run tools/install.sh (tools/fetch_plotly.py fetches it)")
    cartesian, full = _banner(CARTESIAN_BUNDLE), _banner(_package_bundle())
    assert cartesian.startswith("plotly.js (cartesian") and full.startswith("plotly.js v")
    assert cartesian.rsplit(" ", 1)[1] == full.rsplit(" ", 1)[1]       # the same version, v4.1.1 today
    if not os.environ.get(BUNDLE_ENV):
        assert CARRIED == cartesian
        assert len(reports[1].read_text()) < 3_000_000                  # not the 4.8 MB full bundle


@pytest.fixture(scope="module")
def full_bundle_report(store):
    """The comparison page with the plotly package's full bundle: what a pip install without install.sh draws."""
    out = store.tmp / "compare-full.html"
    store("report", "html", "base", "head", "-o", out, env={BUNDLE_ENV: str(_package_bundle())})
    return out


def test_bundle_override(store, full_bundle_report):
    assert _data(full_bundle_report)["plotly"] == _banner(_package_bundle())
    missing = store.tmp / "no-such-plotly.js"
    out = store.tmp / "never.html"
    proc = store("report", "html", "base", "head", "-o", out, env={BUNDLE_ENV: str(missing)}, check=False)
    assert_one_line_error(proc, BUNDLE_ENV, str(missing), "no such file")
    assert not out.exists()
    proc = store("report", "html", "base", "head", "-o", out, env={BUNDLE_ENV: str(store.tmp)}, check=False)
    assert_one_line_error(proc, BUNDLE_ENV, "is not a file")
    assert not out.exists()


def test_document_parts(reports):
    cmp = _data(reports[0])["comparison"]
    assert cmp["labels"] == ["base", "head"]
    (row,) = [r for r in cmp["rows"] if r["metric"] == "bimodal.time_us"]
    for key in ("pct_change", "ci_low", "ci_high", "p_value", "p_adjusted", "verdict", "detectable", "warnings",
                "base_stats", "head_stats", "family"):
        assert key in row
    assert 0 < row["pct_change"] < 0.3 and row["detectable"] > 0
    assert ["kernel_release", "6.8.0", "6.9.0"] in cmp["env_diff"][0]["diffs"]
    data = _data(reports[1])
    trends = {t["metric"]: t for t in data["trends"]}
    step = trends["bench.latency_us"]
    assert len(step["runs"]) == len(step["y"]) == 12
    assert [c["index"] for c in step["changes"]] == [6] and step["changes"][0]["kind"] == "regression"
    assert len(trends["lonely.time_s"]["runs"]) == 1
    (scaling,) = data["scaling"]
    assert {m["mode"] for m in scaling["modes"]} == {"process", "thread"}
    assert "syscall" in data["lmbench"].lower() or "null" in data["lmbench"].lower()
    assert "Half load -j 1" in data["kernbench"]
    assert data["sample_count"] == 12 * 12 + 12 + 24 + 12 + 2 + 3 + 1   # history, bimodal (+ monitors), ...
    assert sum(len(g) - 1 for groups in data["samples"].values() for g in groups) == data["sample_count"]


def test_empty_selection_writes_nothing(store):
    out = store.tmp / "none.html"
    proc = store("report", "html", "--benchmark", "nosuch", "-o", out, check=False)
    assert_one_line_error(proc, "no usable run matches", "--benchmark nosuch", "no file written")
    assert not out.exists()
    proc = store("report", "html", "--benchmark", "bench", "--metric", "nosuchmetric", "-o", out, check=False)
    assert_one_line_error(proc, "nosuchmetric", "no file written")
    assert not out.exists()
    proc = store("report", "html", "base", "nosuchtag", "-o", out, check=False)
    assert_one_line_error(proc, "nosuchtag")
    assert not out.exists()


def test_unwritable_output_is_one_line(store):
    for target, needle in ((store.tmp / "no" / "dir" / "r.html", "does not exist"), (store.tmp, "is a directory"),
                           ("/proc/perflab-report.html", "cannot write")):
        proc = store("report", "html", "-o", target, check=False)
        assert_one_line_error(proc, str(target), needle)


@pytest.mark.parametrize("ext", ["png", "svg"])
def test_log_plot(store, ext):
    out = store.tmp / f"log.{ext}"
    proc = store("log", "bench", "--plot", out)
    assert f"plot: {out}" in proc.stderr
    _check_picture(out, ext)


@pytest.mark.parametrize("ext", ["png", "svg"])
def test_compare_plot(store, ext):
    out = store.tmp / f"compare.{ext}"
    proc = store("compare", "base", "head", "--plot", out)
    assert "bimodal.time_us" in proc.stdout and f"plot: {out}" in proc.stderr
    _check_picture(out, ext)
    if ext == "svg":
        assert "bimodal.time_us" in out.read_text()         # the metric is labelled (text kept as text)


def test_detect_plot(store):
    out = store.tmp / "detect.svg"
    # --top draws series without a change point too (by default only those with one are drawn).
    proc = store("detect", "--benchmark", "bench", "--plot", out, "--top", "12")
    assert f"plot: {out}" in proc.stderr
    _check_picture(out, "svg")
    text = out.read_text()
    assert "regression +15" in text                          # the change point's label
    assert "bench.&lt;b&gt;bold&lt;/b&gt;_us" in text           # a hostile metric name stays text
    one = store.tmp / "one.png"
    proc = store("detect", "--benchmark", "lonely", "--plot", one)   # a single point is nothing to draw
    assert "not written" in proc.stderr and not one.exists()


def test_plot_bad_name_is_one_line(store):
    assert_one_line_error(store("log", "--plot", store.tmp / "log.txt", check=False), "log.txt", ".png or .svg")
    assert_one_line_error(store("log", "--plot", store.tmp / "nodir" / "log.png", check=False), "does not exist")
    for command in (["compare", "base", "head"], ["detect"], ["report", "scaling"]):
        proc = store(*command, "--plot", store.tmp / "x.pdf", check=False)
        assert_one_line_error(proc, "x.pdf", ".png or .svg")
        assert not (store.tmp / "x.pdf").exists()


def test_report_scaling_plot(store):
    out = store.tmp / "scaling.svg"
    store("report", "scaling", "--plot", out)
    _check_picture(out, "svg")


def _check_picture(path: Path, ext: str) -> None:
    data = path.read_bytes()
    if ext == "png":
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 5000
    else:
        root = ET.fromstring(data)
        assert root.tag.endswith("svg")
        assert len(root.findall(".//{http://www.w3.org/2000/svg}path")) > 5


# -- in the browser -----------------------------------------------------------------

# How long one chart may take to be drawn. Drawing takes milliseconds on a quiet machine; the limit
# is generous (the 2-core test machine runs two workers and other work) and applies per chart, not
# to a whole page, so a page of many charts under load does not fail for want of time.
DRAW_LIMIT = 180


@pytest.fixture(scope="module")
def browser():
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        pytest.fail(f"{CHROMIUM} or {CHROMEDRIVER} is missing: run tools/test.sh (it installs the Debian packages "
                    "chromium and chromium-driver)")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.fail("selenium is missing: run tools/test.sh (it installs perflab[test])")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)   # never a downloaded driver
    driver.set_page_load_timeout(DRAW_LIMIT)
    yield driver
    driver.quit()


def _artifacts(tmp_path) -> Path:
    where = Path(os.environ.get("PERFLAB_ARTIFACTS") or tmp_path)
    where.mkdir(parents=True, exist_ok=True)
    return where


def _open(driver, path: Path) -> None:
    driver.get(path.resolve().as_uri())
    driver.get_log("browser")  # the previous page's entries, if any, are not this page's


def _no_errors(driver) -> None:
    from selenium.common.exceptions import NoAlertPresentException

    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert                      # no script of a user's string ran
    severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert not severe, severe


def _wait_for(driver, script: str, what: str, *args) -> None:
    """Poll a script until it returns true; fail naming `what` after DRAW_LIMIT seconds."""
    until(what, lambda: driver.execute_script(script, *args), DRAW_LIMIT)


def _settle(driver) -> None:
    """Wait until the charts queued for drawing are drawn (Plotly finishes a drawing asynchronously)."""
    _wait_for(driver, "return !(window.perflabReport.queued() + "
                      "document.querySelectorAll('.plot:not(.js-plotly-plot)').length - "
                      "window.perflabReport.pending())", "the charts queued for drawing to be drawn")


def _draw_by_scrolling(driver) -> None:
    """Charts are drawn as they come into view: scroll to each, until none is left to draw."""
    for plot in driver.find_elements("css selector", ".chart .plot"):
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", plot)
        _wait_for(driver, "return arguments[0].classList.contains('js-plotly-plot')",
                  f"chart {plot.get_attribute('id')!r} to be drawn once scrolled into view", plot)
    assert driver.execute_script("return window.perflabReport.pending()") == 0


def _charts(driver) -> list[dict]:
    _draw_by_scrolling(driver)
    return driver.execute_script("""
        return Array.from(document.querySelectorAll('.js-plotly-plot')).map(p => ({
            id: p.id, traces: p.data.length,
            drawn: p.querySelectorAll('svg.main-svg .point, svg.main-svg path.js-line, svg.main-svg .box').length,
            width: p.querySelector('svg.main-svg') ? p.querySelector('svg.main-svg').getBoundingClientRect().width : 0}));""")


def test_history_page_in_chromium(browser, reports, tmp_path):
    page = reports[1]
    _open(browser, page)
    data = _data(page)
    # After load only the charts near the viewport are drawn; the others wait for the reader.
    _settle(browser)
    drawn = browser.execute_script("return document.querySelectorAll('.js-plotly-plot').length")
    drawable = [t for t in data["trends"] if len(t["runs"]) > 1]   # a single point is listed, not drawn
    assert 1 <= drawn and drawn + browser.execute_script("return window.perflabReport.pending()") == \
        len(drawable) + len(data["scaling"]) + len(data["distributions"])
    shot = _artifacts(tmp_path) / "report-history.png"
    _settle(browser)
    browser.save_screenshot(str(shot))
    print(f"screenshot: {shot}")
    errors_checked = False
    charts = {c["id"]: c for c in _charts(browser)}
    assert len(charts) == len(drawable) + len(data["scaling"]) + len(data["distributions"])
    for i, t in enumerate(data["trends"]):
        if len(t["runs"]) < 2:
            assert f"trend-{i}" not in charts
            continue
        c = charts[f"trend-{i}"]
        assert c["traces"] == 3 and c["width"] > 100, c          # runs, levels, annotated
        assert c["drawn"] >= 1, (t["metric"], c)
    lonely = next(i for i, t in enumerate(data["trends"]) if t["metric"] == "lonely.time_s")
    assert "lonely.time_s" in browser.find_element("id", "trends-single").text   # one point is listed, not drawn
    assert charts["scaling-0"]["traces"] == 4 and charts["scaling-0"]["drawn"] > 0
    for i, d in enumerate(data["distributions"]):
        assert charts[f"distribution-{i}"]["traces"] == len(d["variants"]) and charts[f"distribution-{i}"]["drawn"] > 0
    assert "Half load -j 1" in browser.find_element("id", "kernbench-body").text
    assert browser.find_element("id", "lmbench").is_displayed()

    # Hovering a point shows its commit (and the hostile tag, as text).
    # Plotly draws a hover label at once, or (a hover within 50 ms of the last one) at its next
    # timer: the label is waited for, then read.
    step = next(i for i, t in enumerate(data["trends"]) if t["metric"] == "bench.latency_us")
    hover_text = f"return (document.querySelector('#trend-{step} .hoverlayer') || {{}}).textContent || ''"
    browser.execute_script(f"""
        const p = document.getElementById('trend-{step}');
        p.scrollIntoView();
        Plotly.Fx.hover(p, [{{curveNumber: 0, pointNumber: 5}}]);""")
    _wait_for(browser, hover_text + f".includes('{'06' * 6}')", "the 6th point's hover label")
    hover = browser.execute_script(hover_text)
    assert "06" * 6 in hover, hover
    assert "<script>alert(1)</script>" in hover, hover
    # And with the mouse: move onto the 4th point, as a reader does.
    from selenium.webdriver.common.action_chains import ActionChains

    browser.execute_script(f"Plotly.Fx.unhover(document.getElementById('trend-{step}'))")
    point = browser.find_elements("css selector", f"#trend-{step} .scatterlayer .trace:first-child .point")[3]
    ActionChains(browser).move_to_element(point).perform()
    _wait_for(browser, hover_text + f".includes('{'04' * 6}')", "the 4th point's hover label under the mouse")
    hover = browser.execute_script(hover_text)
    assert "04" * 6 in hover and "tag v3" in hover, hover

    # A click on a point shows that run's samples and environment; the hostile comment as text.
    run8 = data["trends"][step]["runs"][8][0]
    browser.execute_script(f"document.getElementById('trend-{step}').emit('plotly_click', "
                           f"{{points: [{{customdata: {run8}}}]}});")
    detail = browser.find_element("id", "run-detail")
    assert detail.is_displayed()
    text = detail.text
    assert f"#{run8}" in text and "bench.latency_us" in text and "Test CPU <i>fast</i>" in text
    assert "<script>alert(3)</script>" in text
    assert browser.execute_script("return document.querySelectorAll('img').length") == 0
    # A point that pools several runs (a commit's, in commit order): the first shown, every one reachable.
    run9 = data["trends"][step]["runs"][9][0]
    browser.execute_script(f"document.getElementById('trend-{step}').emit('plotly_click', "
                           f"{{points: [{{customdata: [{run8}, {run9}]}}]}});")
    assert "this point pools 2 runs" in detail.text and f"#{run8}" in detail.text
    buttons = browser.find_elements("css selector", "#run-detail .pooled-run")
    assert [b.text for b in buttons] == [f"#{run8}", f"#{run9}"]
    buttons[1].click()
    assert browser.find_element("id", "run-detail-id").text == f"#{run9}"
    # the trend's own points carry every run of the point
    assert browser.execute_script(f"return document.getElementById('trend-{step}').data[0].customdata[8]") == \
        data["trends"][step]["runs"][8]
    body = browser.find_element("tag name", "body").text
    assert "all <b>runs</b>" in browser.title
    assert data["plotly"] in browser.find_element("id", "footer").text
    _no_errors(browser)
    errors_checked = True
    assert errors_checked and "Trends" in body


def test_comparison_page_in_chromium(browser, reports, tmp_path):
    page = reports[0]
    _open(browser, page)
    data = _data(page)
    rows = browser.find_elements("css selector", "#comparison-table tbody tr")
    own = [r for r in data["comparison"]["rows"] if not r["monitor"]]
    assert {r["metric"] for r in data["comparison"]["rows"] if r["monitor"]} == {"vmstat.cs.per_s", "vmstat.cpu.sy"}
    assert len(rows) == len(own) >= 1
    verdicts = {r["verdict"] for r in own}
    table_text = browser.find_element("id", "comparison-table").text
    assert "bimodal.time_us" in table_text and "detectable" not in table_text   # folded
    browser.find_element("id", "all-columns").click()
    assert "detectable" in browser.find_element("id", "comparison-table").text
    browser.find_element("id", "all-columns").click()

    # The filters hide rows.
    def visible():
        return browser.execute_script(
            "return Array.from(document.querySelectorAll('#comparison-table tbody tr')).filter(r => !r.hidden)"
            ".map(r => r.dataset.metric)")

    box = browser.find_element("id", "filter-metric")
    box.send_keys("no-metric-has-this-name")
    assert visible() == []
    box.clear()
    box.send_keys("bimodal")
    assert visible() == ["bimodal.time_us"]
    from selenium.webdriver.support.ui import Select

    box.clear()
    browser.execute_script("document.getElementById('filter-metric').dispatchEvent(new Event('input'))")
    other = "regression" if "regression" not in verdicts else "improvement"
    Select(browser.find_element("id", "filter-verdict")).select_by_value(sorted(verdicts)[0])
    assert len(visible()) == sum(1 for r in own if r["verdict"] == sorted(verdicts)[0])
    browser.execute_script(f"const s = document.getElementById('filter-verdict'); s.add(new Option('{other}', '{other}'));"
                           f"s.value = '{other}'; s.dispatchEvent(new Event('change'));")
    assert visible() == []

    # Sorting by a column orders the rows.
    browser.execute_script("document.getElementById('filter-verdict').value = '';"
                           "document.getElementById('filter-verdict').dispatchEvent(new Event('change'))")
    header = browser.find_element("xpath", "//table[@id='comparison-table']//th[text()='metric']")
    header.click()
    names = [r.get_attribute("data-metric") for r in browser.find_elements("css selector", "#comparison-table tbody tr")]
    assert names == sorted(names, key=str.lower)

    monitors = browser.find_element("id", "monitors").text
    assert "vmstat.cs.per_s" in monitors and "vmstat.cpu.sy" not in monitors
    browser.find_element("id", "environment-summary").click()   # folded below the trends
    env = browser.find_element("id", "environment").text
    assert "kernel_release" in env and "6.9.0" in env
    for c in _charts(browser):
        assert c["traces"] >= 1 and c["drawn"] > 0, c
    browser.execute_script("window.scrollTo(0, 0)")
    shot = _artifacts(tmp_path) / "report-compare.png"
    browser.save_screenshot(str(shot))
    print(f"screenshot: {shot}")
    _no_errors(browser)


@pytest.fixture(scope="module")
def monitored(tmp_path_factory):
    """Real runs with real monitors: a sleeping command and a busy one, 3 repetitions each."""
    tmp = tmp_path_factory.mktemp("html-monitors")
    cli = CLI(tmp / "perflab.db", tmp, tmp / "cache")
    monitors = ["--monitor", "vmstat:interval=0.1", "--monitor", "proc-stat:interval=0.1"]
    cli("run", "cmd", "--runs", "3", *monitors, "--tag", "quiet", "--", "sleep", "0.4")
    cli("run", "cmd", "--runs", "3", *monitors, "--tag", "busy", "--",
        "sh", "-c", "i=0; while [ $i -lt 150000 ]; do i=$((i+1)); done")
    # The changed view depends on what else the machine does (the monitors read the whole
    # system); --monitors all shows every monitor metric whatever the verdict.
    out = tmp / "monitors.html"
    cli("report", "html", "quiet", "busy", "--monitors", "all", "-o", out)
    return out


def test_monitor_time_series_in_chromium(browser, monitored):
    data = _data(monitored)
    series = data["comparison"]["monitor_series"]
    shown = [r for r in data["comparison"]["rows"] if r["monitor"] and r["verdict"] != "absent from head"]
    assert {r["monitor"] for r in shown} == {"vmstat", "proc-stat"}
    assert len(series) == 12 and {s["monitor"] for s in series} <= {"vmstat", "proc-stat"}
    for s in series:
        assert [side["label"] for side in s["sides"]] == ["quiet", "busy"]
        assert all(len(line["t"]) == len(line["v"]) >= 1 for side in s["sides"] for line in side["lines"])
    _open(browser, monitored)
    charts = {c["id"]: c for c in _charts(browser)}
    for i, s in enumerate(series):
        lines = sum(len(side["lines"]) for side in s["sides"])
        assert charts[f"monitor-{i}"]["traces"] == lines and charts[f"monitor-{i}"]["drawn"] > 0
    table = browser.find_element("id", "monitors").text
    assert all(r["metric"] in table for r in shown)
    # the window the figures cover, said with them (issue 44)
    assert data["comparison"]["monitor_windows"] == "window: the benchmark process's life (its warm-up included)"
    assert "Window: the benchmark process's life (its warm-up included)." in table
    _no_errors(browser)


def test_full_bundle_page_in_chromium(browser, full_bundle_report):
    """The fallback bundle draws the same charts (the trace types are in both)."""
    _open(browser, full_bundle_report)
    charts = _charts(browser)
    data = _data(full_bundle_report)
    assert len(charts) == browser.execute_script("return document.querySelectorAll('.chart .plot').length") \
        >= len(data["distributions"]) + len(data["trends"]) >= 2
    for c in charts:
        assert c["traces"] >= 1 and c["drawn"] > 0, c
    assert data["plotly"] in browser.find_element("id", "footer").text
    _no_errors(browser)


# -- issue 22, point 6: the page leads with the verdict ------------------------------------------

def test_comparison_page_leads_with_the_verdict(browser, reports, tmp_path):
    page = reports[0]
    _open(browser, page)
    data = _data(page)
    own = [r for r in data["comparison"]["rows"] if not r["monitor"]]
    regressions = sum(r["verdict"] == "regression" for r in own)
    improvements = sum(r["verdict"] == "improvement" for r in own)
    headline = browser.find_element("id", "headline").text
    word = "regression" if regressions == 1 else "regressions"
    assert headline.startswith(f"{regressions} {word}, {improvements} improvement")
    assert f"among {len(own)} metric" in headline and "base base (" in headline and "head head (" in headline
    # above the fold: the headline comes before the table, the environment after the trends
    top = browser.execute_script("return document.getElementById('headline').getBoundingClientRect().top")
    assert top < browser.execute_script("return document.getElementById('comparison-table').getBoundingClientRect().top")
    order = browser.execute_script("return Array.from(document.querySelectorAll('main > section')).map(s => s.id)")
    assert order.index("environment") > order.index("trends")
    assert browser.find_element("id", "environment-fold").get_attribute("open") is None
    width = browser.execute_script("return document.getElementById('comparison-table').getBoundingClientRect().width")
    assert width <= 1400
    headings = [th.text for th in browser.find_elements("css selector", "#comparison-table th")]
    assert headings.count("n") == 0 and "samples" in headings
    legend = browser.find_element("id", "comparison-legend").text
    assert "@" in legend and "confidence level" in legend and "harmonic mean" in legend
    _no_errors(browser)


def test_history_page_lists_single_points_and_labels_runs(browser, reports):
    page = reports[1]
    _open(browser, page)
    data = _data(page)
    single = [t for t in data["trends"] if len(t["runs"]) == 1]
    assert single and all(t["name"] and "{" not in t["name"] for t in data["trends"])
    listed = browser.find_element("id", "trends-single").text
    assert all(t["metric"] in listed for t in single)
    assert browser.execute_script("return document.querySelectorAll('#trends-body .plot').length") == \
        len(data["trends"]) - len(single)
    assert "change point" in browser.find_element("id", "headline").text
    first = next(i for i, t in enumerate(data["trends"]) if len(t["runs"]) > 1)
    browser.execute_script(f"document.getElementById('trend-{first}').scrollIntoView()")
    _settle(browser)
    browser.execute_script("window.perflabReport.drawAll()")
    ticks = browser.execute_script(f"return document.getElementById('trend-{first}').layout.xaxis.ticktext")
    assert ticks and all(t.startswith("#") for t in ticks)
    _no_errors(browser)

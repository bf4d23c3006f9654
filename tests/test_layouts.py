"""What every comparison layout prints must be true (issue 8): numbers whole
and precise, caveats in words, FDR families said, intervals that agree with
the verdicts, user strings harmless, CSV cells that no spreadsheet runs."""

import csv
import io
import json
import re

import numpy as np
import pytest

from conftest import assert_one_line_error
from perflab.exchange import transfer
from perflab.analysis.comparison import compare
from perflab.core.errors import PerflabError
from perflab.core.model import HIGHER_IS_BETTER, INFORMATIONAL, LOWER_IS_BETTER, Sample
from perflab.report.numbers import percent, value
from perflab.cli.compare import show as render_comparison
from perflab.store import open_store
from perflab.report import registry

TEXT_STYLES = tuple(layout.name for layout in registry.LAYOUTS if not layout.data)   # every layout read on a terminal
CMD_RESOURCES = ("time.user_time", "time.system_time", "time.maximum_resident_set_size", "time.exit_status")


def make_store(path, sides, benchmark="bench", params=None, env=None):
    """One finished run per side: (tag, {metric: (unit, direction, values)}[, testbox, extra env])."""
    store = open_store(str(path))
    for side in sides:
        tag, metrics = side[0], side[1]
        box = side[2] if len(side) > 2 else "box"
        facts = {"testbox": box, "kernel_release": "6.8.0", **(env or {}), **(side[3] if len(side) > 3 else {})}
        run = store.create_run(box=box, environment=facts, benchmark=benchmark, name=benchmark,
                               params=params or {"mode": "process"}, tag=tag)
        for rep in range(max(len(v) for _u, _d, v in metrics.values())):
            store.add_samples(run, rep, [Sample(m, float(v[rep]), unit, d)
                                         for m, (unit, d, v) in metrics.items() if rep < len(v)])
        store.finish_run(run, "finished")
    return store


def jitter(center, n, rel, seed):
    """n values around center with a relative spread (deterministic)."""
    rng = np.random.default_rng(seed)
    return list(center * (1 + rel * rng.standard_normal(n)))


def line_of(out, needle, start=None):
    return next(l for l in out.splitlines() if needle in l and (start is None or l.startswith(start)))


# -- item 2: mmtests never cuts a number ------------------------------------

def test_mmtests_prints_large_values_whole(tmp_path):
    base = [12448040.6626] * 4
    head = [12448040.6626 * 1.1] * 4
    big = [1.25e15, 1.25e15 + 2, 1.25e15 - 2, 1.25e15]
    store = make_store(tmp_path / "t.db", [
        ("base", {"bench.ops": ("ops/s", HIGHER_IS_BETTER, base), "bench.bytes": ("B", LOWER_IS_BETTER, big)}),
        ("head", {"bench.ops": ("ops/s", HIGHER_IS_BETTER, head), "bench.bytes": ("B", LOWER_IS_BETTER, big)}),
    ])
    out = render_comparison(compare(store, ["base", "head"]), "mmtests")
    # Identical samples are compared as exact: the figure's line is named for it (issue 44).
    hmean = line_of(out, "ops", "Exact")
    assert re.search(r"\s12448040\.6626 \(\s+0\.00%\)\s+13692844\.7289 \(\s+10\.00%\)\*", hmean), hmean
    assert "1250000000000000.0000" in line_of(out, "bytes", "Exact")
    # Columns stay aligned: each "(x%)" of a column ends at the same place on every line.
    rows = [l for l in out.splitlines() if re.match(r"(Min|Amean|Hmean|Exact|Max|BAmean-95)\s", l)]
    assert len({tuple(m.end() for m in re.finditer(r"%\)", l)) for l in rows}) == 1, out


# -- item 3: lkp and kernbench show at least 4 significant digits -----------

def test_value_keeps_four_significant_digits():
    assert [value(x) for x in (0.01, 0.015, 5, 12.3456, 123.456, 999.96, 12448040.66, 1.23456e-5, 0)] == \
        ["0.01000", "0.01500", "5.000", "12.35", "123.5", "1000", "12448041", "1.235e-05", "0"]
    for x in np.logspace(-8, 8, 400):
        for v in (x, -x):
            assert float(value(v)) == pytest.approx(v, rel=5e-4), (v, value(v))


def test_lkp_and_kernbench_show_a_small_change(tmp_path):
    store = make_store(tmp_path / "t.db", [
        ("base", {"bench.lat_s": ("s", LOWER_IS_BETTER, [0.0100, 0.0101, 0.0099, 0.0100])}),
        ("head", {"bench.lat_s": ("s", LOWER_IS_BETTER, [0.0150, 0.0151, 0.0149, 0.0150])}),
    ])
    result = compare(store, ["base", "head"])
    lkp = line_of(render_comparison(result, "lkp"), "bench.lat_s")
    assert lkp.split()[:4] == ["0.01000", "+50.0%", "0.01500", "bench.lat_s"], lkp
    kern = render_comparison(result, "kernbench")
    assert re.search(r"bench\.lat_s\s+0\.01500 \(8\.165e-05\)\s+\[\+50\.00% regression", kern), kern


# -- item 4: benchstat closes its parenthesis and compares medians ----------

BASE10 = [10.0, 10.1, 9.9, 10.05, 9.95, 10.02, 9.98, 10.0, 10.01, 9.99]
HEAD10 = [x * 1.05 for x in BASE10[:9]] + [13.0]  # one outlier: the mean moves more than the median


def test_benchstat_vs_base_is_the_change_of_medians(tmp_path):
    store = make_store(tmp_path / "t.db", [("base", {"bench.lat_us": ("us", LOWER_IS_BETTER, BASE10)}),
                                           ("head", {"bench.lat_us": ("us", LOWER_IS_BETTER, HEAD10)})])
    result = compare(store, ["base", "head"])
    cmp = result.rows[0].heads[0]
    assert cmp.verdict == "regression"
    medians = np.median(HEAD10) / np.median(BASE10) - 1
    assert cmp.median_change == pytest.approx(medians, rel=1e-12)
    line = line_of(render_comparison(result, "benchstat"), "bench.lat_us")
    assert re.search(r"\(p=\d\.\d{3} n=10\)$", line), line  # closed
    assert percent(medians, decimals=2) in line and percent(cmp.pct_change, decimals=2) not in line, line
    assert "+5.05%" in line


def test_no_negative_zero_change(tmp_path):
    base = [10.0, 10.1, 9.9, 10.05, 9.95, 10.02, 9.98, 10.0]
    store = make_store(tmp_path / "t.db", [("base", {"bench.lat_us": ("us", LOWER_IS_BETTER, base)}),
                                           ("head", {"bench.lat_us": ("us", LOWER_IS_BETTER, [x + 1 for x in base])}),
                                           ("same", {"bench.lat_us": ("us", LOWER_IS_BETTER, [x * 1.00001 for x in base])})])
    for heads in (["head"], ["same"]):
        result = compare(store, ["base", *heads])
        for style in ("mmtests", "lkp", "kernbench", "benchstat"):
            out = render_comparison(result, style)
            assert not re.search(r"-0\.0+%", out), (style, out)
    stddev = line_of(render_comparison(compare(store, ["base", "head"]), "mmtests"), "lat_us", "Stddev")
    assert stddev.count("(   0.00%)") == 2, stddev


# -- item 5: every text layout says its caveats in words ---------------------

CAVEATS = {
    "syscall.null": ("us", LOWER_IS_BETTER, [0.7], [0.8]),                        # one sample: no test
    "syscall.stat": ("us", LOWER_IS_BETTER, jitter(5.0, 8, 0.2, 1), jitter(5.0, 8, 0.2, 2)),  # noisy
    "syscall.fstat": ("us", LOWER_IS_BETTER, [0.0, 1.0, 2.0, 1.0, 1.5], [0.0, 1.1, 2.0, 1.0, 1.5]),  # not all positive
    "proc.exec": ("us", LOWER_IS_BETTER, [3000, 3010, 2990], [3001, 3011, 2991]),  # few samples
}


@pytest.fixture
def caveat_result(tmp_path):
    store = make_store(tmp_path / "t.db", [
        ("base", {m: (u, d, b) for m, (u, d, b, _h) in CAVEATS.items()}),
        ("head", {m: (u, d, h) for m, (u, d, _b, h) in CAVEATS.items()}),
    ], benchmark="lmbench", params={"quick": True})
    return compare(store, ["base", "head"])


@pytest.mark.parametrize("style", TEXT_STYLES)
def test_every_text_layout_says_each_caveat_in_words(caveat_result, style):
    out = render_comparison(caveat_result, style)
    assert "too few samples to tell" in out and "(n=1 vs 1)" in out
    assert re.search(r"noisy: CoV (above \d+%|\d+\.\d%)", out)   # footnotes word it for every row they mark
    assert "tested on raw values" in out
    assert "few samples (n=3 vs 3)" in out
    assert "p=nan" not in out and "± ∞ ~" not in out


def footnotes_of(out: str, line: str) -> str:
    """The text of the numbered footnotes a row's line carries (¹ ² ...), joined."""
    marks = re.findall(r"[¹²³⁴⁵⁶⁷⁸⁹⁰]+", line)
    return " | ".join(m.group(1) for mark in marks for m in [re.search(rf"^\s*{mark} (.*)$", out, re.M)] if m)


def test_caveats_name_their_metric(caveat_result):
    lkp = render_comparison(caveat_result, "lkp")
    assert "too few samples to tell" in footnotes_of(lkp, line_of(lkp, " syscall.null"))
    assert "few samples (n=3 vs 3)" in footnotes_of(lkp, line_of(lkp, " proc.exec"))
    kern = render_comparison(caveat_result, "kernbench").split("Average head Run")[1]
    assert "too few samples to tell" in line_of(kern, "syscall.null", "syscall.null")
    bench = render_comparison(caveat_result, "benchstat")
    mark = re.search(r"syscall\.null.*\(n=1\) (\S+)$", bench, re.M).group(1)
    assert re.search(rf"^{mark} too few samples to tell", bench, re.M), bench
    for style in ("mmtests", "lmbench"):
        out = render_comparison(caveat_result, style)
        assert re.search(r"^(\S+ )?too few samples to tell: .*\(syscall\.null\)$", out, re.M), out


# -- item 6: FDR families: sizes printed, resource figures secondary, --primary

def cmd_sides():
    elapsed_base = jitter(1.0, 10, 0.02, 3)
    elapsed_head = [x * 1.04 for x in jitter(1.0, 10, 0.02, 4)]
    def side(elapsed, seed):
        return {"time.elapsed_time": ("s", LOWER_IS_BETTER, elapsed),
                "time.user_time": ("s", LOWER_IS_BETTER, jitter(0.5, 10, 0.05, seed)),
                "time.system_time": ("s", LOWER_IS_BETTER, jitter(0.2, 10, 0.05, seed + 1)),
                "time.maximum_resident_set_size": ("KiB", LOWER_IS_BETTER, jitter(2000, 10, 0.01, seed + 2)),
                # Not constant: a metric constant and equal on both sides is not a row (issue 22).
                "time.exit_status": ("", INFORMATIONAL, [0] * 9 + [1])}
    return [("base", side(elapsed_base, 10)), ("head", side(elapsed_head, 20))]


def test_resource_figures_form_a_secondary_family(tmp_path):
    store = make_store(tmp_path / "t.db", cmd_sides(), benchmark="cmd", params={"command": "work"})
    result = compare(store, ["base", "head"])
    family = {r.metric: r.family for r in result.rows}
    assert family == {"time.elapsed_time": "primary", **{m: "secondary" for m in CMD_RESOURCES}}
    elapsed = next(r.heads[0] for r in result.rows if r.metric == "time.elapsed_time")
    # Alone in its family: BH leaves its p-value as it is (full single-metric power).
    assert elapsed.family_size == 1 and elapsed.p_adjusted == elapsed.p_value
    assert [(f.name, f.tested, f.informational) for f in result.families[0]] == [("primary", 1, 0), ("secondary", 3, 1)]
    for style in TEXT_STYLES:
        out = render_comparison(result, style)
        assert "FDR family of head vs base: 1 primary metric; 3 secondary metrics + 1 informational" in out, style
    labels = {"lkp": "-- secondary metrics", "mmtests": "secondary metrics (their own FDR family): time.exit_status,",
              "kernbench": "no change, secondary", "benchstat": "time.user_time [secondary]"}
    for style, label in labels.items():
        assert label in render_comparison(result, style), style
    doc = json.loads(render_comparison(result, "json"))
    assert doc["families"]["head"][0] == {"name": "primary", "tested": 1, "informational": 0, "untested": 0}
    assert {r["metric"]: r["family"] for r in doc["metrics"]}["time.user_time"] == "secondary"


def test_primary_globs_choose_the_family(tmp_path, cli):
    store = make_store(cli.db, cmd_sides(), benchmark="cmd", params={"command": "work"})
    result = compare(store, ["base", "head"], primary=["time.*_time"])
    assert {r.metric for r in result.rows if r.family == "primary"} == {"time.elapsed_time", "time.user_time", "time.system_time"}
    assert "primary metrics: time.*_time (--primary)" in render_comparison(result, "lkp")
    assert next(r.heads[0] for r in result.rows if r.metric == "time.elapsed_time").family_size == 3
    with pytest.raises(PerflabError, match=r"--primary 'nosuch\*' matches no metric"):
        compare(store, ["base", "head"], primary=["time.*", "nosuch*"])
    assert_one_line_error(cli("compare", "base", "head", "--primary", "nosuch*", check=False), "'nosuch*'", "time.elapsed_time")
    out = cli("compare", "base", "head", "--primary", "time.user_time").stdout
    assert "FDR family of head vs base: 1 primary metric; 3 secondary metrics + 1 informational" in out


# -- item 10: float options refuse nan and inf --------------------------------

@pytest.mark.parametrize("option,value", [("--threshold", "nan"), ("--threshold", "inf"), ("--alpha", "nan"),
                                          ("--alpha", "inf"), ("--alpha", "1")])
def test_compare_refuses_non_finite_options(cli, option, value):
    proc = cli("compare", "base", "head", option, value, check=False)
    assert_one_line_error(proc, option, value)
    assert proc.returncode == 2


# -- item 11: user strings are shown, never obeyed ----------------------------

EVIL = "\x1b]0;pwn\x07\x1b[2J"


def test_user_strings_are_printable_in_every_compare_style(tmp_path):
    metrics = {f"bench.{EVIL}lat": ("us", LOWER_IS_BETTER, [1.0, 1.1, 0.9, 1.0])}
    head_metrics = {f"bench.{EVIL}lat": ("us", LOWER_IS_BETTER, [2.0, 2.1, 1.9, 2.0])}
    long_tag = "T" * 250
    store = make_store(tmp_path / "t.db", [
        (f"base{EVIL}", metrics, "box", {"cc_version": f"gcc{EVIL}"}),
        (long_tag, head_metrics, f"other{EVIL}", {"cc_version": f"clang{EVIL}"}),
    ], params={"mode": f"m{EVIL}" + "p" * 300})
    result = compare(store, [f"base{EVIL}", long_tag], cross_box=True)
    for style in TEXT_STYLES:
        out = render_comparison(result, style)
        assert "\x1b" not in out and "\x07" not in out, style
        assert "\\x1b" in out, style
        assert long_tag not in out, style  # bounded
        assert max(len(l) for l in out.splitlines()) < 400, style
    assert "environment differences (--cross-box):" in render_comparison(result, "mmtests")
    assert "cc_version: gcc\\x1b]0;pwn\\x07\\x1b[2J -> clang\\x1b" in render_comparison(result, "benchstat")
    doc = json.loads(render_comparison(result, "json"))  # exact
    assert doc["operands"] == [f"base{EVIL}", long_tag] and doc["metrics"][0]["metric"] == f"bench.{EVIL}lat"


# -- item 12: CSV cells no spreadsheet runs ------------------------------------

def test_comparison_csv_guards_formulas_and_keeps_numbers(tmp_path):
    store = make_store(tmp_path / "t.db", [
        ("=HYPERLINK(1)", {"@SUM(1)": ("-", LOWER_IS_BETTER, [1.0, 1.1, 0.9, 1.0])}),
        ("+head", {"@SUM(1)": ("-", LOWER_IS_BETTER, [0.5, 0.55, 0.45, 0.5])}),
    ])
    rows = list(csv.DictReader(io.StringIO(render_comparison(compare(store, ["tag==HYPERLINK(1)", "+head"]), "csv"))))
    (row,) = rows
    assert row["base"] == "'=HYPERLINK(1)" and row["head"] == "'+head"
    assert row["metric"] == "'@SUM(1)" and row["unit"] == "'-"
    assert row["direction"] == "-1" and float(row["pct_change"]) == pytest.approx(-0.5, rel=1e-9)
    assert row["ci_low"].startswith("-") and float(row["ci_low"]) < -0.4


def test_csv_export_guards_formulas_and_round_trips(tmp_path):
    store = open_store(str(tmp_path / "t.db"))
    strings = {"tag": "=1+2", "comment": "+cmd|' /C calc'!A0"}
    run = store.create_run(box="box", environment={"testbox": "box", "note": "@x"}, benchmark="bench",
                           name="-name", params={"mode": "x"}, tag=strings["tag"], comment=strings["comment"])
    store.add_samples(run, 0, [Sample("=m", -0.5, "@u", LOWER_IS_BETTER), Sample("'=quoted", 1e-05, "\ttab", 1)])
    store.finish_run(run, "finished")
    exported = transfer.collect(store, store.find_runs())
    text = transfer.to_csv(exported)
    cells = [c for row in csv.reader(io.StringIO(text)) for c in row]
    for bad in cells:
        assert not re.match(r"[=+@\t\r]", bad) and not (bad.startswith("-") and not re.fullmatch(r"-[\d.e-]+", bad)), bad
    assert "-0.5" in cells and "'=1+2" in cells and "'-name" in cells and "''=quoted" in cells
    (back,) = transfer.read_text(tmp_path / "x.csv", text)
    assert back["tag"] == "=1+2" and back["comment"] == strings["comment"] and back["name"] == "-name"
    # export version 2: the last field is the process of the repetition (none recorded here)
    assert sorted(back["samples"]) == sorted([("=m", -0.5, "@u", -1, 0, None), ("'=quoted", 1e-05, "\ttab", 1, 0, None)])
    assert back["environment"] == exported[0]["environment"]


# -- issue 32: one layout registry -------------------------------------------

def test_the_cli_offers_the_registered_layouts():
    from perflab.cli.compare import compare_cmd
    from perflab.cli.robot import check_cmd
    from perflab.analysis.views.comparison import EXTRAS

    def choices(command):
        return tuple(next(p for p in command.params if p.name == "style").type.choices)

    assert TEXT_STYLES == ("lkp", "mmtests", "lmbench", "kernbench", "benchstat")
    assert choices(compare_cmd) == registry.layout_names() == TEXT_STYLES + ("json", "csv")
    assert choices(check_cmd) == registry.layout_names(gate=True) == ("lkp", "mmtests", "kernbench", "benchstat",
                                                                       "json", "csv")
    for layout in registry.LAYOUTS:
        assert set(layout.needs) <= set(EXTRAS), layout
        module, function = layout.renderer.split(":")
        assert callable(getattr(__import__(module, fromlist=[function]), function)), layout
    with pytest.raises(ValueError, match="no comparison layout 'ncompare': known are lkp, mmtests"):
        registry.layout("ncompare")


def test_the_view_computes_only_the_extras_a_layout_needs(tmp_path):
    import copy

    from perflab.analysis.views.comparison import EXTRAS, RowKey, comparison_view

    store = make_store(tmp_path / "t.db", [("base", {"bench.lat_us": ("us", LOWER_IS_BETTER, BASE10)}),
                                           ("head", {"bench.lat_us": ("us", LOWER_IS_BETTER, HEAD10)})])
    result = compare(store, ["base", "head"])
    for layout in registry.LAYOUTS:
        view = comparison_view(result, layout.needs)
        assert {name for name in EXTRAS if getattr(view, name) is not None} == set(layout.needs), layout.name
        assert registry.render_comparison(view, layout.name) == render_comparison(result, layout.name)
    # mmtests' lines are found by the row's key, not by the object: a copy of the row finds them.
    view = comparison_view(result, ["summary_lines"])
    row = result.rows[0]
    assert list(view.summary_lines) == [RowKey(row.box, "bench", json.dumps(row.params, sort_keys=True),
                                               "bench.lat_us")]
    assert view.lines_of(copy.copy(row)) is view.lines_of(row)
    assert [line.name for line in view.lines_of(row)] == ["Min", "Amean", "Stddev", "CoeffVar", "Max", "BAmean-95"]
    # A layout reading an extra it did not name fails at once; so does a wrong request.
    with pytest.raises(LookupError, match="without 'summary_lines'"):
        comparison_view(result, ()).lines_of(row)
    with pytest.raises(ValueError, match="unknown comparison extras"):
        comparison_view(result, ["mmtests"])
    with pytest.raises(TypeError):
        comparison_view(result, "mmtests")
    assert all(getattr(comparison_view(result), name) is not None for name in EXTRAS)   # None: every extra



# -- issue 33 item 7: mmtests' footnote marks sit on their rows; "noisy" names the noisy side --

SUPERSCRIPT = "¹²³⁴⁵⁶⁷⁸⁹⁰"


def test_mmtests_marks_each_caveat_on_its_rows_mean_line(tmp_path):
    store = make_store(tmp_path / "t.db", [
        ("base", {"bench.ops": ("ops/s", HIGHER_IS_BETTER, jitter(100.0, 8, 0.005, 1)),
                  "bench.lat_us": ("us", LOWER_IS_BETTER, [5.0, 5.1, 4.9]),
                  "bench.misc": ("", INFORMATIONAL, jitter(10.0, 8, 0.3, 3))}),     # noisy, not in the table
        ("head", {"bench.ops": ("ops/s", HIGHER_IS_BETTER, jitter(100.0, 8, 0.005, 4)),
                  "bench.lat_us": ("us", LOWER_IS_BETTER, [5.0, 5.2, 4.9]),
                  "bench.misc": ("", INFORMATIONAL, jitter(10.0, 8, 0.3, 6))}),
    ])
    out = render_comparison(compare(store, ["base", "head"]), "mmtests")
    notes = re.findall(rf"^([{SUPERSCRIPT}]+) (.*)$", out, re.M)
    assert [m for m, _ in notes] == ["¹", "²"], out                # numbered from 1, only what a row carries
    assert "noisy" not in out and "bench.misc" not in out, out     # the informational row is not printed
    amean = line_of(out, "lat_us", "Amean")
    assert amean.split()[:4] == ["Amean", "lat_us", "¹", "²"], out   # after the name: the line still ends as it did
    assert "few samples (n=3 vs 3)" in footnotes_of(out, amean) and "could not have seen" in footnotes_of(out, amean)
    assert not re.search(f"[{SUPERSCRIPT}]", line_of(out, "ops", "Hmean"))
    # Every other statistic's line and the tables' headings carry no mark.
    table = out.split("FDR family")[0]
    assert [l for l in table.splitlines() if re.search(f"[{SUPERSCRIPT}]", l)] == [amean]


def test_mmtests_footnotes_follow_the_order_of_the_rows_that_carry_them(tmp_path):
    """Two benchmarks' tables: numbers run down the page, each footnote on the rows it names."""
    store = open_store(str(tmp_path / "t.db"))
    for tag, shift in (("base", 0), ("head", 1)):
        for bench, values in (("zeta", [1.0, 1.1, 0.9]), ("alpha", jitter(2.0, 8, 0.2, 7 + shift))):
            run = store.create_run(box="box", environment={"testbox": "box", "kernel_release": "6.8.0"},
                                   benchmark=bench, name=bench, params={"mode": "process"}, tag=tag)
            for rep, v in enumerate(values):
                store.add_samples(run, rep, [Sample(f"{bench}.lat_us", float(v), "us", LOWER_IS_BETTER)])
            store.finish_run(run, "finished")
    out = render_comparison(compare(store, ["base", "head"]), "mmtests")
    marked = [l for l in out.split("FDR family")[0].splitlines() if re.search(f"[{SUPERSCRIPT}]", l)]
    assert len(marked) == 2 and all(l.startswith("Amean") for l in marked), out
    seen = []
    for line in marked:
        for mark in re.findall(f"[{SUPERSCRIPT}]", line):
            if mark not in seen:
                seen.append(mark)
    assert "".join(seen) == SUPERSCRIPT[:len(seen)], out          # first use numbers them
    for line in marked:
        for mark in re.findall(f"[{SUPERSCRIPT}]", line):
            note = re.search(rf"^{mark} (.*)$", out, re.M).group(1)
            assert ("alpha" if "alpha" in line else "zeta") in note.rsplit("(", 1)[-1], (line, note)


def noisy_base_store(path):
    """A base whose CoV is ~13%, heads at ~1.8% and ~12% (issue 33's getppid1 case)."""
    base = [2200000.0, 3040000.0, 2300000.0, 3030000.0, 2250000.0, 3050000.0]
    quiet = [3036000.0, 2990000.0, 3080000.0, 3040000.0, 3110000.0, 3000000.0]
    loud = [2400000.0, 3100000.0, 2500000.0, 3200000.0, 2450000.0, 3300000.0]
    return make_store(path, [("base", {"wis.ops": ("ops/s", HIGHER_IS_BETTER, base)}),
                             ("quiet", {"wis.ops": ("ops/s", HIGHER_IS_BETTER, quiet)}),
                             ("loud", {"wis.ops": ("ops/s", HIGHER_IS_BETTER, loud)})],
                      benchmark="wis")


def test_a_noisy_base_is_said_as_the_bases_noise_in_every_text_layout(tmp_path):
    store = noisy_base_store(tmp_path / "t.db")
    result = compare(store, ["base", "quiet"])
    (cmp,) = result.rows[0].heads
    assert cmp.head.cov < 0.02 < 0.10 < cmp.base.cov
    assert [w for w in cmp.warnings if "noisy" in w] == [f"noisy: the base's CoV {cmp.base.cov * 100:.1f}%"]
    for style in TEXT_STYLES:
        out = render_comparison(result, style)
        assert "noisy: the base's CoV" in out, (style, out)
        assert not re.search(r"noisy: CoV", out), (style, out)    # the quiet head is not called noisy


def test_noisy_footnotes_name_the_noisy_side_among_several_heads(tmp_path):
    store = noisy_base_store(tmp_path / "t.db")
    result = compare(store, ["base", "quiet", "loud"])
    quiet, loud = result.rows[0].heads
    assert [w for w in quiet.warnings if "noisy" in w] == [f"noisy: the base's CoV {quiet.base.cov * 100:.1f}%"]
    assert [w for w in loud.warnings if "noisy" in w] == [f"noisy: the base's CoV {loud.base.cov * 100:.1f}%",
                                                          f"noisy: CoV {loud.head.cov * 100:.1f}%"]
    for style in ("mmtests", "lmbench"):
        out = render_comparison(result, style)
        base_note = re.search(r"^\S+ noisy: the base's CoV above 10% \((.*)\)$", out, re.M).group(1)
        head_note = re.search(r"^\S+ noisy: CoV above 10% \((.*)\)$", out, re.M).group(1)
        assert base_note == "wis.ops (base)" and head_note == "wis.ops (loud)", (style, out)   # never "(quiet)"
    lkp = render_comparison(result, "lkp")
    assert "noisy: the base's CoV above 10%" in lkp and "noisy: CoV above 10%" in lkp


def test_mmtests_marks_a_monitor_rows_caveats_on_its_line(tmp_path):
    store = make_store(tmp_path / "t.db", [
        ("base", {"bench.ops": ("ops/s", HIGHER_IS_BETTER, jitter(100.0, 8, 0.005, 1)),
                  "proc-vmstat.pgfault": ("", INFORMATIONAL, [1000.0, 1010.0, 990.0])}),
        ("head", {"bench.ops": ("ops/s", HIGHER_IS_BETTER, jitter(100.0, 8, 0.005, 2)),
                  "proc-vmstat.pgfault": ("", INFORMATIONAL, [1500.0, 1510.0, 1490.0])})])
    out = render_comparison(compare(store, ["base", "head"]), "mmtests")
    line = line_of(out, "proc-vmstat.pgfault", "proc-vmstat.pgfault")
    assert line.split()[:2] == ["proc-vmstat.pgfault", "¹"] and line.endswith("*"), out
    assert "few samples (n=3 vs 3)" in footnotes_of(out, line)

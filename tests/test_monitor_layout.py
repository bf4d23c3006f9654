"""Monitor metrics in `compare` (issue 11, item 3): their own FDR family, the lkp
layout's per-monitor detail rows with LKP's display rules, --monitors and --fail-on.

The store is written with the store's own API, with the metric names and units
the monitors record (perflab.monitors): /proc counters as a total (unit "") and
NAME.per_s (unit "/s"), perf-stat software events as a rate ("/s") and
NAME.total, perf-profile shares in %, levels in % or KiB.
"""

import csv
import io
import json
import os
import re
from pathlib import Path

import pytest

from conftest import assert_one_line_error
from perflab.analysis.comparison import compare
from perflab.core.model import HIGHER_IS_BETTER, INFORMATIONAL, Sample
from perflab.cli.compare import show as render_comparison
from perflab.store import open_store

FIXTURE = Path(__file__).parent / "fixtures" / "lkp-monitors.txt"
TEXT_STYLES = ("lkp", "mmtests", "kernbench", "benchstat", "lmbench")

# Six repetitions a side; the spread (0.7%) is below LKP's 2% stddev display rule.
SPREAD = [1.0, 1.01, 0.99, 1.005, 0.995, 1.0]
I = INFORMATIONAL
# metric: (unit, direction, base level, head factor); the head's values are the base's in another order, scaled.
METRICS = {
    "bench.ops": ("ops/s", HIGHER_IS_BETTER, 10000, 0.9),                          # the benchmark's own: -10%
    "proc-vmstat.pgfault": ("", I, 100000, 1.5),                                   # a counter that moved
    "proc-vmstat.pgfault.per_s": ("/s", I, 10000, 1.5),
    "proc-vmstat.pgmajfault": ("", I, 2000, 1.02),                                 # significant, below 5%: no call
    "proc-vmstat.pgmajfault.per_s": ("/s", I, 200, 1.02),
    "interrupts.CAL:Function_call_interrupts": ("", I, 5, 8),                      # moved, total below 100
    "interrupts.CAL:Function_call_interrupts.per_s": ("/s", I, 0.5, 8),
    "perf-stat.context-switches": ("/s", I, 0.2, 3),                               # moved, rate below 1/s
    "perf-stat.context-switches.total": ("", I, 2000, 3),
    "vmstat.cpu.id": ("%", I, 50, 1.0),                                            # unchanged
    "vmstat.cpu.sy": ("%", I, 20, 1.5),
    "meminfo.Dirty": ("KiB", I, 300, 0.5),
    "perf-profile.self.cycles-pp.osq_lock": ("%", I, 10, 3.5),                     # the evidence: +25 points
    "perf-profile.children.cycles-pp.do_page_fault": ("%", I, 40, 1.125),
    "perf-profile.self.cycles-pp.clear_page": ("%", I, 20, 0.8),
    "perf-profile.self.cycles-pp.tiny": ("%", I, 1, 3),                            # moved, share below 5%
}
ONLY_BASE = {"perf-profile.self.cycles-pp.gone": ("%", I, 6, 1)}
ONLY_HEAD = {"perf-profile.self.cycles-pp.new": ("%", I, 7, 1)}


def values(level, factor, head):
    return [level * x * factor for x in (reversed(SPREAD) if head else SPREAD)]


def add_run(store, tag, metrics, head, own_factor=None):
    run = store.create_run(box="box", environment={"testbox": "box", "kernel_release": "6.8.0"},
                           benchmark="bench", name="bench", params={"mode": "process"}, tag=tag)
    columns = {}
    for metric, (unit, direction, level, factor) in metrics.items():
        if metric == "bench.ops" and own_factor is not None:
            factor = own_factor
        columns[metric] = (unit, direction, values(level, factor if head else 1.0, head))
    for rep in range(len(SPREAD)):
        store.add_samples(run, rep, [Sample(m, v[rep], unit, d) for m, (unit, d, v) in columns.items()])
    store.finish_run(run, "finished")


def build(path):
    """base; head (the benchmark regressed, monitors moved); same (the benchmark did not, monitors moved)."""
    store = open_store(str(path))
    add_run(store, "base", {**METRICS, **ONLY_BASE}, head=False)
    add_run(store, "head", {**METRICS, **ONLY_HEAD}, head=True)
    add_run(store, "same", METRICS, head=True, own_factor=1.0)
    return store


@pytest.fixture
def store(tmp_path):
    return build(tmp_path / "t.db")


def row(lines: list[str], metric: str) -> str:
    """The lkp line of a metric: base, change, head, metric [note] (no ±stddev at this spread)."""
    return next(l for l in lines if len(l.split()) > 3 and l.split()[3] == metric)


def section(out: str, start: str, end: str) -> list[str]:
    lines = out.splitlines()
    first = next(i for i, l in enumerate(lines) if l.startswith(start))
    last = next(i for i, l in enumerate(lines) if i > first and l.startswith(end))
    return lines[first:last]


def test_lkp_monitor_section_matches_the_fixture(store):
    out = render_comparison(compare(store, ["base", "head"]), "lkp")
    if os.environ.get("PERFLAB_REGENERATE_FIXTURES"):
        FIXTURE.write_text(out)
    assert out == FIXTURE.read_text()
    lines = out.splitlines()
    # The benchmark's own metrics first, then the monitors, one heading each, in the registry's order.
    own = next(i for i, l in enumerate(lines) if l.endswith("bench.ops"))
    summary = next(i for i, l in enumerate(lines) if l.startswith("  -- monitors:"))
    assert own < summary
    assert "  -- monitors: 7 of 15 metrics changed, 5 more below the noise floors (--monitors all shows every one) --" \
        == lines[summary]
    headings = [l for l in lines[summary + 1:] if l.startswith("  -- ")]
    assert headings == ["  -- vmstat --", "  -- proc-vmstat --", "  -- meminfo --", "  -- perf-profile --"]
    shown = [l.split()[-1] for l in section(out, "  -- vmstat --", "  figures:") if not l.startswith("  -- ")]
    assert shown == ["vmstat.cpu.sy", "proc-vmstat.pgfault", "proc-vmstat.pgfault.per_s", "meminfo.Dirty",
                     # children before self, as LKP prints them; by size of change within each
                     "perf-profile.children.cycles-pp.do_page_fault",
                     "perf-profile.self.cycles-pp.osq_lock", "perf-profile.self.cycles-pp.clear_page"]
    # Unchanged, below the floors, below the perf-profile share, below the 5% monitor effect: absent.
    for absent in ("vmstat.cpu.id", "interrupts.", "perf-stat.", "cycles-pp.tiny", "pgmajfault"):
        assert absent not in out
    # perf-profile shares change in percentage points, other rows in %.
    osq = next(l for l in lines if l.endswith("cycles-pp.osq_lock"))
    assert osq.split() == ["10.00", "+25.0", "35.00", "perf-profile.self.cycles-pp.osq_lock"]
    assert next(l for l in lines if l.endswith("proc-vmstat.pgfault")).split()[:3] == ["100000", "+50.0%", "150000"]
    # Monitor groups on one side only are counted, not listed one by one.
    assert "  only in base (absent from head): 1 perf-profile metric (not compared; json lists them in monitor_only_in)" \
        in lines
    assert "  only in head: 1 perf-profile metric (not compared; json lists them in monitor_only_in)" in lines


def test_monitors_are_a_family_of_their_own(store):
    changed = compare(store, ["base", "head"])
    none = compare(store, ["base", "head"], monitors="none")
    assert [(f.name, f.tested, f.informational) for f in changed.families[0]] == [("primary", 1, 0), ("monitor", 0, 15)]
    assert [f.name for f in none.families[0]] == ["primary"]
    # Hundreds of counters would not dilute the benchmark's own: its adjusted p-value is the same either way.
    own = [next(r for r in result.rows if r.metric == "bench.ops").heads[0] for result in (changed, none)]
    assert own[0].family_size == own[1].family_size == 1
    assert own[0].p_adjusted == own[1].p_adjusted
    assert {r.family for r in changed.rows if r.monitor} == {"monitor"}
    # --primary decides among the benchmark's own metrics only.
    starred = compare(store, ["base", "head"], primary=["*"])
    assert {r.metric: r.family for r in starred.rows}["proc-vmstat.pgfault"] == "monitor"
    for style in TEXT_STYLES:
        line = next(l for l in render_comparison(changed, style).splitlines() if l.startswith("FDR family")
                    or l.startswith("  FDR family"))
        assert "1 primary metric; 15 monitor metrics (two-sided, minimum effect 5%), a family of their own" in line, style
        line = next(l for l in render_comparison(none, style).splitlines() if "FDR family" in l)
        assert "1 primary metric; 17 monitor metrics left out (--monitors none)" in line, (style, line)


def test_monitors_none_and_all(store):
    none = render_comparison(compare(store, ["base", "head"], monitors="none"), "lkp")
    assert "bench.ops" in none
    assert not any(name in none for name in ("vmstat", "perf-profile", "interrupts", "meminfo", "monitors:"))
    out = render_comparison(compare(store, ["base", "head"], monitors="all"), "lkp")
    assert "  -- monitors: all 15 metrics, 12 changed (--monitors all) --" in out
    for metric in METRICS:
        assert sum(len(l.split()) > 3 and l.split()[3] == metric for l in out.splitlines()) == 1, metric
    # Still grouped: every monitor's rows under its heading; the noise says why the changed view drops it.
    body = section(out, "  -- monitors:", "  FDR family")[1:]
    headings = [l for l in body if l.startswith("  -- ")]
    assert headings == ["  -- vmstat --", "  -- proc-vmstat --", "  -- meminfo --", "  -- interrupts --",
                        "  -- perf-stat --", "  -- perf-profile --"]
    tiny = next(l for l in body if "cycles-pp.tiny" in l)
    assert tiny.endswith("[changed; noise: perf-profile share below 5% on every side]")
    cal = row(body, "interrupts.CAL:Function_call_interrupts.per_s")
    assert "noise: below the floor of 100 events per repetition on every side" in cal  # its total's floor
    cs = row(body, "perf-stat.context-switches.total")
    assert "noise: below the floor of 1 per second on every side" in cs  # its rate's floor
    idle = next(l for l in body if "vmstat.cpu.id" in l)
    assert idle.split() == ["50.00", "0.0%", "50.00", "vmstat.cpu.id"]
    major = row(body, "proc-vmstat.pgmajfault")      # its caveat is a numbered footnote (issue 22)
    mark = re.search(r"([¹²³⁴⁵⁶⁷⁸⁹⁰]+)$", major).group(1)
    assert re.search(rf"^\s*{mark} .*below the 5% minimum effect", out, re.M), out


def test_other_styles_follow_monitors(store):
    for mode in ("changed", "all", "none"):
        result = compare(store, ["base", "head"], monitors=mode)
        for style in TEXT_STYLES:
            out = render_comparison(result, style)
            assert ("proc-vmstat.pgfault" in out) == (mode != "none"), (style, mode)
            assert ("vmstat.cpu.id" in out) == (mode == "all"), (style, mode)
            assert ("cycles-pp.tiny" in out) == (mode == "all"), (style, mode)
            if mode == "changed":
                assert "monitors: 7 of 15 metrics changed, 5 more below the noise floors" in out, style
        doc = json.loads(render_comparison(result, "json"))
        monitors = {m["metric"]: m["monitor"] for m in doc["metrics"]}
        assert len(monitors) == (1 if mode == "none" else 1 + len(METRICS))  # every row kept, whatever is shown
        assert monitors["bench.ops"] is None and doc["monitors"] == mode
        if mode != "none":
            assert monitors["perf-profile.self.cycles-pp.tiny"] == "perf-profile"
            noise = {m["metric"]: m["noise"] for m in doc["metrics"]}
            assert noise["perf-profile.self.cycles-pp.tiny"] == "perf-profile share below 5% on every side"
            assert noise["proc-vmstat.pgfault"] is None and noise["vmstat.cpu.id"] is None
            assert {"operand": "head", "monitor": "perf-profile",
                    "group": "bench(mode=process) perf-profile.self.cycles-pp.new on box"} in doc["monitor_only_in"]
        rows = list(csv.DictReader(io.StringIO(render_comparison(result, "csv"))))
        assert {r["metric"]: r["monitor"] for r in rows} == {m: (v or "") for m, v in monitors.items()}


def test_fail_on_counts(store):
    same = compare(store, ["base", "same"])
    assert not same.regressions_found  # the monitors moved, the benchmark did not

    def hits(result, *globs):
        return sorted(row.metric for _label, row, _cmp in result.fail_on(list(globs)))

    assert hits(same, "proc-vmstat.pgfault*") == ["proc-vmstat.pgfault", "proc-vmstat.pgfault.per_s"]
    assert hits(same, "meminfo.*") == ["meminfo.Dirty"]  # down counts as much as up
    # Unchanged, or changed below the noise floors, the perf-profile share or the 5% effect: no failure.
    assert hits(same, "vmstat.cpu.id", "interrupts.*", "perf-stat.*", "*.tiny", "proc-vmstat.pgmajfault*") == []
    # The benchmark's own directional metric counts when it regressed, not when it improved.
    assert hits(compare(store, ["base", "head"]), "bench.*") == ["bench.ops"]
    assert hits(compare(store, ["head", "base"]), "bench.*") == []


def test_fail_on_cli(cli):
    build(cli.db)
    assert cli("compare", "base", "head", "--fail-on-regression", check=False).returncode == 1  # bench.ops -10%
    # The benchmark did not regress; its monitors moved: --fail-on-regression never counts them.
    same = cli("compare", "base", "same", "--fail-on-regression", "--fail-on", "vmstat.cpu.id", check=False)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "proc-vmstat.pgfault" in same.stdout
    hit = cli("compare", "base", "same", "--fail-on", "proc-vmstat.pgfault", "--style", "json", check=False)
    assert hit.returncode == 1
    assert hit.stderr.strip() == "perflab: --fail-on: proc-vmstat.pgfault changed +50.0% (same vs base)"
    # A glob that matches nothing is a usage error, also when --monitors none dropped what it named.
    assert_one_line_error(cli("compare", "base", "head", "--fail-on", "nosuch.*", check=False), "--fail-on 'nosuch.*'")
    proc = cli("compare", "base", "head", "--fail-on", "vmstat.*", "--monitors", "none", check=False)
    assert proc.returncode == 2
    assert_one_line_error(proc, "--fail-on 'vmstat.*'", "--monitors none")
    bad = cli("compare", "base", "head", "--monitors", "some", check=False)
    assert bad.returncode == 2 and "some" in bad.stderr

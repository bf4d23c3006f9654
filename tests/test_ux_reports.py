"""Issue 22, points 1, 3, 7 and 8: variants side by side, rows named by what tells them apart,
the centre named, plots of a chosen size. Against the golden store (tests/data/golden), through
the installed command; the naming function directly."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest

from conftest import CLI, PERFLAB
from perflab.analysis.naming import common, names

GOLDEN = Path(__file__).parent / "data" / "golden" / "store-export.json"


@pytest.fixture(scope="module")
def cli(tmp_path_factory):
    assert PERFLAB, "the perflab command is not installed in this environment"
    tmp = tmp_path_factory.mktemp("ux")
    c = CLI(tmp / "perflab.db", tmp, tmp / "cache")
    c("import", GOLDEN)
    return c


def _inproc(cli, monkeypatch, capsys, *args) -> tuple[int, str]:
    """`perflab ARGS` on the module's store, called in this process: the plots' matplotlib is imported
    once, not per command (the installed command's --plot path: tests/test_html.py, test_hostile_output.py)."""
    from perflab.cli import main

    monkeypatch.setenv("PERFLAB_DB", str(cli.db))
    capsys.readouterr()
    rc = main([str(a) for a in args])
    return rc, capsys.readouterr().err


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


# -- the naming function --------------------------------------------------------------

def test_names_show_what_differs_and_switches_only_when_they_differ():
    cmd = {"command": "/tmp/h3w/work.sh", "metrics": [], "shell": False}
    assert names([("cmd", cmd)]) == ["cmd command=/tmp/h3w/work.sh"]
    assert names([("cmd", {**cmd, "command": "sleep 0.01"}), ("cmd", {**cmd, "command": "sleep 0.02"})]) == \
        ['cmd command="sleep 0.01"', 'cmd command="sleep 0.02"']
    assert names([("cmd", cmd), ("cmd", {**cmd, "shell": True})]) == \
        ["cmd shell=false", "cmd shell=true"]
    wis = [("will-it-scale", {"nr_task": n, "mode": m, "test": "page_fault1"}) for m in ("process", "thread") for n in (1, 2)]
    assert names(wis, family=False) == ["nr_task=1 mode=process", "nr_task=2 mode=process",
                                        "nr_task=1 mode=thread", "nr_task=2 mode=thread"]
    assert common([p for _, p in wis]) == "test=page_fault1"
    # JSON text (a series' params) reads the same as a dict
    assert names([("hackbench", '{"groups": 4, "loops": 100}')]) == ["hackbench groups=4 loops=100"]


def test_a_long_value_keeps_the_part_that_differs():
    base = "/home/user/src/benchmarks/suite/run-benchmark-{}.sh --iterations 1000 --warm"
    got = names([("cmd", {"command": base.format("alpha")}), ("cmd", {"command": base.format("omega")})])
    assert "alpha" in got[0] and "omega" in got[1] and got[0] != got[1]
    assert all(len(n) < len(base) + 20 for n in got)


# -- the layouts ----------------------------------------------------------------------

def test_compare_layouts_name_rows_without_blobs(cli):
    lkp = cli("compare", "base", "head", "-b", "will-it-scale").stdout
    rows = [l for l in lkp.splitlines() if "will-it-scale.workload" in l]
    assert rows and all(re.match(r"test=\w+ mode=\w+ nr_task=\d+ ", l) for l in rows), rows
    assert not any(l.split()[0].endswith("/") for l in rows)
    mmtests = cli("compare", "base", "head", "--style", "mmtests", "-b", "cmd").stdout
    assert 'cmd command="gzip -1 -c linux.tar"' in mmtests and "//" not in mmtests and "/False" not in mmtests
    bench = cli("compare", "base", "head", "--style", "benchstat").stdout
    assert "time.maximum_resident_set_size [secondary]" in bench          # the metric is never cut
    assert 'cmd command="head -c 64M /dev/zero | gzip -9 > /dev/null": time.elapsed_time' in bench
    assert "…(+" not in bench


def test_detect_names_series_by_what_differs(cli):
    out = cli("detect").stdout
    assert "{" not in out and '"shell"' not in out
    assert "lkp-box1 cmd command=./syscall-loop shell=false time.elapsed_time" in out


# -- point 1: variants side by side ------------------------------------------------------

def test_report_scaling_puts_operands_side_by_side(cli, tmp_path):
    out = cli("report", "scaling", "base", "head").stdout
    table = out.split("page_fault1 processes")[1].split("\n\n")[0].splitlines()
    assert "harmonic mean of the repetitions" in table[0]
    assert table[1].split() == ["tasks", "base", "±%", "eff.", "head", "±%", "eff.", "%change"]
    eight = table[-1].split()
    # the two kernels, not their pool: base 3.52M, head 2.95M ops/s at 8 tasks (pooled: 3.21M)
    assert eight[0] == "8" and eight[1] == "3521309" and eight[4] == "2954276" and eight[-1] == "-16.1%"
    alone = cli("report", "scaling", "base").stdout
    assert alone.startswith("brk1 (ops/s of all tasks, harmonic mean of the repetitions;")
    assert "processes" in alone and "head" not in alone


def test_report_lmbench_is_one_row_per_operand(cli):
    out = cli("report", "lmbench", "base", "head", "gcc-13").stdout
    rows = [l.split()[0] for l in out.splitlines() if l.startswith("6.")]
    assert len(set(rows)) == 3


# -- point 8: pictures ------------------------------------------------------------------------

def test_scaling_plot_size_default_and_option(cli, tmp_path, monkeypatch, capsys):
    assert _inproc(cli, monkeypatch, capsys, "report", "scaling", "base", "head", "--plot", tmp_path / "d.png")[0] == 0
    w, h = _png_size(tmp_path / "d.png")
    assert w >= 1000 and h >= 2 * 450                      # two testcases, one panel each
    assert _inproc(cli, monkeypatch, capsys, "report", "scaling", "base", "--plot", tmp_path / "s.png",
                   "--size", "800x300")[0] == 0
    assert _png_size(tmp_path / "s.png") == (800, 600)
    bad = cli("report", "scaling", "--size", "huge", check=False)
    assert bad.returncode != 0 and len(bad.stderr.strip().splitlines()) == 1 and "--size huge" in bad.stderr


def test_compare_and_detect_plots_take_a_size(cli, tmp_path, monkeypatch, capsys):
    assert _inproc(cli, monkeypatch, capsys, "compare", "base", "head", "-b", "cmd", "--plot", tmp_path / "c.png",
                   "--size", "1200x500")[0] == 0
    w, h = _png_size(tmp_path / "c.png")
    assert 1150 <= w <= 1300 and 450 <= h <= 560          # tight bounding box: labels never clipped
    assert _inproc(cli, monkeypatch, capsys, "detect", "--plot", tmp_path / "d.png")[0] == 0
    assert _png_size(tmp_path / "d.png")[0] >= 1300       # the default is wider than the old 990

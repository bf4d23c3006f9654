"""`perflab report lmbench` and `compare --style lmbench` against stored fixture runs."""

import re

from conftest import assert_one_line_error
from fixtures_lmbench import load

PROCESSES = """\
Processor, Processes - times in microseconds - smaller is better
----------------------------------------------------------------
                              null    null                    open    signal  signal  fork    execve  /bin/sh
kernel                        call    I/O     stat    fstat   close   install handle  process process process
----------------------------- ------- ------- ------- ------- ------- ------- ------- ------- ------- -------
2.6.0-test3                      0.73    1.20    5.89    1.60    7.07    1.99    5.04    1426    3272   13618
2.6.0-test3-gcc-3.3.1            0.74    1.08    4.15    1.56    6.73    2.02    4.28    1397    3146   13238
"""


def table(out: str, title_start: str) -> list[str]:
    lines = out.splitlines()
    i = next(k for k, l in enumerate(lines) if l.startswith(title_start))
    block = []
    for l in lines[i:]:
        if not l:
            break
        block.append(l)
    return block


def columns(dash_line: str) -> list[tuple[int, int]]:
    return [m.span() for m in re.finditer(r"-+", dash_line)]


def test_summary_layout_column_for_column(cli, tmp_path):
    load(cli, tmp_path)
    out = cli("report", "lmbench", "--box", "k6-2").stdout
    assert out.startswith("L M B E N C H  2 . 0   S U M M A R Y\n------------------------------------\n")
    assert "\n".join(table(out, "Processor, Processes")) + "\n" == PROCESSES
    # Every value sits right-aligned in its column of dashes.
    for title in ("File select", "Context switching with 0K", "File create/delete", "*Local* Communication latencies",
                  "*Local* Communication bandwidths", "Memory latencies"):
        block = table(out, title)
        assert re.search(r"(smaller|bigger) is better$", block[0])
        assert block[1] == "-" * len(block[0])
        spans = columns(block[next(i for i, l in enumerate(block) if l.startswith("-----") and i > 1)])
        for row in block[-2:]:
            for m in re.finditer(r"\S+", row[spans[0][1]:]):
                start, end = m.start() + spans[0][1], m.end() + spans[0][1]
                assert any(s <= start and end == e for s, e in spans[1:]), (title, row, m.group())


def test_blank_cells_never_zero_and_unmeasured_tables_left_out(cli, tmp_path):
    load(cli, tmp_path)
    out = cli("report", "lmbench", "--box", "k6-2").stdout
    assert "Context switching with 4K" not in out  # nothing measured
    lat = table(out, "*Local* Communication latencies")
    assert lat[-1] == "2.6.0-test3-gcc-3.3.1           18.16"  # UDP failed: blank, not 0
    assert lat[-2].endswith("379.2") and " 0.00" not in "\n".join(lat)
    mem = table(out, "Memory latencies")
    assert mem[2] == "kernel                        Mhz   L1 $    L2 $    Main mem"
    assert mem[-1] == "2.6.0-test3-gcc-3.3.1           476    4.25   231.1     268.2"
    more = table(out, "*Local* More Communication bandwidths")
    assert more[2:5] == ["                              File    Mmap",
                         "                              open    open",
                         "kernel                        close   close   Bzero"]


def test_operands_pick_rows_in_order(cli, tmp_path):
    load(cli, tmp_path)
    out = cli("report", "lmbench", "gcc-3.3.1", "1").stdout
    rows = table(out, "Processor, Processes")[5:]
    assert rows[0].startswith("2.6.0-test3-gcc-3.3.1 ") and rows[1].startswith("2.6.0-test3 #1 ")
    proc = cli("report", "lmbench", "gcc-3.4", check=False)
    assert_one_line_error(proc, "'gcc-3.4'", "gcc-3.3.1")
    proc = cli("report", "lmbench", check=False)  # this host has no LMbench runs
    assert_one_line_error(proc, "no LMbench runs", "k6-2")


def test_compare_style_lmbench(cli, tmp_path):
    load(cli, tmp_path)
    out = cli("compare", "1", "gcc-3.3.1", "--style", "lmbench").stdout
    procs = table(out, "Processor, Processes")
    assert procs[-2].startswith("#1 ") and procs[-1].startswith("gcc-3.3.1 ")
    assert "1397" in procs[-1]
    assert "Significant changes against #1:" in out
    assert re.search(r"gcc-3.3.1: syscall.stat -29.5% improvement", out)


def test_each_figure_is_the_median_of_its_samples_not_the_mean(cli, tmp_path):
    """Two of five processes at the machine's slow speed (as a busy sibling hyperthread makes
    them on a VM) pull a mean by a third of their gap; the summary prints the median, as
    LMbench prints the median of its tries."""
    import json

    from fixtures_lmbench import export_document

    doc = export_document()
    run = doc["runs"][0]
    run["samples"] = [s for s in run["samples"] if s[0] != "syscall.null"]
    for process, value in enumerate([0.165, 0.166, 0.222, 0.164, 0.223]):
        run["samples"] += [["syscall.null", value, "us", -1, process]] * 5
    doc["runs"] = [run]
    path = tmp_path / "two-speeds.json"
    path.write_text(json.dumps(doc))
    cli("import", path)
    row = table(cli("report", "lmbench", "--box", "k6-2").stdout, "Processor, Processes")[-1]
    assert row.split()[1] == "0.17"   # median 0.166; the mean, 0.188, would print 0.19


def test_six_digit_figures_widen_their_column_and_never_overflow():
    """Issue 44, finding 10: a figure wider than LMbench's column widens it (no 1.2e+05, no two
    figures run together); the headings and dashes follow."""
    from perflab.report.lmbench import render_summary

    # Six significant digits under icount (0.323028: 8 characters in a column of 7), a long
    # fork+/bin/sh in wall time.
    rows = [("6.1.0-56-amd64", {"proc.fork": 123456.0, "proc.exec": 1234567.0, "proc.sh": 123456789.0,
                                "syscall.null": 0.323028, "syscall.stat": 0.325029}),
            ("6.1.0-56-rt-amd64", {"proc.fork": 99.5, "proc.exec": 234567.0, "proc.sh": 12.0, "syscall.null": 0.26,
                                   "syscall.stat": 1.5})]
    for icount in (False, True):
        block = table(render_summary(rows, icount=icount), "Processor, Processes")
        assert "e+" not in "\n".join(block), block
        spans = columns(block[next(i for i, l in enumerate(block) if l.startswith("-----") and i > 1)])
        for row in block[-2:]:
            cells = re.finditer(r"\S+", row[spans[0][1]:])
            for m in cells:
                start, end = m.start() + spans[0][1], m.end() + spans[0][1]
                assert any(s <= start and end == e for s, e in spans[1:]), (row, m.group(), block)
        assert "1234567" in block[-2] and "123456789" in block[-2], block

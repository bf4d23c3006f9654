"""Every figure of the LMbench-class suite: stored metric name, unit, direction,
the program that measures it, the category `--only` selects, and its column in
the LMbench 2.0 summary.

This table is the contract between the C programs (which print the metric
names below as JSON lines), the driver (which stores them) and the summary
report (which lays them out). Definitions of each figure: docs/lmbench.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from perflab.core.model import HIGHER_IS_BETTER, INFORMATIONAL, LOWER_IS_BETTER

US, MBS, NS, MHZ = "us", "MB/s", "ns", "MHz"


@dataclass(frozen=True)
class Figure:
    metric: str          # stored metric name, e.g. "syscall.null"
    program: str         # C program that prints it (a failure is recorded under this name)
    heading: tuple[str, str]   # the two heading lines of its summary column
    unit: str
    direction: int
    width: int = 7       # column width in the summary


@dataclass(frozen=True)
class Table:
    category: str        # name accepted by `perflab run lmbench --only`
    title: str           # summary table title, as LMbench 2.0 prints it
    figures: tuple[Figure, ...]
    label_width: int = 29


def _f(metric, program, h1, h2, unit, direction=LOWER_IS_BETTER, width=7):
    return Figure(metric, program, (h1, h2), unit, direction, width)


CTX_PROCS = (2, 4, 8, 16, 32, 64, 96)
CTX_SIZES_K = (0, 4, 8, 16, 32, 64)
SELECT_COUNTS = (10, 100, 250, 500)
FILE_SIZES_K = (0, 1, 4, 10)


def _ctx_heading(procs: int, k: int) -> tuple[str, str]:
    # LMbench abbreviates "proc" to "prc" where the column would overflow.
    word = "proc" if len(f"{procs}proc/{k}k") <= 9 else "prc"
    return (f"{procs}{word}/{k}k", "ctx swtch")


TABLES: tuple[Table, ...] = (
    Table("processes", "Processor, Processes - times in microseconds - smaller is better", (
        _f("syscall.null", "lat_syscall", "null", "call", US),
        _f("syscall.null_io", "lat_syscall", "null", "I/O", US),
        _f("syscall.stat", "lat_syscall", "", "stat", US),
        _f("syscall.fstat", "lat_syscall", "", "fstat", US),
        _f("syscall.open_close", "lat_syscall", "open", "close", US),
        _f("signal.install", "lat_sig", "signal", "install", US),
        _f("signal.handle", "lat_sig", "signal", "handle", US),
        _f("proc.fork", "lat_proc", "fork", "process", US),
        _f("proc.exec", "lat_proc", "execve", "process", US),
        _f("proc.sh", "lat_proc", "/bin/sh", "process", US),
    )),
    Table("select", "File select - times in microseconds - smaller is better", tuple(
        [_f(f"select.fd{n}", "lat_select", "select", f"{n} fd", US) for n in SELECT_COUNTS]
        + [_f(f"select.tcp{n}", "lat_select", "select", f"{n} tcp", US) for n in SELECT_COUNTS]
    )),
    *(
        Table("ctx", f"Context switching with {k}K - times in microseconds - smaller is better", tuple(
            _f(f"ctx.{p}p_{k}k", "lat_ctx", *_ctx_heading(p, k), US, width=9) for p in CTX_PROCS
        ))
        for k in CTX_SIZES_K
    ),
    Table("filevm", "File create/delete and VM system latencies in microseconds - smaller is better", tuple(
        [f for k in FILE_SIZES_K for f in (
            _f(f"fs.create_{k}k", "lat_fs", f"{k}K", "Create", US),
            _f(f"fs.delete_{k}k", "lat_fs", f"{k}K", "Delete", US))]
        + [_f("vm.mmap", "lat_vm", "Mmap", "Latency", US),
           _f("vm.prot_fault", "lat_vm", "Prot", "Fault", US, width=6),
           _f("vm.page_fault", "lat_vm", "Page", "Fault", US, width=6)]
    ), label_width=30),
    Table("latency", "*Local* Communication latencies in microseconds - smaller is better", (
        _f("lat.pipe", "lat_ipc", "", "Pipe", US),
        _f("lat.unix", "lat_ipc", "", "AF/Unix", US),
        _f("lat.udp", "lat_ipc", "", "UDP", US),
        _f("lat.tcp", "lat_ipc", "", "TCP", US),
        _f("lat.tcp_connect", "lat_ipc", "", "TCPconn", US),
    )),
    Table("bandwidth", "*Local* Communication bandwidths in MB/s - bigger is better", (
        _f("bw.pipe", "bw_ipc", "", "Pipe", MBS, HIGHER_IS_BETTER),
        _f("bw.unix", "bw_ipc", "", "AF/Unix", MBS, HIGHER_IS_BETTER),
        _f("bw.tcp", "bw_ipc", "", "TCP", MBS, HIGHER_IS_BETTER),
        _f("bw.file_reread", "bw_file", "File", "reread", MBS, HIGHER_IS_BETTER),
        _f("bw.mmap_reread", "bw_file", "Mmap", "reread", MBS, HIGHER_IS_BETTER),
        _f("bw.bcopy_libc", "bw_mem", "Bcopy", "(libc)", MBS, HIGHER_IS_BETTER),
        _f("bw.bcopy_hand", "bw_mem", "Bcopy", "(hand)", MBS, HIGHER_IS_BETTER),
        _f("bw.mem_read", "bw_mem", "Memory", "read", MBS, HIGHER_IS_BETTER),
        _f("bw.mem_write", "bw_mem", "Memory", "write", MBS, HIGHER_IS_BETTER),
    )),
    Table("bandwidth", "*Local* More Communication bandwidths in MB/s - bigger is better", (
        _f("bw.file_open_close", "bw_file", "File", "open", MBS, HIGHER_IS_BETTER),
        _f("bw.mmap_open_close", "bw_file", "Mmap", "open", MBS, HIGHER_IS_BETTER),
        _f("bw.bzero", "bw_mem", "", "Bzero", MBS, HIGHER_IS_BETTER),
    )),
    Table("memory", "Memory latencies in nanoseconds - smaller is better", (
        _f("mem.mhz", "lat_mem", "", "Mhz", MHZ, INFORMATIONAL, width=5),
        _f("mem.l1", "lat_mem", "", "L1 $", NS),
        _f("mem.l2", "lat_mem", "", "L2 $", NS),
        _f("mem.main", "lat_mem", "", "Main mem", NS, width=9),
    )),
)

# The "More bandwidths" table's open/close columns carry a third heading line
# in LMbench ("close"); kept here so the report can print it.
THIRD_HEADING = {"bw.file_open_close": "close", "bw.mmap_open_close": "close"}

# Figures measured and stored with the suite but not columns of the LMbench
# 2.0 summary (so `report lmbench` keeps LMbench's layout); `compare` and
# `show` list them.  category: the `--only` category that runs them.
EXTRA_FIGURES: tuple[tuple[str, Figure], ...] = (
    # a random walk: the load latency no prefetcher hides (LMbench 3: lat_mem_rd -t)
    ("memory", _f("mem.main_random", "lat_mem", "Rand", "mem", NS, width=9)),
)

FIGURES: dict[str, Figure] = {f.metric: f for t in TABLES for f in t.figures}
FIGURES.update({f.metric: f for _, f in EXTRA_FIGURES})
CATEGORIES: tuple[str, ...] = tuple(dict.fromkeys(t.category for t in TABLES))
def _in_category() -> list[tuple[str, Figure]]:
    """(category, figure) of every figure, in suite order: the tables', then the extras."""
    return [(t.category, f) for t in TABLES for f in t.figures] + list(EXTRA_FIGURES)


PROGRAMS: tuple[str, ...] = tuple(dict.fromkeys(f.program for _, f in _in_category()))


def programs_of(categories: list[str] | tuple[str, ...]) -> list[str]:
    """Programs needed to fill the given categories, in suite order."""
    wanted = set(categories)
    return list(dict.fromkeys(f.program for c, f in _in_category() if c in wanted))


def metrics_of_program(program: str) -> list[str]:
    return [m for m, f in FIGURES.items() if f.program == program]

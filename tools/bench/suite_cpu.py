"""Where the suite's CPU goes, test by test: a pytest plugin (issue 47, item 2).

    PYTHONPATH=tools/bench .venv/bin/python -m pytest -p suite_cpu -n 3 --dist worksteal -m "..." [ARGS]

Each test's CPU seconds are its worker's own (user + system) plus those of the processes it
waited for (`perflab` commands, compilers, QEMU: RUSAGE_CHILDREN), taken around the test's
setup, call and teardown; a module fixture's cost falls on the test that made it. At the end
the controller prints the files by CPU and the tests with the most, and the sum. On a shared
machine the wall time of a test says how loaded the machine was; its CPU says what it costs:
with both cores busy for the whole run (the full suite is), the suite's wall time is its CPU
over the cores, so CPU is what a cut must save. $SUITE_CPU_TOP: how many tests to list (30).
$SUITE_CPU_TSV: keep the rows (nodeid, own, children) in this file too.
"""

from __future__ import annotations

import collections
import os
import resource
import tempfile

import pytest

_rows: list[tuple[str, float, float]] = []


def _cpu() -> tuple[float, float]:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    before = _cpu()
    yield
    after = _cpu()
    row = (item.nodeid, after[0] - before[0], after[1] - before[1])
    if hasattr(item.config, "workeroutput"):       # an xdist worker: sent to the controller at its end
        item.config.workeroutput.setdefault("suite_cpu", []).append(row)
    else:
        _rows.append(row)


def pytest_testnodedown(node, error):
    _rows.extend(tuple(r) for r in getattr(node, "workeroutput", {}).get("suite_cpu", ()))


def pytest_terminal_summary(terminalreporter):
    if hasattr(terminalreporter.config, "workeroutput") or not _rows:
        return
    write = terminalreporter.write_line
    by_file: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for nodeid, own, children in _rows:
        f = by_file[nodeid.split("::")[0]]
        f[0] += own
        f[1] += children
        f[2] += 1
    total = sum(own + children for _, own, children in _rows)
    write(f"suite_cpu: {len(_rows)} tests, {total:.1f} s of CPU (workers' own + the processes they waited for)")
    write(f"{'CPU s':>8} {'own':>7} {'children':>8} {'tests':>5}  file")
    for name, (own, children, n) in sorted(by_file.items(), key=lambda kv: -(kv[1][0] + kv[1][1])):
        write(f"{own + children:8.1f} {own:7.1f} {children:8.1f} {n:5d}  {name}")
    write(f"{'CPU s':>8}  test (the {int(os.environ.get('SUITE_CPU_TOP', '30'))} costliest)")
    for nodeid, own, children in sorted(_rows, key=lambda r: -(r[1] + r[2]))[:int(os.environ.get("SUITE_CPU_TOP", "30"))]:
        write(f"{own + children:8.1f}  {nodeid}")
    keep = os.environ.get("SUITE_CPU_TSV")
    if keep:
        fd, scratch = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(keep)) or ".")
        with os.fdopen(fd, "w") as f:
            f.writelines(f"{nodeid}\t{own:.3f}\t{children:.3f}\n" for nodeid, own, children in _rows)
        os.replace(scratch, keep)

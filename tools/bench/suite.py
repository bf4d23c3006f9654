#!/usr/bin/env python3
"""The test suite's time against its budgets (issue 47), and where its CPU goes.

Budgets (this 2-core machine, quiet):
  the fast lane (`sh tools/test.sh --fast`)                 60 s of pytest
  the whole suite from a fresh clone (`CI=true bash .ci/run`)  6 min, install included

    .venv/bin/python tools/bench/suite.py [--full] [--durations N] [PYTEST ARGS...]

Runs the lane as tools/test.sh runs it (the same markers and workers), with every `perflab`
process the tests start logging its CPU time (a wrapper of the `perflab` entry point written for
the run and removed after; tests/conftest.py starts $PERFLAB_TEST_COMMAND), and prints: the wall time and its ratio to the budget, the CPU time (user +
system of pytest and everything it waited for), the load average before and after, the
`perflab` subcommands by CPU and the test files by the CPU of the `perflab` processes they
started. Wall time means little on a busy machine: compare CPU, and re-measure the wall time on
a quiet one. The reading commands a test runs through the `cli` fixture (tests/conftest.py,
IN_PROCESS: log, show, compare, report, ...) run in the test's process, not as `perflab`
processes: the per-command table counts the others; their CPU is in the tests' own. --full runs the whole default lane (pytest only: the install and the kernels'
fetch, ~1 min from a fresh clone, come on top of it).

It also prints the test files by all the CPU their tests cost: the test's own process and every
process it waited for (`perflab`, and what those started: compilers, git, benchmarks), measured
around each test by a small plugin written for the run; what no test accounts for is pytest's
collection and the workers' start. Last, how busy the cores were each second (/proc/stat): the
stretches they were not, with the tests running then, and the long tests that mostly wait (CPU
under 0.4 of their wall) which tests/conftest.py's WAITING_TESTS does not name yet: on a CPU-bound
suite a second the cores are not busy is a second of wall time no CPU cut buys back.
"""

from __future__ import annotations

import argparse
import collections
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FAST_MARKS = "not slow and not root and not postgres and not redis and not browser and not vm and not tool and not box"
BUDGET_FAST = 60.0
BUDGET_FULL = 6 * 60.0

# The `perflab` the tests find (tests/conftest.py: beside sys.executable), wrapped to log each
# process's subcommand, test and CPU seconds at exit (tests/conftest.py runs $PERFLAB_TEST_COMMAND).
WRAPPER = """#!{python}
import atexit, os, resource, sys
def _log():
    own = resource.getrusage(resource.RUSAGE_SELF)
    with open({log!r}, "a") as f:
        f.write("%s\\t%s\\t%.4f\\n" % (os.environ.get("PYTEST_CURRENT_TEST", "-").split(" ")[0],
                                     sys.argv[1] if len(sys.argv) > 1 else "", own.ru_utime + own.ru_stime))
atexit.register(_log)
from perflab.cli import entry
sys.exit(entry())
"""

# A pytest plugin (loaded with -p in every worker): each test's CPU, its process's and that of every
# process it waited for, appended to a log as "nodeid<TAB>seconds".
PLUGIN = """import os, resource, time
import pytest
def _cpu():
    return sum(u.ru_utime + u.ru_stime for u in (resource.getrusage(resource.RUSAGE_SELF),
                                                 resource.getrusage(resource.RUSAGE_CHILDREN)))
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    start, began = _cpu(), time.time()
    yield
    with open({log!r}, "a") as f:
        f.write("%s\\t%.4f\\t%.2f\\t%.2f\\n" % (item.nodeid, _cpu() - start, began, time.time()))
"""
# Below this share of both cores busy, a second of the run counts as one the cores were not used.
BUSY = 85
# A test mostly waits when its CPU (its process's and every process it waited for) is under this
# share of its wall time: tests/conftest.py's WAITING_TESTS, one lane of workers beyond the cores.
WAITS = 0.4


class CoresBusy(threading.Thread):
    """The share of all CPUs busy, each second, from /proc/stat (where it can be read)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.seconds: list[tuple[float, int]] = []      # (time.time() at the second's end, % busy)
        self.done = threading.Event()

    @staticmethod
    def _times() -> tuple[int, int] | None:
        try:
            with open("/proc/stat") as f:
                fields = [int(x) for x in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)      # idle + iowait
        return sum(fields[:8]) - idle, idle

    def run(self) -> None:
        before = self._times()
        while before is not None and not self.done.wait(1.0):
            now = self._times()
            if now is None:
                return
            busy, idle = now[0] - before[0], now[1] - before[1]
            self.seconds.append((time.time(), round(100 * busy / max(1, busy + idle))))
            before = now


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="the whole default lane, not the fast one")
    ap.add_argument("--durations", type=int, default=30, help="pytest's slowest N tests (default 30)")
    args, rest = ap.parse_known_args()

    scratch = tempfile.mkdtemp(prefix="perflab-suite-bench-")
    log = os.path.join(scratch, "calls.tsv")
    wrapper = os.path.join(scratch, "perflab")
    with open(wrapper, "w") as f:
        f.write(WRAPPER.format(python=sys.executable, log=log))
    os.chmod(wrapper, 0o755)
    per_test = os.path.join(scratch, "tests.tsv")
    with open(os.path.join(scratch, "perflab_suite_cpu.py"), "w") as f:
        f.write(PLUGIN.format(log=per_test))

    if args.full:
        argv = ["-n", os.environ.get("PERFLAB_TEST_WORKERS", "3"), "--dist", "worksteal", "-m", "not box"]
        env = dict(os.environ, PERFLAB_TEST_FULL="1")
        budget, what = BUDGET_FULL, "the whole suite (pytest only)"
    else:
        argv = ["-n", "2", "-m", FAST_MARKS]
        env = dict(os.environ)
        budget, what = BUDGET_FAST, "the fast lane"
    env["PERFLAB_TEST_COMMAND"] = wrapper
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (scratch, env.get("PYTHONPATH"))))
    load_before = os.getloadavg()
    cores = CoresBusy()
    cores.start()
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "perflab_suite_cpu",
                           f"--durations={args.durations}", *argv, *rest], cwd=ROOT, env=env)
    wall = time.monotonic() - start
    cores.done.set()
    cores.join()
    load_after = os.getloadavg()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = children.ru_utime + children.ru_stime

    by_command: dict[str, list[float]] = collections.defaultdict(list)
    by_file: dict[str, list[float]] = collections.defaultdict(list)
    if os.path.exists(log):
        with open(log) as f:
            for line in f:
                test, command, seconds = line.rstrip("\n").split("\t")
                by_command[command].append(float(seconds))
                by_file[test.split("::")[0]].append(float(seconds))
    by_test_file: dict[str, float] = collections.defaultdict(float)
    tests: list[tuple[str, float, float, float]] = []      # nodeid, CPU, began, ended
    if os.path.exists(per_test):
        with open(per_test) as f:
            for line in f:
                nodeid, seconds, began, ended = line.rstrip("\n").split("\t")
                by_test_file[nodeid.split("::")[0]] += float(seconds)
                tests.append((nodeid, float(seconds), float(began), float(ended)))
    shutil.rmtree(scratch, ignore_errors=True)

    print(f"\n{what}: {wall:.1f} s wall (budget {budget:.0f} s: ratio {wall / budget:.2f}), "
          f"{cpu:.1f} s CPU (user+sys, pytest and its children); exit {proc.returncode}")
    print("load average before %.2f %.2f %.2f, after %.2f %.2f %.2f" % (*load_before, *load_after))
    total = sum(sum(v) for v in by_command.values())
    print(f"\n`perflab` processes: {sum(len(v) for v in by_command.values())}, {total:.1f} s CPU")
    for command, values in sorted(by_command.items(), key=lambda kv: -sum(kv[1]))[:12]:
        print(f"  {command or '(none)':<14} {len(values):5d} processes {sum(values):8.1f} s CPU "
              f"{sum(values) / len(values):6.3f} s each")
    print("\ntest files by the CPU of the `perflab` processes they started:")
    for name, values in sorted(by_file.items(), key=lambda kv: -sum(kv[1]))[:15]:
        print(f"  {name:<48} {len(values):5d} processes {sum(values):8.1f} s CPU")
    in_tests = sum(by_test_file.values())
    print(f"\ntest files by all their tests' CPU (their process and every process they waited for): "
          f"{in_tests:.1f} s in tests, {cpu - in_tests:.1f} s outside any (collection, the workers' start)")
    for name, seconds in sorted(by_test_file.items(), key=lambda kv: -kv[1])[:15]:
        perflab = sum(by_file.get(name, ()))
        print(f"  {name:<48} {seconds:8.1f} s CPU, {perflab:6.1f} s of it in `perflab` processes")
    print_cores(cores.seconds, tests)
    return proc.returncode


def print_cores(seconds: list[tuple[float, int]], tests: list[tuple[str, float, float, float]]) -> None:
    """How busy the cores were, the stretches they were not (with the tests running then), and
    the long tests that mostly wait but are not in tests/conftest.py's WAITING_TESTS."""
    if not seconds:
        print("\nthe cores' use: /proc/stat cannot be read here")
        return
    low = [(t, b) for t, b in seconds if b < BUSY]
    print(f"\nthe cores' use (/proc/stat each second): {sum(b for _, b in seconds) / len(seconds):.0f}% busy "
          f"on average, {len(low)} of {len(seconds)} s under {BUSY}%, lost {sum(100 - b for _, b in low) / 100:.1f} "
          f"s of the cores' time in them")
    stretches: list[list[tuple[float, int]]] = []
    for t, b in low:
        if stretches and t - stretches[-1][-1][0] <= 2.5:
            stretches[-1].append((t, b))
        else:
            stretches.append([(t, b)])
    first = seconds[0][0] - 1
    for stretch in sorted(stretches, key=lambda st: -sum(100 - b for _, b in st))[:6]:
        began, ended = stretch[0][0] - 1, stretch[-1][0]
        running = [(n, c / max(e - s, 1e-3)) for n, c, s, e in tests if s < ended and e > began and e - s >= 2]
        shown = ", ".join(f"{n.split('::')[-1][:60]} (CPU/wall {r:.2f})" for n, r in running[:4]) or "no test of 2 s or more"
        print(f"  {began - first:5.0f}-{ended - first:.0f} s, {sum(b for _, b in stretch) / len(stretch):.0f}% busy: {shown}")
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    try:
        import conftest
        named = set(conftest.WAITING_TESTS)
    except Exception:           # noqa: BLE001 - a report, not a check: without it, every waiting test is listed
        named = set()
    waiting = [(n, c, e - s) for n, c, s, e in tests if e - s >= 4 and c < WAITS * (e - s)
               and n.removeprefix("tests/") not in named]
    if waiting:
        print(f"long tests whose CPU is under {WAITS} of their wall, not in WAITING_TESTS:")
        for n, c, w in sorted(waiting, key=lambda x: -x[2])[:10]:
            print(f"  {n.removeprefix('tests/')[:110]}: {w:.1f} s wall, {c:.1f} s CPU")


if __name__ == "__main__":
    sys.exit(main())

"""The will-it-scale-class C programs, run directly: every testcase at 1 and 2
tasks in both modes produces the documented JSON lines with positive ops per
task and leaves no file behind; bad options exit 2 with one line; binding,
THP and ASLR are applied and reported; a failing task fails the run; SIGTERM
cleans up; kill -9 of the harness leaves no task running."""

from __future__ import annotations

import ctypes
import itertools
import json
import os
import resource
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from perflab.core import cbuild
from perflab.benchmarks.will_it_scale.family import parse_output
from perflab.benchmarks.will_it_scale import testcases as wis
from services import until

NAMES = sorted(wis.TESTCASES)
ADDR_NO_RANDOMIZE = 0x0040000
RUN_ARGS = ("-d", "0.4", "-w", "0", "-i", "0.2")
RUN_ENDS = (0.2, 0.4)          # where RUN_ARGS' intervals end, in seconds from the start
# How late the harness may wake for an interval's end and still pass: generous, as a loaded
# machine only ever delays the wake-up (the end is never early: an absolute CLOCK_MONOTONIC sleep).
LATE = 1.0


def allowed_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


class Binaries(dict):
    """Testcase name -> its binary, compiled by cbuild when a test first asks for it, into
    the session's shared compiler cache (conftest.shared_cache: all workers, and the `perflab`
    runs of other files that build the same testcases with the same flags, take one binary).
    Not all up front: under pytest -n each worker asks only for the testcases its own tests run."""

    def __init__(self, cache: Path):
        super().__init__()
        self.cache = cache

    def __missing__(self, name: str) -> Path:
        with pytest.MonkeyPatch.context() as env:
            env.setenv("XDG_CACHE_HOME", str(self.cache))
            self[name] = cbuild.build(name, wis.SOURCE_DIR, flags=wis.BUILD_FLAGS, libs=wis.BUILD_LIBS)
        return self[name]


@pytest.fixture(scope="module")
def binaries(shared_cache) -> Binaries:
    return Binaries(shared_cache)


def run_points(binary: Path, name: str, root: Path) -> dict[tuple[str, int], tuple]:
    """One testcase in both modes at 1 and 2 tasks for RUN_ARGS' duration, as many at a time
    as there are allowed CPUs: (mode, tasks) -> (exit status, stdout, stderr, files left).

    Each test runs its own testcase's four programs (under pytest -n the workers share the
    testcases out instead of each running all of them), and never more programs at once
    than CPUs: a dozen programs pinned to the same CPUs could starve one task of all its
    ops for the whole run (seen: page_fault2, page_fault3 and pthread_mutex1 tasks with 0 ops,
    4 to 12 programs at a time per pytest worker beside two busy loops)."""

    def run(point):
        mode, tasks = point
        files = root / f"{name}-{mode}-{tasks}"
        files.mkdir()
        proc = subprocess.run([binary, "-m", mode, "-n", str(tasks), *RUN_ARGS, "-D", str(files)],
                              capture_output=True, text=True, timeout=60)
        return point, (proc.returncode, proc.stdout, proc.stderr, sorted(os.listdir(files)))

    points = [(mode, tasks) for mode in wis.MODES for tasks in (1, 2)]
    with ThreadPoolExecutor(max_workers=len(allowed_cpus())) as pool:
        return dict(pool.map(run, points))


def events(stdout: str) -> list[dict]:
    """The harness's metric lines as its events: each line's keys after metric, value and unit."""
    return [{k: v for k, v in json.loads(line).items() if k not in ("metric", "value", "unit")}
            for line in stdout.splitlines()]


def test_every_testcase_has_a_source_and_a_description():
    sources = {p.stem for p in wis.SOURCE_DIR.glob("*.c")}
    assert sources == set(wis.TESTCASES)
    assert all(desc.strip() and "\n" not in desc for desc in wis.TESTCASES.values())
    assert wis.PARTNERED <= set(wis.TESTCASES) and wis.THP_ADVISED <= set(wis.TESTCASES)


@pytest.mark.parametrize("name", NAMES)
def test_testcase_runs_in_both_modes_at_1_and_2_tasks(binaries, tmp_path, name):
    cpus = allowed_cpus()
    runs = run_points(binaries[name], name, tmp_path)
    for mode in wis.MODES:
        for tasks in (1, 2):
            rc, stdout, stderr, left = runs[(mode, tasks)]
            where = f"{name} -m {mode} -n {tasks}"
            assert rc == 0, f"{where}: exit {rc}: {stderr}"
            assert stderr == "", where
            assert left == [], f"{where} left files behind: {left}"
            lines = events(stdout)
            start, intervals, end = lines[0], lines[1:-1], lines[-1]
            assert start["event"] == "start" and end == {"event": "end"}, where
            assert (start["testcase"], start["mode"], start["tasks"]) == (name, mode, tasks)
            assert start["bind"] is True and start["thp"] == "system"
            assert start["cpus"] == [cpus[i % len(cpus)] for i in range(tasks)]
            assert isinstance(start["aslr"], bool)
            assert start["partners"] == (tasks if name in wis.PARTNERED else 0)
            assert len(intervals) == len(RUN_ENDS), where
            assert_intervals_end_on_time(intervals, RUN_ENDS, where)
            totals = [0] * tasks
            for iv in intervals:
                assert iv["event"] == "interval" and iv["warmup"] is False
                assert len(iv["ops"]) == tasks
                totals = [t + n for t, n in zip(totals, iv["ops"])]
            assert all(t > 0 for t in totals), f"{where}: ops per task {totals}"
            # and the family's parser (the runner's view of the same output) agrees
            per_task, workload = parse_output(name, mode, tasks, stdout)
            assert per_task.metric == f"will-it-scale.per_{mode}_ops" and per_task.value > 0
            assert workload.value == pytest.approx(per_task.value * tasks)


def assert_intervals_end_on_time(intervals: list[dict], ends: tuple[float, ...], where: str = "") -> None:
    """The intervals' elapsed times add up to each scheduled end (seconds from the start), and
    no more than LATE past it.

    The harness sleeps until fixed offsets from its start (absolute CLOCK_MONOTONIC), so the
    k-th interval ends at or after its offset, never before: a late wake-up (a loaded machine)
    lengthens that interval and shortens the next by as much.  So the running sum is bounded
    tightly from below (less only the rounding to whole microseconds) and generously from
    above; a single interval's length is not (it is short by how late its start was)."""
    elapsed = [iv["elapsed"] for iv in intervals]
    for k, (done, end) in enumerate(zip(itertools.accumulate(elapsed), ends), 1):
        assert end - k * 1e-6 <= done < end + LATE, f"{where}: interval {k} ends at {done} s, due at {end} s: {elapsed}"


def run_until_start(binary: Path, *args, **kw) -> tuple[subprocess.Popen, dict]:
    proc = subprocess.Popen([binary, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    line = proc.stdout.readline()
    assert line, proc.stderr.read()
    return proc, json.loads(line)


def children_of(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                status = Path(f"/proc/{entry}/status").read_text()
            except OSError:
                continue
            if f"\nPPid:\t{pid}\n" in status:
                found.append(int(entry))
    return found


def status_field(path: str, field: str) -> str | None:
    for line in Path(path).read_text().splitlines():
        if line.startswith(field + ":"):
            return line.split(":", 1)[1].strip()
    return None


def running(pid: int) -> bool:
    try:
        return status_field(f"/proc/{pid}/status", "State")[0] not in "ZX"
    except (OSError, TypeError):
        return False


def test_warmup_intervals_are_flagged_and_cover_the_warmup(binaries):
    proc = subprocess.run([binaries["getppid1"], "-w", "0.5", "-d", "0.5", "-i", "0.25"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    intervals = [e for e in events(proc.stdout) if e["event"] == "interval"]
    assert [e["warmup"] for e in intervals] == [True, True, False, False]
    # the warm-up intervals end at 0.25 and 0.5 s (-w 0.5: together they cover it), the measured
    # ones at 0.75 and 1 s; each end is never early and at most LATE late
    assert_intervals_end_on_time(intervals, (0.25, 0.5, 0.75, 1.0))


@pytest.mark.parametrize("args, names", [
    (["-n", "0"], ["-n", "'0'"]),
    (["-n", "two"], ["-n", "'two'"]),
    (["-m", "fibre"], ["-m", "'fibre'"]),
    (["-d", "-1"], ["-d", "'-1'"]),
    (["-d", "nan"], ["-d", "'nan'"]),
    (["-w", "inf"], ["-w", "'inf'"]),
    (["-i", "0"], ["-i", "'0'"]),
    (["-H", "sometimes"], ["-H", "'sometimes'"]),
    (["-D", "/nonexistent/dir"], ["-D", "/nonexistent/dir"]),
    (["-q"], ["-q"]),
    (["-n"], ["-n", "missing"]),
    (["stray"], ["'stray'"]),
])
def test_bad_option_exits_2_with_one_line(binaries, args, names):
    proc = subprocess.run([binaries["lseek1"], *args], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("lseek1: ") and all(n in lines[0] for n in names), lines[0]


def test_kill_9_of_the_harness_leaves_no_task_running(binaries):
    proc, start = run_until_start(binaries["context_switch1"], "-m", "process", "-n", "2", "-d", "60", "-w", "0")
    kids = children_of(proc.pid)
    assert len(kids) == 4, kids      # two tasks and their partners
    proc.kill()
    proc.wait(timeout=10)
    # A poll: a loaded machine may take a while to deliver the kills.
    until("the tasks killed", lambda: not [k for k in kids if running(k)], 30, step=0.02,
          show=lambda: [k for k in kids if running(k)])


@pytest.mark.parametrize("mode", wis.MODES)
def test_sigterm_stops_the_tasks_and_removes_the_files(binaries, tmp_path, mode):
    proc, start = run_until_start(binaries["unlink1"], "-m", mode, "-n", "2", "-d", "60", "-w", "0",
                                  "-D", str(tmp_path))
    kids = children_of(proc.pid)
    time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == -signal.SIGTERM
    assert os.listdir(tmp_path) == []
    assert not [k for k in kids if running(k)]


@pytest.mark.parametrize("mode", wis.MODES)
def test_tasks_are_bound_and_thp_never_applies_to_them(binaries, tmp_path, mode):
    # -d 60: the tasks must still be there when /proc is read (the run is killed below)
    proc, start = run_until_start(binaries["page_fault1"], "-m", mode, "-n", "2", "-d", "60", "-w", "0",
                                  "-H", "never")
    try:
        cpus = allowed_cpus()
        assert start["thp"] == "never" and start["cpus"] == [cpus[0], cpus[1 % len(cpus)]]
        if mode == "process":
            tasks = [f"/proc/{k}/status" for k in children_of(proc.pid)]
        else:
            tasks = [f"/proc/{proc.pid}/task/{t}/status" for t in os.listdir(f"/proc/{proc.pid}/task")
                     if int(t) != proc.pid]
        assert len(tasks) == 2
        bound = sorted(status_field(path, "Cpus_allowed_list") for path in tasks)
        assert bound == sorted(str(c) for c in start["cpus"])
        if status_field(tasks[0], "THP_enabled") is not None:
            assert {status_field(path, "THP_enabled") for path in tasks} == {"0"}
    finally:
        proc.kill()
        proc.wait()


def test_unbound_tasks_keep_the_harness_cpus(binaries):
    # -d 60: the tasks must still be there when /proc is read (the run is killed below)
    proc, start = run_until_start(binaries["getppid1"], "-n", "2", "-d", "60", "-w", "0", "-B")
    try:
        assert start["bind"] is False and start["cpus"] is None
        assert start["allowed_cpus"] == allowed_cpus()
        kids = children_of(proc.pid)
        assert len(kids) == 2, kids
        for kid in kids:
            assert status_field(f"/proc/{kid}/status", "Cpus_allowed_list") == \
                status_field(f"/proc/{proc.pid}/status", "Cpus_allowed_list")
    finally:
        proc.kill()
        proc.wait()


def no_aslr():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.personality(ctypes.c_ulong(libc.personality(ctypes.c_ulong(0xffffffff)) | ADDR_NO_RANDOMIZE))


def test_aslr_is_reported_as_in_effect(binaries):
    args = [binaries["getppid1"], "-d", "0.1", "-w", "0", "-i", "0.1"]
    off = subprocess.run(args, capture_output=True, text=True, timeout=30, preexec_fn=no_aslr)
    assert events(off.stdout)[0]["aslr"] is False
    system = Path("/proc/sys/kernel/randomize_va_space").read_text().strip() != "0"
    on = subprocess.run(args, capture_output=True, text=True, timeout=30)
    assert events(on.stdout)[0]["aslr"] is system


def small_address_space():
    resource.setrlimit(resource.RLIMIT_AS, (96 << 20, 96 << 20))


@pytest.mark.parametrize("mode", wis.MODES)
def test_a_failing_task_fails_the_run_and_cleans_up(binaries, tmp_path, mode):
    # a 128 MB mapping cannot fit in 96 MB of address space: the task's mmap fails
    proc = subprocess.run([binaries["page_fault2"], "-m", mode, "-n", "2", "-d", "5", "-w", "0",
                           "-D", str(tmp_path)], capture_output=True, text=True, timeout=30,
                          preexec_fn=small_address_space)
    assert proc.returncode == 1
    assert "page_fault2: task " in proc.stderr and "mmap" in proc.stderr, proc.stderr
    assert '"event": "end"' not in proc.stdout
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("policy", ["always", "madvise"])
def test_thp_policy_is_applied_and_recorded(binaries, policy):
    proc = subprocess.run([binaries["page_fault1"], "-m", "thread", "-H", policy, "-d", "0.3", "-w", "0",
                           "-i", "0.3"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    lines = events(proc.stdout)
    assert lines[0]["thp"] == policy and lines[0]["thp_system"]
    assert sum(lines[1]["ops"]) > 0


def test_ops_mode_fits_one_measured_interval_to_the_operations(binaries):
    """-N (the icount sample): one measured interval, its length fitted from the warm-up's rate
    to about N operations (at most -d), its elapsed time to the nanosecond."""
    proc = subprocess.run([binaries["getppid1"], "-w", "0.05", "-d", "5", "-N", "20000"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    got = events(proc.stdout)
    assert got[0]["ops_target"] == 20000
    measured = [e for e in got if e["event"] == "interval" and not e["warmup"]]
    assert len(measured) == 1 and len(measured[0]["ops"]) == 1
    # its length is fitted (the count and the time are the machine's: a busy CPU may give the
    # task none of it, so only the shape is checked here; tests/test_vm_runs.py checks the
    # figure under icount, where the guest's clock counts its instructions); its end is planned at
    # most -d after its start, and a loaded machine only ever wakes the harness late (LATE): seen
    # in CI, 5.003 s
    assert 0 < measured[0]["elapsed"] <= 5 + LATE and measured[0]["ops"][0] >= 0
    assert got[-1]["event"] == "end"
    proc = subprocess.run([binaries["getppid1"], "-w", "0", "-N", "100"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "-N" in proc.stderr


@pytest.mark.parametrize("sized", [True, False])
def test_a_window_sized_in_work_wakes_at_its_own_deadline(binaries, sized):
    """-N: the harness's timer slack is 1 ns, so its wake-ups that bound the measured part come at
    their deadlines and not at another timer's within 50 us (under icount, a timer whose phase
    follows the host: docs/vm.md, insn-profile); its tasks, and the harness without -N, keep 50 us.
    The runs last until stopped (-d 1000), so what is read does not depend on the machine's speed."""
    args = ["-w", "0.05", "-d", "1000"] + (["-N", str(1 << 49)] if sized else ["-i", "1000"])
    proc = subprocess.Popen([binaries["getppid1"], *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert json.loads(proc.stdout.readline())["event"] == "start"
        harness = Path(f"/proc/{proc.pid}")
        (task,) = (harness / "task" / str(proc.pid) / "children").read_text().split()
        want = 1 if sized else 50_000
        for _ in range(6000):        # the harness sets it just after this line: wait for that, not a time
            if int((harness / "timerslack_ns").read_text()) == want:
                break
            time.sleep(0.01)
        assert int((harness / "timerslack_ns").read_text()) == want
        assert int(Path(f"/proc/{task}/timerslack_ns").read_text()) == 50_000
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGTERM      # stopped as SIGTERM stops it (above)


@pytest.mark.parametrize("mode, tasks", [("process", 1), ("thread", 2)])
def test_a_cycling_testcase_measures_its_second_whole_cycle_with_ops_mode(binaries, mode, tasks):
    """page_fault1's loop maps 128 MB, faults every page and unmaps: with -N its sample is each
    task's second cycle (the first is the warm-up), timed by the task, so it holds one unmap."""
    proc = subprocess.run([binaries["page_fault1"], "-m", mode, "-n", str(tasks), "-w", "0.01", "-N", "20000"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    intervals = [e for e in events(proc.stdout) if e["event"] == "interval"]
    pages = (128 << 20) // os.sysconf("SC_PAGE_SIZE")
    assert [(e["warmup"], e["ops"]) for e in intervals] == [(True, [pages] * tasks), (False, [pages] * tasks)]
    assert all(e["elapsed"] > 0 for e in intervals)

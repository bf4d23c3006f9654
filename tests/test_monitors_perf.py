"""perf-stat and perf-profile on real perf, the launcher's background helpers, `perflab report profile`."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from perflab.core.errors import PerflabError
from perflab.core.model import Sample
from perflab.monitors import MonitorError, MonitorSet, parse_spec
from perflab.monitors import perf as perfmon
from perflab.monitors.base import Unavailable
from perflab.execution import scratch
from perflab.execution.executor import ProcessSpec, execute, start_background

from conftest import assert_one_line_error

needs_perf = pytest.mark.skipif(shutil.which("perf") is None or os.geteuid() != 0,
                                reason="needs perf and root (system-wide counting)")

HOT_C = textwrap.dedent("""\
    #include <stdio.h>
    #include <stdlib.h>
    #include <time.h>
    #include <unistd.h>
    #include <sys/wait.h>
    /* The process's CPU time, not the wall clock: the program does the same work (the same number
       of samples of its own) however busy the machine is; a loaded machine only stretches its wall. */
    static double now(void) { struct timespec t; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t); return t.tv_sec + t.tv_nsec / 1e9; }
    __attribute__((noinline)) unsigned long hot_loop_function(unsigned long n) {
        unsigned long x = 1;
        for (unsigned long i = 0; i < n; i++) { x = x * 6364136223846793005UL + i; x ^= x >> 13; }
        return x;
    }
    __attribute__((noinline)) unsigned long other_loop_function(unsigned long n) {
        unsigned long x = 7;
        for (unsigned long i = 0; i < n; i++) { x = x * 2862933555777941757UL + 3037000493UL; x ^= x >> 7; }
        return x;
    }
    /* usage: hot CPU_SECONDS SHARE_OF_OTHER_PERCENT [PROCESSES]: each process spends CPU_SECONDS */
    int main(int argc, char **argv) {
        double seconds = argc > 1 ? atof(argv[1]) : 0.5, t0;
        long other = argc > 2 ? atol(argv[2]) : 0, processes = argc > 3 ? atol(argv[3]) : 1, children = 0;
        unsigned long s = 0;
        while (processes-- > 1) {
            pid_t pid = fork();
            if (pid < 0) return 1;
            if (pid == 0) { children = 0; break; }
            children++;
        }
        t0 = now();
        while (now() - t0 < seconds) {
            s += hot_loop_function(100000 * (100 - other) + 1);
            s += other_loop_function(100000 * other + 1);
        }
        printf("%lu\\n", s);
        while (children-- > 0) {
            int status;
            if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
        }
        return 0;
    }
    """)


@pytest.fixture(scope="module")
def hot(tmp_path_factory):
    d = tmp_path_factory.mktemp("hot")
    (d / "hot.c").write_text(HOT_C)
    subprocess.run([os.environ.get("CC", "cc"), "-O1", "-g", "-fno-omit-frame-pointer", "-o", str(d / "hot"),
                    str(d / "hot.c")], check=True)
    return d / "hot"


def run_monitored(config: dict, argv: list[str], repetitions: int = 1):
    """Each repetition's Collected of the one monitor in config, through MonitorSet and the executor."""
    ms = MonitorSet(config)
    try:
        out = []
        for _ in range(repetitions):
            result = execute(ProcessSpec(argv), hooks=ms.hooks(0))
            assert result.ok, result.describe_failure(None)
            out.append(ms.collect()[next(iter(config))])
        return ms, out
    finally:
        ms.close()


def by_metric(samples: list[Sample]) -> dict[str, Sample]:
    return {s.metric: s for s in samples}


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1].startswith("Z")
    except (FileNotFoundError, ProcessLookupError):   # it went between open and read
        return True


# ---- background helpers under the launcher ----------------------------------------------------

def test_background_helper_stops_on_sigint_and_is_killed_when_it_ignores_it(tmp_path):
    helper = start_background(["/bin/sleep", "60"])
    assert helper.alive and helper.pid > 0
    assert helper.stop(signal.SIGINT, timeout=30) == 128 + signal.SIGINT
    assert not helper.alive and gone(helper.pid)

    # The helper says "ready" once SIGINT is ignored: the SIGINT below must find it ignoring
    # (a Python slow to start under load would otherwise die of the SIGINT, status 130).
    ready = tmp_path / "ready"
    stubborn = start_background([sys.executable, "-c",
                                 "import signal, sys, time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                                 "print('ready', flush=True); time.sleep(60)"], stdout=str(ready))
    deadline = time.monotonic() + 60
    while "ready" not in ready.read_text() and time.monotonic() < deadline:
        assert stubborn.alive, "the stubborn helper ended before it was ready"
        time.sleep(0.01)
    assert "ready" in ready.read_text()
    started = time.monotonic()
    status = stubborn.stop(signal.SIGINT, timeout=0.5)
    assert status == 128 + signal.SIGTERM            # the launcher's SIGTERM to the group
    assert time.monotonic() - started < 30           # killed, not waited for (its sleep is 60 s)
    assert gone(stubborn.pid)


def test_background_helper_output_and_exit_status(tmp_path):
    out = tmp_path / "out.txt"
    helper = start_background(["/bin/sh", "-c", "echo hello; exit 3"], stdout=str(out))
    assert helper.wait(10) == 3
    assert out.read_text() == "hello\n"


def test_background_program_that_does_not_exist():
    with pytest.raises(PerflabError, match="cannot start '/no/such/program'.*No such file"):
        start_background(["/no/such/program"])


def test_background_helper_dies_with_perflab_on_kill_9(tmp_path):
    script = ("import sys, time\n"
              "from perflab.execution.executor import start_background\n"
              "h = start_background(['/bin/sleep', '60'])\n"
              "print(h.pid, flush=True)\n"
              "time.sleep(60)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                              env=dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache")))
    try:
        pid = int(parent.stdout.readline())
        assert not gone(pid)
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 30
        while not gone(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert gone(pid), "the helper outlived perflab"
    finally:
        parent.kill()


def test_temp_dirs_of_dead_perflab_processes_are_removed(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead_pid = int(open("/proc/sys/kernel/pid_max").read()) + 1      # no process has it
    orphan = tmp_path / f"perflab-perf-{dead_pid}-perf-profile-x"
    orphan.mkdir()
    (orphan / "perf-1.data").write_bytes(b"x" * 100)
    live = tmp_path / f"perflab-perf-{os.getppid()}-perf-stat-y"
    live.mkdir()
    monkeypatch.setattr(scratch, "_mine", None)
    scratch.reap()   # what every command that opens the store does (execution.filesystem.cleanup_stale)
    mon = perfmon.PerfStat(perfmon.PerfStatOptions())
    try:
        mine = mon.workdir()
        assert mine.parent == Path(scratch.directory()) and mine.parent.parent == tmp_path and mine.is_dir()
        assert not orphan.exists() and live.exists()
    finally:
        mon.close()
    assert not mine.exists()


# ---- what the machine can do ------------------------------------------------------------------

def test_perf_missing_says_which_package(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(Unavailable, match="perf not found: install the linux-perf package"):
        perfmon.perf_binary()
    ms = MonitorSet({"perf-stat": {}})
    assert not ms and ms.record["perf-stat"]["status"] == "unavailable"
    assert "linux-perf" in ms.record["perf-stat"]["errors"][0]


def test_paranoid_setting_named_for_a_user(tmp_path):
    setting = tmp_path / "perf_event_paranoid"
    setting.write_text("2\n")
    with pytest.raises(Unavailable, match=rf"{re.escape(str(setting))} is 2; .* needs 0 or lower"):
        perfmon.check_permission(False, str(setting), privileged=False)
    with pytest.raises(Unavailable, match="needs -1 or lower"):
        perfmon.check_permission(True, str(setting), privileged=False)
    setting.write_text("0\n")
    perfmon.check_permission(False, str(setting), privileged=False)
    perfmon.check_permission(True, str(setting), privileged=True)


def test_tracepoint_names():
    assert perfmon.is_tracepoint("sched:sched_switch") and perfmon.is_tracepoint("pagefault:*")
    assert not perfmon.is_tracepoint("cycles:u") and not perfmon.is_tracepoint("cpu/event=0x3c,umask=0/")
    assert not perfmon.is_tracepoint("context-switches")


@needs_perf
def test_no_perf_outlives_perflab_killed_with_9(tmp_path):
    script = ("import time\n"
              "from perflab.monitors import MonitorSet\n"
              "ms = MonitorSet({'perf-stat': {}, 'perf-profile': {}})\n"
              "print(*[m._perf.process.pid for m in ms.active], flush=True)\n"
              "time.sleep(60)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                              env=dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache")))
    try:
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert len(pids) == 2 and not any(gone(p) for p in pids)     # started ahead, waiting disabled
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 30
        while not all(gone(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert all(gone(p) for p in pids), "a perf outlived perflab"
    finally:
        parent.kill()


# ---- perf-stat ---------------------------------------------------------------------------------

@needs_perf
def test_perf_stat_forking_workload_raises_context_switches():
    forks = "i=0; while [ $i -lt 300 ]; do /bin/true; i=$((i+1)); done"

    def idle_run():
        return by_metric(run_monitored({"perf-stat": {"interval": 0.1}}, ["/bin/sleep", "0.3"])[1][0].samples)

    # The idle reference is the quietest of three, one before the forks and two after: counting
    # is system-wide, and on a 2-CPU CI machine another test's burst once made one idle 0.3 s
    # busier than the forks (10,885/s against 7,994/s); background only ever adds, so the
    # minimum is the machine's own, and idles on both sides of the forks follow a load that
    # comes or goes meanwhile.
    idles = [idle_run()]
    ms, (forking,) = run_monitored({"perf-stat": {"interval": 0.1}}, ["/bin/sh", "-c", forks])
    idles += [idle_run(), idle_run()]
    f = by_metric(forking.samples)
    i = {name: min((idle[name] for idle in idles), key=lambda smp: smp.value)
         for name in idles[0] if all(name in idle for idle in idles)}
    for event in ("context-switches", "page-faults", "cpu-migrations", "task-clock"):
        assert f"perf-stat.{event}" in f and f"perf-stat.{event}.total" in f
        assert f[f"perf-stat.{event}"].unit.endswith("/s")
    assert f["perf-stat.context-switches.total"].unit == ""
    assert f["perf-stat.task-clock"].unit == "msec/s"
    # 300 fork+exec+wait: at least a switch each, far above what the machine does while idle.
    assert f["perf-stat.context-switches.total"].value >= 300
    # Counting is system-wide: whatever else runs on the machine adds to both, hence no ratio.
    assert f["perf-stat.context-switches"].value > i["perf-stat.context-switches"].value
    assert f["perf-stat.page-faults"].value > i["perf-stat.page-faults"].value
    # Rate and total agree with a plausible counted time (the timed part, a little more).
    seconds = f["perf-stat.context-switches.total"].value / f["perf-stat.context-switches"].value
    assert 0.05 < seconds < 30
    # Series: per-interval rates, time increasing from the timed part's start: the first row closes
    # the 0.1 s interval that enable fell in (the bound leaves room for perf's interval timer
    # waking late on a busy machine).
    times = [t for _, t, _ in forking.series]
    assert times and times == sorted(times) and 0 < times[0] <= 0.5
    assert all(p == 0 for p, _, _ in forking.series)
    assert all(v["context-switches"] >= 0 for _, _, v in forking.series)
    # What this machine cannot count is listed, not a failure (cycles and instructions in a VM).
    record = ms.record["perf-stat"]
    assert record["status"] == "ran"
    for hw in ("cycles", "instructions"):
        assert (hw in record["unsupported"]) != (f"perf-stat.{hw}" in f)


@needs_perf
def test_perf_stat_tracepoints_counted_and_missing_groups_unsupported():
    config = {"perf-stat": {"events": ["sched:sched_switch", "pagefault:*", "context-switches"], "interval": 0.1}}
    # The sleep first: perf attaches while the shell waits, so the eight forks after it are counted and at
    # least one interval is printed (an 8-fork shell alone ends in ~10 ms, and once in a full CI run perf
    # printed nothing before it exited).
    ms, (got,) = run_monitored(config, ["/bin/sh", "-c", "sleep 0.3; for i in 1 2 3 4 5 6 7 8; do /bin/true; done"])
    m = by_metric(got.samples)
    assert m["perf-stat.sched:sched_switch"].unit == ""                   # a tracepoint: the count
    assert m["perf-stat.sched:sched_switch.per_s"].unit == "/s"
    assert m["perf-stat.sched:sched_switch"].value >= 8
    if not os.path.isdir("/sys/kernel/tracing/events/pagefault"):
        assert any(u.startswith("pagefault:*") for u in ms.record["perf-stat"]["unsupported"])


@needs_perf
def test_perf_stat_unknown_event_is_one_line_naming_it_and_perf_list():
    with pytest.raises(MonitorError) as err:
        MonitorSet({"perf-stat": {"events": ["context-switches", "no-such-event-xyz"]}})
    message = str(err.value)
    assert "'no-such-event-xyz'" in message and "perf list" in message and "\n" not in message


@needs_perf
def test_unknown_event_on_the_command_line_is_one_line_and_runs_nothing(cli):
    proc = cli("run", "cmd", "--runs", "1", "--monitor", "perf-stat:events=[cs,no-such-event-xyz]", "--", "true",
               check=False)
    assert_one_line_error(proc, "'no-such-event-xyz'", "perf list")
    assert cli.sql("select count(*) from sample")[0][0] == 0


def my_perf_processes() -> list[int]:
    """perf processes working in this test process's monitor temp dirs."""
    mark = f"{perfmon.WORKDIR_PREFIX}{os.getpid()}-".encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if mark in f.read() and not gone(int(entry)):
                        found.append(int(entry))
            except OSError:
                continue
    return found


@needs_perf
def test_a_later_monitors_bad_event_stops_the_perf_started_ahead():
    with pytest.raises(MonitorError, match="no-such-event-xyz"):
        MonitorSet({"perf-profile": {}, "perf-stat": {"events": ["no-such-event-xyz"]}})
    deadline = time.monotonic() + 30
    while my_perf_processes() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert my_perf_processes() == []


def test_perf_stat_options_checked():
    with pytest.raises(MonitorError, match="unknown option 'evnts'; valid: interval, events"):
        MonitorSet({"perf-stat": {"evnts": ["cs"]}})
    with pytest.raises(MonitorError, match="'events'"):
        MonitorSet({"perf-stat": {"events": []}})
    assert parse_spec("perf-stat:events=cs+faults")["perf-stat"]["events"] == ["cs", "faults"]


def test_perf_stat_interval_parsing():
    text = textwrap.dedent("""\
        # started on Mon Nov 23 19:02:06 2026

             0.200280929;<not counted>;;context-switches;0;100.00;;
             0.200280929;<not supported>;;cycles;0;100.00;;
             0.400771010;287;;context-switches;200000000;100.00;1.182;K/sec
             0.400771010;<not supported>;;cycles;0;100.00;;
             0.400771010;242.80;msec;cpu-clock;200000000;100.00;1.214;CPUs utilized
             0.600933633;37;;context-switches;400000000;100.00;92.275;/sec
             0.600933633;400.98;msec;cpu-clock;400000000;100.00;2.005;CPUs utilized
        """)
    totals, units, rows, unsupported = perfmon.parse_stat_intervals(text, ncpus=2)
    assert totals == {"context-switches": 324.0, "cpu-clock": pytest.approx(643.78)}
    assert units["cpu-clock"] == "msec" and unsupported == {"cycles"}
    # The first counted interval ran 0.1 s (200 ms of counter time over 2 CPUs).
    assert rows[0] == (0.1, {"context-switches": pytest.approx(2870.0), "cpu-clock": pytest.approx(2428.0)})
    assert rows[1][0] == pytest.approx(0.3) and rows[1][1]["context-switches"] == pytest.approx(185.0)
    samples = by_metric(perfmon.stat_samples({"context-switches": 324.0, "sched:sched_switch": 50.0},
                                             {"context-switches": "", "sched:sched_switch": ""}, 2.0))
    assert samples["perf-stat.context-switches"].value == 162.0
    assert samples["perf-stat.context-switches.total"].value == 324.0
    assert samples["perf-stat.sched:sched_switch"].value == 50.0
    assert samples["perf-stat.sched:sched_switch.per_s"].value == 25.0


# ---- perf-profile ------------------------------------------------------------------------------

@needs_perf
def test_perf_profile_names_the_hot_function_first(hot):
    began = time.monotonic()
    # Every call trace kept: the profile is system-wide, and on a busy machine ten others' traces
    # (the default's cap) can outweigh the program's, leaving none of its own (seen in CI).
    ms, (got,) = run_monitored({"perf-profile": {"calltraces": 1000, "min_calltrace": 0}}, [str(hot), "0.6"])
    wall = time.monotonic() - began
    m = by_metric(got.samples)
    selfs = {k.split(".cycles-pp.", 1)[1]: s.value for k, s in m.items() if k.startswith("perf-profile.self.")}
    (process, seconds, values), = got.series
    facts = perfmon.symbols_from_series(values)
    # The profile is system-wide: first among the program's own symbols, and far above the floor.
    own = {sym: v for sym, v in selfs.items() if facts.get(sym, ("",))[0] == hot.name}
    assert max(own, key=own.get) == "hot_loop_function"
    assert m["perf-profile.self.cycles-pp.hot_loop_function"].unit == "%"
    hot_self = m["perf-profile.self.cycles-pp.hot_loop_function"].value
    assert 0 < hot_self <= 100
    # Its share of the whole machine's samples is whatever else runs leaves it (a loaded machine
    # dilutes it at will): the share that means something is among the program's own samples,
    # where it holds nearly all; and in samples, 0.6 s of the program's CPU time at 999 Hz is
    # ~600 of them however busy the machine is -- far above the floor.
    assert hot_self > 0.5 * sum(own.values())
    assert hot_self / 100 * m["perf-profile.samples"].value > 100
    # children% holds self%; its callers' children% hold it (the frames above it, leaf first).
    assert m["perf-profile.children.cycles-pp.hot_loop_function"].value >= hot_self
    callers = [k for k, s in m.items() if k.startswith("perf-profile.children.") and s.value >= hot_self - 0.01
               and not k.endswith(".hot_loop_function")]
    assert callers        # __libc_start_call_main, main ...
    traces = [k for k in m if k.startswith("perf-profile.calltrace.cycles-pp.hot_loop_function.")]
    assert traces and m[traces[0]].value >= hot_self - 0.01
    assert m["perf-profile.samples"].value > 100
    # The symbols' comm and [k]/[.] travel in the series row.
    assert facts["hot_loop_function"] == ("hot", "[.]")
    # Counted: the timed part, 0.6 s of CPU time at least, no more than the call around it.
    assert 0.5 < seconds <= wall


@needs_perf
def test_perf_profile_agrees_with_perf_report(hot, tmp_path):
    data = tmp_path / "perf.data"
    subprocess.run(["perf", "record", "-q", "-g", "-e", "cpu-clock", "-F", "999", "-o", str(data), "--",
                    str(hot), "0.4", "30"], check=True, capture_output=True)
    mine = perfmon.reduce_profile(perfmon.parse_perf_script(perfmon.perf_script("perf", data)))
    report = subprocess.run(["perf", "report", "-i", str(data), "--children", "--sort", "sym", "--stdio",
                             "-g", "none", "--percent-limit", "2"], capture_output=True, text=True, check=True).stdout
    theirs = {}
    for line in report.splitlines():
        match = re.match(r"\s+([\d.]+)%\s+([\d.]+)%\s+\[(.)\]\s+(\S.*?)\s*$", line)
        if match:
            theirs[match.group(4)] = (float(match.group(1)), float(match.group(2)), match.group(3))
    assert "hot_loop_function" in theirs and "other_loop_function" in theirs
    for symbol, (children, self_, kind) in theirs.items():
        share = mine.symbols[symbol]
        assert share.children == pytest.approx(children, abs=0.01), symbol
        assert share.self == pytest.approx(self_, abs=0.01), symbol
        assert share.kind == ("[k]" if kind == "k" else "[.]")
    assert mine.top(1, "self")[0].symbol == "hot_loop_function"


def test_a_profile_reads_alike_whatever_order_its_stacks_come_in():
    """Review of issue 46: a symbol's kind ([k] or [.]) was the first stack's that named it, so a
    name in both spaces (a libc and a kernel function of one name, a busy machine's profile)
    read [.] in perf script's order and [k] in the order awk folded the stacks (hash order):
    the folded test failed now and then. Order-independent now."""
    text = ("app 1 100\n\t7f0000001000 memcpy (/lib/libc.so.6)\n\t401000 main (/x/app)\n\n"
            "app 1 300\n\tffffffff81001000 memcpy ([kernel.kallsyms])\n\tffffffff81000000 do_syscall_64 "
            "([kernel.kallsyms])\n\n")
    samples = list(perfmon.parse_perf_script(text))
    forward, backward = perfmon.reduce_profile(samples), perfmon.reduce_profile(samples[::-1])
    assert forward.symbols == backward.symbols and forward.calltraces == backward.calltraces
    assert forward.symbols["memcpy"].kind == "[k]" and forward.symbols["memcpy"].self == 100.0


@needs_perf
@pytest.mark.skipif(shutil.which("awk") is None, reason="needs awk")
def test_a_profile_folded_by_awk_where_perf_ran_reduces_to_the_same_shares(hot, tmp_path):
    """What comes back from a guest or an SSH machine is perf script's text with identical
    stacks summed there (FOLD_AWK): the same profile, in a fraction of the bytes."""
    data = tmp_path / "perf.data"
    subprocess.run(["perf", "record", "-q", "-a", "-g", "-e", "cpu-clock", "-F", "999", "-o", str(data), "--",
                    str(hot), "0.4", "30"], check=True, capture_output=True)
    text = "".join(perfmon.perf_script("perf", data))
    folded = subprocess.run(["awk", perfmon.FOLD_AWK], input=text, capture_output=True, text=True, check=True).stdout
    whole, summed = perfmon.reduce_profile(perfmon.parse_perf_script(text)), \
        perfmon.reduce_profile(perfmon.parse_perf_script(folded))
    assert folded.startswith(perfmon.FOLDED + "\n") and whole.samples > 100
    assert (summed.total, summed.samples, summed.symbols, summed.calltraces) == \
        (whole.total, whole.samples, whole.symbols, whole.calltraces)
    # The hot loop's hundreds of samples are a few stacks (what else ran, system-wide, may be
    # as varied as it likes: it only adds to both sides).
    hot_stacks = [b for b in folded.split("\n\n") if b.startswith("hot ") and "hot_loop_function" in b]
    assert len(folded) < len(text) and len(hot_stacks) < whole.symbols["hot_loop_function"].self * whole.samples / 100 / 4
    # Nothing read, nothing said: an empty text folds to nothing (the monitor then says perf did not run).
    assert subprocess.run(["awk", perfmon.FOLD_AWK], input="", capture_output=True, text=True).stdout == ""


@pytest.mark.skipif(shutil.which("awk") is None, reason="needs awk")
def test_a_task_perf_lost_track_of_is_folded_like_any_other():
    """CI, issue 47: perf script names a task that exited while perf recorded ":-1  -1  PERIOD";
    the fold read only a pid of digits and dropped such samples, so a busy machine's folded
    profile was a sample or two short of the whole one."""
    text = ("app  4925    1000\n\tffffffff815f991a do_exit ([kernel.kallsyms])\n\n"
            ":-1    -1    1001001\n\tffffffff815f991a _raw_write_unlock_irq ([kernel.kallsyms])\n"
            "\tffffffff815f9000 do_exit ([kernel.kallsyms])\n\n"
            ":-1    -1    1001001\n\tffffffff815f991a _raw_write_unlock_irq ([kernel.kallsyms])\n"
            "\tffffffff815f9000 do_exit ([kernel.kallsyms])\n\n")
    folded = subprocess.run(["awk", perfmon.FOLD_AWK], input=text, capture_output=True, text=True, check=True).stdout
    whole, summed = perfmon.reduce_profile(perfmon.parse_perf_script(text)), \
        perfmon.reduce_profile(perfmon.parse_perf_script(folded))
    assert (whole.samples, whole.total) == (3, 2003002)
    assert (summed.total, summed.samples, summed.symbols, summed.calltraces) == \
        (whole.total, whole.samples, whole.symbols, whole.calltraces)
    assert ":-1 2 2002002" in folded


@needs_perf
def test_perf_script_of_a_broken_file_fails_naming_it(tmp_path):
    broken = tmp_path / "perf-1.data"
    broken.write_bytes(b"not a perf file")
    with pytest.raises(perfmon.PerfFailed, match=r"perf script -i .*perf-1.data failed"):
        list(perfmon.perf_script("perf", broken))


def test_perf_script_parsing_and_shares():
    text = textwrap.dedent("""\
        fio worker  4925    1000
        \tffffffff815f991a osq_lock ([kernel.kallsyms])
        \tffffffff815fa259 rwsem_down_write_slowpath ([kernel.kallsyms])
        \tffffffff815fa259 rwsem_down_write_slowpath ([kernel.kallsyms])
        \t            11ef main (/usr/bin/fio)

        fio worker  4925    3000
        \tffffffff815fa259 rwsem_down_write_slowpath ([kernel.kallsyms])
        \t            11ef main (/usr/bin/fio)

        bash  77    1000
        \t            11ac operator()(int) const (/usr/bin/bash)
        \t            11a0 [unknown] ([unknown])
        """)
    samples = list(perfmon.parse_perf_script(text))
    assert [s.comm for s in samples] == ["fio worker", "fio worker", "bash"]
    assert samples[2].frames[0].symbol == "operator()(int) const"
    profile = perfmon.reduce_profile(samples)
    osq, slow, main = (profile.symbols[k] for k in ("osq_lock", "rwsem_down_write_slowpath", "main"))
    assert (osq.self, osq.children, osq.kind, osq.comm) == (20.0, 20.0, "[k]", "fio worker")
    assert profile.samples == 3 and profile.total == 5000
    assert (slow.self, slow.children) == (60.0, 80.0)     # recursion counted once per sample
    assert (main.self, main.children, main.kind) == (0.0, 80.0, "[.]")
    assert "[unknown]" not in profile.symbols
    assert profile.calltraces[("osq_lock", "rwsem_down_write_slowpath", "rwsem_down_write_slowpath", "main")] == 20.0
    names = by_metric(perfmon.profile_samples(profile, perfmon.PerfProfileOptions()))
    assert names["perf-profile.children.cycles-pp.rwsem_down_write_slowpath"].value == 80.0
    assert names["perf-profile.calltrace.cycles-pp.rwsem_down_write_slowpath.main"].value == 80.0
    assert all(len(k) <= 255 for k in names)
    assert len(perfmon.metric_name("perf-profile.self.cycles-pp.", "x" * 400)) == 255


# ---- perflab report profile ------------------------------------------------------------------------

def profile_store(path, sides):
    """Runs with perf-profile shares: (tag, benchmark, [ {symbol: (children, self)} per repetition ])."""
    from perflab.store import open_store

    store = open_store(str(path))
    for tag, benchmark, reps in sides:
        run = store.create_run(box="box", environment={"testbox": "box", "kernel_release": "6.1.0"},
                               benchmark=benchmark, name=benchmark, params={"argv": ["x"]}, tag=tag)
        for i, shares in enumerate(reps):
            store.add_samples(run, i, [Sample("cmd.wall", 1.0, "s", -1)] + [
                Sample(f"perf-profile.{kind}.cycles-pp.{sym}", value, "%", 0)
                for sym, pair in shares.items() for kind, value in zip(("children", "self"), pair)])
            facts = {json.dumps(["symbol", "[k]" if sym.startswith("osq") else "[.]", "fio", sym]): pair[0]
                     for sym, pair in shares.items()}
            store.add_monitor_series(run, "perf-profile", i, [(None, 1.0, facts)])
        store.finish_run(run, "finished")
    return store


def test_report_profile_layout_and_significance(cli):
    base = [{"osq_lock": (63.5 + d, 52.8 + d), "down_write": (69.7, 0.6), "main": (20.0, 0.0)} for d in (-0.3, 0.0, 0.4)]
    head = [{"osq_lock": (59.9 + d, 55.4 + d), "down_write": (70.8, 0.6), "steady": (5.0, 5.0)} for d in (-0.2, 0.1, 0.3)]
    profile_store(cli.db, [("base", "fio", base), ("head", "fio", head)])
    out = cli("report", "profile", "base", "head").stdout
    lines = out.splitlines()
    rows = [l for l in lines if l.rstrip().endswith(("osq_lock", "down_write", "main", "steady"))]
    # Largest change first: main vanished (-20 points), then steady and osq_lock.
    assert rows[0].split()[-1] == "main" and "-20.00" in rows[0] and "changed" in rows[0]
    osq = next(l for l in rows if l.endswith("osq_lock"))
    assert re.search(r"63\.53%\s+52\.83%\s+59\.97%\s+55\.47%\s+-3\.57\s+\+2\.63\s+changed \(p[=<]", osq), osq
    assert re.search(r"\s fio\s+\[k\] osq_lock$", osq), osq
    steady = next(l for l in rows if l.endswith("steady"))
    assert steady.rstrip().endswith("[.] steady") and "+5.00" in steady
    assert lines[0] == "# perf-profile of fio: base base, head head" and "Welch" in out
    assert "base 1 run, 3 repetitions, head 1 run, 3 repetitions; sampled over the benchmark process's life" in out


def test_profile_comparison_top_and_too_few_samples():
    from perflab.report.profile import render_profile
    from perflab.stats.profile import compare_profiles

    base = [{("children", "a"): 10.0 + d, ("self", "a"): 5.0, ("children", "b"): 40.0 + d, ("self", "b"): 1.0,
             ("children", "tiny"): 0.2} for d in (0.0, 0.5, -0.4)]
    head = [{("children", "a"): 30.0 + d, ("self", "a"): 5.0 + d, ("children", "b"): 41.0 + d, ("self", "b"): 1.0}
            for d in (0.2, -0.3, 0.1)]
    result = compare_profiles(base, head, top=1)
    assert [s.symbol for s in result.symbols] == ["a"] and result.below_floor == 1
    assert result.symbols[0].children.change == pytest.approx(20.0, abs=0.2)
    assert result.symbols[0].verdict == "changed" and result.symbols[0].p_adjusted < 0.05
    once = compare_profiles(base, head[:1])
    assert {s.verdict for s in once.symbols} == {"insufficient samples"}
    text = render_profile(once, "base", "head", {"a": ("fio", "[k]")})
    assert "too few samples" in text and "changed" not in text
    assert re.search(r"too few samples\s+fio\s+\[k\] a$", text, re.M)
    assert re.search(r"too few samples\s+\?\s+\? b$", text, re.M)     # facts unknown: said so


def test_report_profile_bad_input_one_line(cli):
    rep = [{"osq_lock": (60.0, 50.0)}] * 2
    profile_store(cli.db, [("base", "fio", rep), ("plain", "fio", [{}]), ("mixed", "fio", rep), ("mixed", "aim7", rep)])
    assert_one_line_error(cli("report", "profile", "base", "plain", check=False), "'plain'", "no", "perf-profile")
    assert_one_line_error(cli("report", "profile", "base", "nosuchtag", check=False), "'nosuchtag'")
    # Issue 44 (3): several testcases are sections, never pooled; one on one side only is named.
    mixed = cli("report", "profile", "mixed", "base").stdout
    assert "# only in the base: aim7" in mixed and mixed.count("## ") == 1 and "osq_lock" in mixed
    assert "only in" not in cli("report", "profile", "mixed", "base", "--benchmark", "fio").stdout


def test_report_profile_of_one_operand_is_its_profile(cli):
    # Issue 33 (7): one operand prints its profile as `perf report --children` reads, the
    # symbols by children% (means over the repetitions, absent = 0), with self%, comm, [k]/[.].
    base = [{"osq_lock": (63.5 + d, 52.8 + d), "down_write": (69.7, 0.6), "main": (20.0, 0.0)} for d in (-0.3, 0.0, 0.4)]
    base[2]["tiny"] = (0.9, 0.3)                           # under the floor in two repetitions
    profile_store(cli.db, [("base", "fio", base), ("plain", "fio", [{}])])
    out = cli("report", "profile", "base").stdout
    lines = out.splitlines()
    assert lines[0] == "# perf-profile of fio: base"
    assert "means over each testcase's repetitions" in lines[1]
    assert lines[3].startswith("## fio") and lines[3].endswith(": 1 run, 3 repetitions; sampled over the benchmark "
                                                              "process's life (its warm-up included)")
    table = lines[5:]
    assert table[0].split() == ["children", "self", "comm", "symbol"]
    assert [l.split()[-1] for l in table[1:]] == ["down_write", "osq_lock", "main", "tiny"]
    assert re.fullmatch(r"\s+63\.53%\s+52\.83%  fio   \[k\] osq_lock", table[2]), table[2]
    assert re.fullmatch(r"\s+0\.30%\s+0\.10%  fio   \[\.\] tiny", table[4]), table[4]
    top = cli("report", "profile", "base", "--top", "2").stdout
    assert "# the 2 largest of 4 symbols by children% (--top)" in top and "main" not in top
    assert_one_line_error(cli("report", "profile", "plain", check=False), "'plain'", "no", "perf-profile")
    assert_one_line_error(cli("report", "profile", "nosuchtag", check=False), "'nosuchtag'")
    # the comparison of two operands is unchanged by it
    assert "change" in cli("report", "profile", "base", "base").stdout


@needs_perf
def test_run_with_perf_profile_then_report(cli, tmp_path):
    # The profile is system-wide: whatever else runs takes its share of the samples and moves
    # its own symbols' shares by several points between runs. The planted change holds its
    # ground: one process per CPU (the program's share of a busy machine's CPUs, so of its
    # samples, grows with its number of runnable processes), each 0.3 s of CPU time, half of it
    # in the second function in v2; and --top leaves room for a busy machine's own movers.
    # The program's functions have names of their own: other tests of this file, on another xdist
    # worker meanwhile, run `hot`, whose other_loop_function v1's system-wide profile would count.
    # One run a tag: cpu-clock samples count CPU time, so at 999 Hz each of v2's two functions gets
    # about 300 samples whatever the load (their ratio within ~10%, against the 2x bound below).
    (tmp_path / "planted.c").write_text(HOT_C.replace("hot_loop_function", "planted_hot_function")
                                        .replace("other_loop_function", "planted_other_function"))
    planted = tmp_path / "planted"
    subprocess.run([os.environ.get("CC", "cc"), "-O1", "-g", "-fno-omit-frame-pointer", "-o", str(planted),
                    str(tmp_path / "planted.c")], check=True)
    for tag, other in (("v1", "0"), ("v2", "50")):
        cli("run", "cmd", "--runs", "1", "--monitor", "perf-profile", "--tag", tag, "--", planted, "0.3", other,
            str(os.cpu_count() or 1))
    out = cli("report", "profile", "v1", "v2", "--top", "60").stdout
    def self_shares(symbol: str) -> tuple[float, float]:
        row = next(l for l in out.splitlines() if l.rstrip().endswith(symbol))
        assert "planted  " in row and f"[.] {symbol}" in row, row
        shares = re.match(r"\s*(\d+\.\d\d)%\s+(\d+\.\d\d)%\s+(\d+\.\d\d)%\s+(\d+\.\d\d)%", row)
        assert shares, out
        return float(shares[2]), float(shares[4])

    # What the machine's other work takes of a system-wide profile moves both functions' shares
    # alike (the program's share was 36% of the samples in a CI run, 97% quiet): their ratio holds.
    # v1 calls the second one turn a round, next to nothing; v2 gives it half the work.
    hot_v1, hot_v2 = self_shares("planted_hot_function")
    other_v1, other_v2 = self_shares("planted_other_function")
    assert other_v1 < 0.05 * hot_v1 and 0.5 * hot_v2 < other_v2 < 2 * hot_v2, out
    assert "sampled cpu-clock" in out or "sampled cycles" in out

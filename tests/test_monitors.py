"""Monitors that read /proc: plausible values on real short runs, their series, the run's record, bad input."""

from __future__ import annotations

import json
import textwrap
import time

import pytest

from conftest import assert_one_line_error
from perflab import monitors
from perflab.monitors import MonitorSet, monitor_of, procfs
from perflab.execution.executor import ProcessSpec, execute

PROCFS = ["vmstat", "proc-stat", "proc-vmstat", "meminfo", "interrupts", "softirqs", "diskstats"]

# A program that touches 64 MiB of fresh pages, ROUNDS times (4 unless given): one page fault per 4 KiB page.
FAULTER = textwrap.dedent("""
    #include <stdlib.h>
    #include <sys/mman.h>
    int main(int argc, char **argv) {
        int rounds = argc > 1 ? atoi(argv[1]) : 4;
        for (int round = 0; round < rounds; round++) {
            size_t n = 64u << 20;
            char *p = mmap(0, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED) return 1;
            madvise(p, n, MADV_NOHUGEPAGE);   /* 4 KiB pages: one fault each, whatever THP says */
            for (size_t i = 0; i < n; i += 4096) p[i] = 1;
            munmap(p, n);
        }
        return 0;
    }
""")


def _watch(argv, config, process=0):
    ms = MonitorSet(config)
    try:
        result = execute(ProcessSpec(argv), hooks=ms.hooks(process))
        assert result.ok, result.describe_failure(None)
        return {name: c for name, c in ms.collect().items()}, ms.record
    finally:
        ms.close()


def _values(collected) -> dict[str, float]:
    return {s.metric: s.value for c in collected.values() for s in c.samples}


@pytest.fixture(scope="module")
def faulter(tmp_path_factory):
    import subprocess

    d = tmp_path_factory.mktemp("faulter")
    (d / "faulter.c").write_text(FAULTER)
    subprocess.run(["cc", "-O1", "-o", str(d / "faulter"), str(d / "faulter.c")], check=True)
    return str(d / "faulter")


def test_page_faults_raise_proc_vmstat_pgfault(faulter):
    busy, _ = _watch([faulter, "8"], {"proc-vmstat": {"interval": 0.05}})
    # pgfault is the whole machine's: the idle reference is the quietest of three (background only
    # ever adds), and the planted 8 x 64 MiB of 4 KiB pages (131072 faults) is far beyond what a
    # busy machine's other processes fault in 0.05 s.
    quiet = min(_values(_watch(["/bin/sleep", "0.05"], {"proc-vmstat": {"interval": 0.05}})[0])["proc-vmstat.pgfault"]
                for _ in range(3))
    faults = _values(busy)["proc-vmstat.pgfault"]
    # 131072 faults (fault-around may map a few at once: only a floor).
    assert faults > 2000 and faults > 10 * max(quiet, 1)
    assert _values(busy)["proc-vmstat.pgfault.per_s"] > 0
    # nr_* levels are means in pages, counters are deltas.
    assert _values(busy)["proc-vmstat.nr_free_pages"] > 0


def test_forking_raises_processes_and_context_switches():
    loop = ["/bin/sh", "-c", "i=0; while [ $i -lt 100 ]; do /bin/true; i=$((i+1)); done"]
    busy, _ = _watch(loop, {"proc-stat": {"interval": 0.05}, "vmstat": {"interval": 0.05}})
    v = _values(busy)
    assert v["proc-stat.processes"] >= 100
    assert v["proc-stat.ctxt"] >= 200
    assert v["vmstat.system.cs"] > 0
    shares = [v[f"vmstat.cpu.{k}"] for k in ("us", "sy", "id", "wa", "st")]
    assert all(0 <= s <= 100 for s in shares) and 99 <= sum(shares) <= 101
    assert v["vmstat.cpu.us"] + v["vmstat.cpu.sy"] > 10     # the loop kept a CPU busy
    assert v["vmstat.memory.free"] > 0 and v["vmstat.procs.r"] >= 1


def test_every_procfs_monitor_gives_plausible_values_and_a_series():
    config = {name: {"interval": 0.05} for name in PROCFS}
    began = time.monotonic()
    collected, record = _watch(["/bin/sleep", "0.3"], config, process=2)
    wall = time.monotonic() - began
    v = _values(collected)
    assert set(collected) == set(PROCFS)
    assert all(record[m]["status"] == "ran" for m in PROCFS)
    assert v["meminfo.MemTotal"] > 0 and "meminfo.Dirty" in v
    assert v["interrupts.LOC:Local_timer_interrupts"] > 0
    assert "softirqs.TIMER" in v
    assert any(k.startswith("diskstats.") for k in v) or not any(
        procfs.Diskstats(procfs.DiskOptions())._wanted(line.split()[2])
        for line in open("/proc/diskstats") if len(line.split()) > 3)
    for name, c in collected.items():
        assert all(s.direction == 0 for s in c.samples), name       # evidence, not a verdict
        assert all(monitor_of(s.metric) == name for s in c.samples), name
        # One row per interval of the timed part (0.3 s, longer on a busy machine), none after it:
        # the last row closes the timed part, which holds the sleep and lies within the call
        # around it; a row per 0.05 s tick of it and the closing one, at most; a late tick is
        # skipped, not made up.
        assert all(p == 2 for p, _, _ in c.series)
        ts = [t for _, t, _ in c.series]
        assert ts == sorted(ts) and 0.3 <= ts[-1] <= wall
        assert 3 <= len(c.series) <= ts[-1] / 0.05 + 1, (name, len(c.series), ts)


def test_sched_debug_reports_run_queue_lengths_or_says_why_not():
    collected, record = _watch(["/bin/sh", "-c", "yes > /dev/null & a=$!; yes > /dev/null & b=$!; sleep 0.3; kill $a $b"],
                               {"sched_debug": {"interval": 0.05}})
    entry = record["sched_debug"]
    if entry["status"] == "unavailable":
        assert "debugfs" in entry["errors"][0]
        return
    v = _values(collected)
    assert v["sched_debug.cpu.nr_running.max"] >= 1
    assert v["sched_debug.cpu.nr_running.min"] <= v["sched_debug.cpu.nr_running.avg"] <= v["sched_debug.cpu.nr_running.max"]


def test_interrupt_names_follow_lkp():
    assert procfs._irq_name("CAL", ["Function", "call", "interrupts"]) == "CAL:Function_call_interrupts"
    assert procfs._irq_name("24", ["IO-APIC", "5-edge", "ACPI:Ged"]) == "24:IO-APIC.5-edge.ACPI:Ged"


def test_a_monitor_that_dies_mid_run_is_recorded_and_the_rest_go_on(monkeypatch):
    calls = {"n": 0}
    real = procfs.read_meminfo

    def failing():
        calls["n"] += 1
        if calls["n"] > 1:       # the reading at begin, then the first tick (or, late, the one at end) fails
            raise OSError(5, "Input/output error")
        return real()

    monkeypatch.setattr(procfs, "read_meminfo", failing)
    warnings = []
    ms = MonitorSet({"meminfo": {"interval": 0.02}, "proc-stat": {"interval": 0.02}}, warn=warnings.append)
    result = execute(ProcessSpec(["/bin/sleep", "0.2"]), hooks=ms.hooks(0))
    assert result.ok
    collected = ms.collect()
    ms.close()
    assert "meminfo" not in collected and "proc-stat" in collected
    assert ms.record["meminfo"]["status"] == "failed"
    assert "Input/output error" in ms.record["meminfo"]["errors"][0]
    assert any("meminfo failed" in w for w in warnings)


def test_bad_monitor_names_and_options_list_the_valid_ones():
    with pytest.raises(monitors.MonitorError, match="valid: vmstat, proc-stat"):
        monitors.validate({"vmstatt": {}})
    with pytest.raises(monitors.MonitorError, match="unknown option 'per_cpus'; valid: interval, per_cpu"):
        monitors.validate({"interrupts": {"per_cpus": True}})
    with pytest.raises(monitors.MonitorError, match=">= 0.01"):
        monitors.validate({"vmstat": {"interval": 0}})
    assert monitors.parse_spec("interrupts:interval=0.5,per_cpu=true") == {"interrupts": {"interval": 0.5, "per_cpu": True}}
    assert monitors.validate(["vmstat"]) == {"vmstat": {"interval": 1.0}}


# ---- through the runner and the CLI ------------------------------------------------

def test_run_records_monitor_metrics_series_and_what_ran(cli, faulter):
    cli("run", "cmd", "--runs", "2", "--monitor", "proc-vmstat:interval=0.05", "--monitor", "vmstat:interval=0.05",
        "--monitor", "softirqs", "--", faulter)
    (run_id, monitors_json), = cli.sql("select id, monitors from run")
    record = json.loads(monitors_json)
    assert set(record) == {"proc-vmstat", "vmstat", "softirqs"}
    assert record["vmstat"]["interval"] == 0.05 and record["vmstat"]["status"] == "ran"
    # One per-run figure per repetition, beside the command's own samples.
    rows = cli.sql("select repetition, value from sample where metric = 'proc-vmstat.pgfault' order by repetition")
    assert [r for r, _ in rows] == [0, 1] and all(v > 2000 for _, v in rows)
    assert cli.sql("select count(*) from sample where metric = 'time.elapsed_time'") == [(2,)]
    series = cli.sql("select repetition, t, \"values\" from monitor_series where monitor = 'vmstat' order by id")
    assert {r for r, _, _ in series} == {0, 1}
    assert "cpu.sy" in json.loads(series[0][2])
    shown = cli("show", str(run_id)).stdout
    assert "monitor   vmstat (interval=0.05): ran" in shown and "proc-vmstat.pgfault" not in shown
    assert "proc-vmstat.pgfault" in cli("show", str(run_id), "--monitors").stdout


def test_job_file_monitors_and_their_errors_name_the_line(cli, tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("benchmark: cmd\nargv: [/bin/true]\nruns: 2\nmonitors:\n  meminfo: {interval: 0.5}\n")
    cli("run", str(job))
    (record,), = cli.sql("select monitors from run")
    assert json.loads(record)["meminfo"]["options"] == {"interval": 0.5}
    assert cli.sql("select count(*) from sample where metric = 'meminfo.MemTotal'") == [(2,)]
    job.write_text("benchmark: cmd\nargv: [/bin/true]\nmonitors:\n  meminfo: {interval: 0.5, colour: red}\n")
    assert_one_line_error(cli("run", str(job), check=False), "job.yaml:3", "unknown option 'colour'", "valid: interval")
    assert_one_line_error(cli("run", "cmd", "--monitor", "vmstat:every=2", "--", "/bin/true", check=False),
                          "unknown option 'every'")
    assert_one_line_error(cli("run", "cmd", "--monitor", "nosuch", "--", "/bin/true", check=False),
                          "unknown monitor 'nosuch'", "valid: vmstat")
    assert cli.sql("select count(*) from run") == [(1,)]     # nothing half-written


def test_monitors_command_lists_every_monitor(cli):
    out = cli("monitors").stdout
    for name in monitors.MONITORS:
        assert f"\n{name}" in "\n" + out
    assert "records:" in out and "interval=1.0" in out


def test_warm_up_processes_are_not_monitored(cli, tmp_path):
    # The two warm-ups sleep 0.5 s each, the timed repetition 0.1 s: a series that took in a
    # warm-up would be far longer than the timed process, however slow the machine.
    count = tmp_path / "count"
    script = (f"n=$(cat {count} 2>/dev/null || echo 0); echo $((n + 1)) > {count}; "
              f"if [ $n -lt 2 ]; then sleep 0.5; else sleep 0.1; fi")
    cli("run", "cmd", "--runs", "1", "--warmup", "2", "--monitor", "proc-stat:interval=0.02", "--",
        "/bin/sh", "-c", script)
    assert count.read_text() == "3\n"
    # Only the timed repetition's process: one per-run figure, a series as long as it (plus the
    # launcher's start and end around it), a row per 0.02 s tick of it at most.
    assert cli.sql("select count(*) from sample where metric = 'proc-stat.ctxt'") == [(1,)]
    (elapsed,), = cli.sql("select value from sample where metric = 'time.elapsed_time'")
    ts = [t for (t,) in cli.sql("select t from monitor_series")]
    assert elapsed >= 0.1 and max(ts) < elapsed + 0.4
    assert len(ts) <= max(ts) / 0.02 + 2


def test_a_job_file_takes_the_default_set_as_the_command_line_does(tmp_path):
    """Issue 44, finding 10: `monitors: [default]` is `--monitor default`'s set; named ones beside it."""
    from perflab import jobs

    default = {name: monitors.parse_options(name, {}).model_dump(mode="json") for name in monitors.DEFAULT_SET}
    job = tmp_path / "job.yaml"
    for text in ("monitors: [default]\n", "monitors: default\n", "monitors:\n  default:\n"):
        job.write_text("benchmark: cmd\nargv: [/bin/true]\n" + text)
        (atomic,) = jobs.load_atomic(str(job), [])
        assert atomic.monitors == default, (text, atomic.monitors)
    job.write_text("benchmark: cmd\nargv: [/bin/true]\nmonitors:\n  default:\n  vmstat: {interval: 0.5}\n  softirqs:\n")
    (atomic,) = jobs.load_atomic(str(job), [])
    assert set(atomic.monitors) == set(monitors.DEFAULT_SET) | {"softirqs"}
    assert atomic.monitors["vmstat"]["interval"] == 0.5
    with pytest.raises(monitors.MonitorError, match="'default' is the default set"):
        monitors.validate({"default": {"interval": 2}})

"""Each monitor's window said (issue 44, item 7): every monitor declares the window its figures
cover, a run records the one it counted, and `show`, `compare` and `report profile` say it;
figures over different windows are not set side by side, and a tick-sampled figure read in a
guest says so.

The finding, from one getppid1 run under icount: perf-stat's cpu-clock covered the benchmark
process's life (0.2 s), insn-profile its measured part (0.1 s), and proc-stat.cpu.user read
29.3% where the counted user instructions were 2.7%. The store here is planted with those
figures; no guest boots.
"""

from __future__ import annotations

import json

from perflab.core.model import INFORMATIONAL, Sample
from perflab.monitors import MONITORS, MonitorSet, monitor_class

MEASURED, PROCESS = "measured", "process"      # perflab.monitors.windows' names, as runs record them

GUEST = {"status": "ran", "options": {}, "unsupported": [], "errors": [], "where": "in the VM guest"}
RELEASES = ("6.1.0-47-amd64", "6.1.0-56-amd64")


def test_every_monitor_declares_its_window():
    from perflab.monitors.windows import TEXT

    for name in MONITORS:
        assert monitor_class(name).window in TEXT, name
    assert monitor_class("insn-profile").window == MEASURED and monitor_class("perf-stat").window == PROCESS
    # /proc/stat's cpu line is tick accounting, in proc-stat and in vmstat's cpu columns
    assert monitor_class("proc-stat").tick_sampled == ("cpu.",) and monitor_class("vmstat").tick_sampled == ("cpu.",)
    assert monitor_class("meminfo").tick_sampled == ()


def test_perflab_monitors_lists_each_window(cli):
    out = cli("monitors").stdout
    assert out.count("\n    window: ") == len(MONITORS)
    assert "    window: the benchmark's measured part (by default; see its option window)" in out
    assert "    window: the benchmark process's life (its warm-up included); cpu.* tick-sampled" in out


def test_a_run_records_the_window_its_monitors_counted():
    monitors = MonitorSet({"meminfo": {}, "proc-stat": {}})
    monitors.begin()
    monitors.end()
    monitors.collect()
    monitors.close()
    assert monitors.record["meminfo"]["window"] == PROCESS and monitors.record["proc-stat"]["window"] == PROCESS


def _plant(cli, windows: tuple[str, str]) -> None:
    """getppid1 on two kernels, in a guest: insn-profile over `windows` (base, head), proc-stat and
    perf-stat over the process's life."""
    from perflab.store import open_store

    store = open_store(str(cli.db))
    for release, window in zip(RELEASES, windows):
        run = store.create_run(box="box", environment={"testbox": "box", "kernel_release": release},
                               benchmark="will-it-scale", name="will-it-scale",
                               params={"test": "getppid1", "mode": "process", "nr_task": 1}, tag="icount")
        for rep in range(2):
            store.add_samples(run, rep, [
                Sample("will-it-scale.workload", 3046597.0, "ops/s", 1, exact=True),
                Sample("insn-profile.instructions", 99.95e6, "instructions", INFORMATIONAL, exact=True),
                Sample("insn-profile.user", 2.7e6, "instructions", INFORMATIONAL, exact=True),
                Sample("insn-profile.self.do_syscall_64", 97.25e6, "instructions", INFORMATIONAL, exact=True),
                Sample("proc-stat.cpu.user", 29.3 + rep, "%", INFORMATIONAL),
                Sample("perf-stat.cpu-clock.total", 200.0 + rep, "msec", INFORMATIONAL)])
        store.set_run_monitors(run, {"insn-profile": {**GUEST, "window": window},
                                     "proc-stat": {**GUEST, "window": PROCESS}, "perf-stat": dict(GUEST)})
        store.finish_run(run, "finished")


def test_show_sets_each_window_apart_and_says_tick_sampling_in_a_guest(cli):
    _plant(cli, (MEASURED, MEASURED))
    out = cli("show", "1", "--monitors").stdout
    lines = out.splitlines()
    assert "  monitor   insn-profile (): ran, over the benchmark's measured part" in lines
    proc = next(l for l in lines if l.startswith("  monitor   proc-stat"))
    assert "over the benchmark process's life" in proc and "tick-sampled in a guest" in proc
    measured = lines.index("  monitor figures over the benchmark's measured part: insn-profile")
    life = lines.index("  monitor figures over the benchmark process's life (its warm-up included): proc-stat, perf-stat")
    # each figure in its window's table, never in the other's
    assert all(not l.startswith(("  proc-stat", "  perf-stat")) for l in lines[measured:life])
    assert any(l.startswith("  insn-profile.user") for l in lines[measured:life])
    assert any(l.startswith("  proc-stat.cpu.user") for l in lines[life:])
    assert lines[life + 1].startswith("  proc-stat.cpu.*: tick-sampled in a guest")
    # the benchmark's own figure is in the first table, before any monitor's
    assert lines[measured - 2].startswith("  will-it-scale.workload")


def test_compare_says_the_window_and_leaves_out_figures_over_different_windows(cli):
    _plant(cli, (PROCESS, MEASURED))      # a base counted with window: process, a head with auto
    out = cli("compare", f"kernel={RELEASES[0]}", f"kernel={RELEASES[1]}", "--monitors", "all").stdout
    assert "insn-profile.instructions" not in out and "insn-profile.user" not in out
    assert ("note: insn-profile: not compared, its figures cover different windows on the sides (the benchmark "
            "process's life (its warm-up included), the benchmark's measured part)") in out
    summary = next(l for l in out.splitlines() if "-- monitors:" in l)
    assert "window: the benchmark process's life (its warm-up included)" in summary
    assert "proc-stat.cpu.* tick-sampled in a guest" in summary
    assert "proc-stat.cpu.user" in out and "perf-stat.cpu-clock.total" in out
    doc = json.loads(cli("compare", f"kernel={RELEASES[0]}", f"kernel={RELEASES[1]}", "--monitors", "all",
                         "--style", "json").stdout)
    assert doc["monitor_windows"] == summary.split("; ", 1)[1].removesuffix(" --")
    assert not any(r["metric"].startswith("insn-profile.") for r in doc["metrics"])


def test_report_profile_does_not_diff_counts_over_different_windows(cli):
    _plant(cli, (PROCESS, MEASURED))
    out = cli("report", "profile", f"kernel={RELEASES[0]}", f"kernel={RELEASES[1]}").stdout
    assert ("# not compared: the base was counted over the benchmark process's life (its warm-up included), "
            "the head over the benchmark's measured part") in out
    assert "do_syscall_64" not in out


def test_report_profile_says_the_window_counted_once(cli):
    _plant(cli, (MEASURED, MEASURED))
    out = cli("report", "profile", f"kernel={RELEASES[0]}", f"kernel={RELEASES[1]}").stdout
    assert out.count("counted over the benchmark's measured part") == 1 and "do_syscall_64" in out


def test_a_malformed_monitor_record_is_read_as_the_declared_window(cli):
    """An imported or hand-edited record (a string, notes not a list, an unknown window) is no traceback."""
    from perflab.store import open_store

    _plant(cli, (MEASURED, MEASURED))
    store = open_store(str(cli.db))
    store.set_run_monitors(1, {"insn-profile": "junk", "proc-stat": {"status": "ran", "notes": "x", "window": 7}})
    shown = cli("show", "1", "--monitors").stdout
    assert "monitor figures over the benchmark process's life (its warm-up included): proc-stat, perf-stat" in shown
    assert "counted over the benchmark's measured part" in cli("report", "profile", f"kernel={RELEASES[0]}",
                                                               f"kernel={RELEASES[1]}").stdout
    assert "-- monitors:" in cli("compare", f"kernel={RELEASES[0]}", f"kernel={RELEASES[1]}", "--monitors", "all").stdout


def test_windows_apart_are_found_when_an_operand_holds_several_variants(cli):
    """Two flavours under each tag: compare keeps them apart (a `variant` among the groups' params),
    and a monitor counted over different windows on the sides is still left out of each pair."""
    from perflab.store import open_store

    store = open_store(str(cli.db))
    for tag, window in (("base", PROCESS), ("head", MEASURED)):
        for release in ("6.1.0-47-amd64", "6.1.0-47-rt-amd64"):
            run = store.create_run(box="box", environment={"testbox": "box", "kernel_release": release},
                                   benchmark="will-it-scale", name="will-it-scale", tag=tag,
                                   params={"test": "getppid1", "mode": "process", "nr_task": 1, "vm": "icount"})
            for rep in range(2):
                store.add_samples(run, rep, [
                    Sample("will-it-scale.workload", 3046597.0, "ops/s", 1, exact=True),
                    Sample("insn-profile.instructions", 99.95e6, "instructions", INFORMATIONAL, exact=True)])
            store.set_run_monitors(run, {"insn-profile": {**GUEST, "window": window}})
            store.finish_run(run, "finished")
    out = cli("compare", "base", "head", "--monitors", "all").stdout
    assert "variant=" in out                                  # the flavours kept apart
    assert "insn-profile.instructions" not in out
    assert "note: insn-profile: not compared, its figures cover different windows on the sides" in out

"""Where, inside the kernel under test (issue 35): monitors in a VM guest and insn-profile.

The pure parts (the plugin's and the agent's formats, naming blocks with kallsyms, the
guest monitor set's reductions, the exact diff) without a guest; then real guests of a
Debian kernel with the plugin loaded, one boot per test: an icount guest's profile (exact
figures need icount); a guest program's marker flood and a job forging /proc/kallsyms
(issue 45) under plain TCG, where the plugin counts and the symbols are read alike and a
boot costs half an icount one's CPU. Skipped with the reason when QEMU or the kernel is absent.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import assert_one_line_error
from perflab.execution.executor import Hooks, InstructionCounts, Readings
from perflab.execution.vm import kernel
from perflab.execution.vm.counting import parse_counts
from perflab.execution.vm.machine import parse_readings
from perflab.monitors.guest import GuestMonitorSet
from perflab.monitors.insns import KernelSymbols, by_function
from perflab.stats.profile import compare_instructions

KERNEL = os.environ.get("PERFLAB_TEST_KERNEL") or kernel.cached()
needs_vm = pytest.mark.skipif(
    shutil.which("qemu-system-x86_64") is None or not KERNEL or not Path(KERNEL).is_file(),
    reason="needs qemu-system-x86_64 (Debian qemu-system-x86) and a kernel: python tools/fetch_kernel.py")

KALLSYMS = ("ffffffff81000000 T _stext\n"
            "ffffffff81001000 T do_syscall_64\n"
            "ffffffff81001200 t helper_inlined_nowhere\n"
            "ffffffff81002000 D some_data\n"
            "ffffffff81003000 T __x64_sys_getppid\n"
            "ffffffffc0000000 t ext4_fill_super\t[ext4]\n")


def test_the_plugins_windows_are_read_back_summed_per_block():
    text = ("window 1 0 3\n0 500\nffffffff81001010 40\nffffffff81001010 2\n"
            "window 1 1 2\n0 100\nffffffff81003004 7\nend 1\n")
    assert parse_counts(text) == {0: {0: 500, 0xffffffff81001010: 42}, 1: {0: 100, 0xffffffff81003004: 7}}
    assert parse_counts("") == {}


def test_the_agents_readings_are_grouped_per_instant():
    def one(t, path, text):
        return b"%d %d %d\n" % (t, len(path), len(text)) + path + text

    data = one(10, b"/proc/stat", b"cpu 1 2\n") + one(10, b"/proc/meminfo", b"") + one(2_000_000_010, b"/proc/stat",
                                                                                        b"cpu 3 4\n")
    assert parse_readings(data) == [(1e-8, {"/proc/stat": "cpu 1 2\n", "/proc/meminfo": ""}),
                                    (2.00000001, {"/proc/stat": "cpu 3 4\n"})]


def test_kernel_blocks_are_named_by_the_text_symbol_they_start_in():
    symbols = KernelSymbols(KALLSYMS)
    assert symbols.name(0xffffffff81001000) == "do_syscall_64"
    assert symbols.name(0xffffffff81001fff) == "helper_inlined_nowhere"
    assert symbols.name(0xffffffff81002100) == "helper_inlined_nowhere"     # data symbols do not cut text
    assert symbols.name(0xffffffffc0000123) == "ext4_fill_super"
    assert symbols.name(0xffffffff80000000) == "[unknown]"
    user, functions = by_function({0: 9, 0xffffffff81001010: 30, 0xffffffff81001020: 1, 0xffffffff81003000: 13},
                                  symbols)
    assert (user, functions) == (9, {"do_syscall_64": 31, "__x64_sys_getppid": 13})
    assert not KernelSymbols("0000000000000000 T _stext\n0000000000000000 T do_syscall_64\n")   # kptr_restrict


def test_guest_monitors_reduce_the_guests_readings_to_the_hosts_names():
    """What the agent read in the guest goes through the same monitors: vmstat's columns and
    interrupts' sources under their usual names; insn-profile's parts add up to the whole."""
    monitors = GuestMonitorSet({"vmstat": {}, "interrupts": {}, "insn-profile": {"min_share": 10}}, exact=True)
    hooks = monitors.hooks(0)
    assert isinstance(hooks, Hooks) and not hooks.start and not hooks.stop
    readings = [r for r in hooks.inside if isinstance(r, Readings)]
    assert {p for r in readings for p in r.paths} == {"/proc/stat", "/proc/meminfo", "/proc/vmstat", "/proc/interrupts"}
    texts = {p: open(p).read() for r in readings for p in r.paths}
    for r in readings:     # what the guest's agent fills: a reading at the start and one at the end
        r.taken = [(1.0, {p: texts[p] for p in r.paths}), (1.5, {p: texts[p] for p in r.paths})]
    (counts,) = [c for c in hooks.inside if isinstance(c, InstructionCounts)]
    counts.windows = {0: {0: 1000, 0xffffffff81001000: 9000},
                      1: {0: 100, 0xffffffff81001000: 850, 0xffffffff81003000: 40, 0xffffffff81000000: 10}}
    counts.symbols, counts.symbols_from = KALLSYMS, "a test's kallsyms"
    collected = monitors.collect()
    vmstat = {s.metric: s for s in collected["vmstat"].samples}
    assert {"vmstat.memory.free", "vmstat.system.in", "vmstat.procs.r"} <= set(vmstat)
    assert any(s.metric.startswith("interrupts.") for s in collected["interrupts"].samples)
    insns = {s.metric: s.value for s in collected["insn-profile"].samples}
    # the measured part (channel 1) when the harness marked one; 40 and 10 are under 10% of 1000
    assert insns == {"insn-profile.instructions": 1000, "insn-profile.user": 100, "insn-profile.kernel": 900,
                     "insn-profile.self.do_syscall_64": 850, "insn-profile.self.[other]": 50}
    assert all(s.exact and s.unit == "instructions" for s in collected["insn-profile"].samples)
    assert monitors.record["insn-profile"]["window"] == "measured"     # the window apart (issue 44)
    assert monitors.record["vmstat"]["window"] == "process"
    assert monitors.record["vmstat"]["where"] == "in the VM guest"


def test_a_window_split_by_the_guests_own_markers_is_noted_stored_and_not_exact():
    """Issue 45, G8: the note the guest's counts carry goes into the run's monitor record, is
    printed once however many repetitions carry it, and those counts are not called exact."""
    from perflab.execution.vm.counting import Windows

    warnings = []
    monitors = GuestMonitorSet({"insn-profile": {}}, warn=warnings.append, exact=True)
    note = Windows({}, 300001, True, 300001).note()
    for _ in range(2):
        (counts,) = monitors.hooks(0).inside
        counts.windows = {0: {0: 1000, 0xffffffff81001000: 9000}}
        counts.symbols, counts.symbols_from, counts.note = KALLSYMS, "a test's kallsyms", note
        samples = monitors.collect()["insn-profile"].samples
        assert samples and not any(s.exact for s in samples)
    assert note.startswith("the guest reported 300,001 instruction-counting windows for one process")
    assert note in monitors.record["insn-profile"]["notes"] and "capped" in note
    assert warnings == [f"monitor insn-profile: {note}"]
    assert Windows({}, 1, False, 7).note() == ""


def test_a_guest_file_that_cannot_be_read_drops_only_its_monitor():
    warnings = []
    monitors = GuestMonitorSet({"meminfo": {}, "proc-stat": {}}, warn=warnings.append)
    hooks = monitors.hooks(0)
    for r in hooks.inside:
        text = "" if "meminfo" in r.paths[0] else open(r.paths[0]).read()
        r.taken = [(0.0, {r.paths[0]: text}), (0.1, {r.paths[0]: text})]
    collected = monitors.collect()
    assert "meminfo" not in collected and "proc-stat" in collected
    assert monitors.record["meminfo"]["status"] == "failed" and "cannot read /proc/meminfo" in warnings[0]


def test_the_exact_diff_lists_what_changed_and_adds_up_to_the_whole():
    base = [{"do_syscall_64": 300, "entry": 400, "[user]": 300}] * 2
    head = [{"do_syscall_64": 330, "entry": 400, "[user]": 300, "new_fn": 70}] * 2
    # per operation: base 10 instruction-ns per op, head 11
    result = compare_instructions(base, head, [10.0, 10.0], [11.0, 11.0])
    assert result.per == "operation" and result.base_total == pytest.approx(10) and result.head_total == pytest.approx(11)
    rows = {r.symbol: r for r in result.symbols}
    assert rows["new_fn"].change == pytest.approx(0.7) and rows["do_syscall_64"].change == pytest.approx(0.3)
    assert rows["entry"].change == pytest.approx(0.0) and not rows["entry"].changed
    assert result.symbols[0].symbol == "new_fn" and result.symbols[0].changed
    assert sum(r.change for r in result.symbols) == pytest.approx(result.total_change)
    # without a figure per operation: instructions of the window
    per_window = compare_instructions(base, head)
    assert per_window.per == "window" and per_window.total_change == pytest.approx(100)
    # a row whose repetitions spread more than it moved is not called changed
    noisy = compare_instructions([{"a": 100}, {"a": 110}], [{"a": 104}, {"a": 112}])
    assert not noisy.symbols[0].changed


def test_insn_profile_on_the_host_or_under_kvm_is_refused_in_one_line(cli, tmp_path):
    proc = cli("run", "cmd", "--monitor", "insn-profile", "--", "true", check=False)
    assert_one_line_error(proc, "monitor insn-profile counts the instructions of a VM guest")
    proc = cli("run", "cmd", "--kernel", tmp_path / "bzImage", "--vm", "kvm", "--monitor", "insn-profile",
               "--", "true", check=False)
    assert_one_line_error(proc, "needs QEMU's TCG")
    assert not cli.db.exists() or cli.sql("SELECT count(*) FROM run") == [(0,)]


@pytest.mark.vm
@needs_vm
def test_an_icount_guest_gives_monitors_and_an_exact_profile_of_its_kernel(cli):
    """getppid1 in a Debian kernel under icount: the guest's vmstat, interrupts and perf stat,
    and the instructions per kernel function of the measured part, the same in both repetitions."""
    cli("run", "will-it-scale", "--test", "getppid1", "--runs", "2", "--kernel", KERNEL, "--vm", "icount",
        "--monitor", "insn-profile", "--monitor", "vmstat", "--monitor", "interrupts", "--monitor",
        "perf-stat:events=[context-switches,page-faults,cycles]", timeout=600)
    rows = cli.sql("SELECT metric, value, unit, repetition FROM sample WHERE run_id = 1 AND metric LIKE 'insn-profile.%'")
    by = {}
    for metric, value, unit, rep in rows:
        by.setdefault(metric, {})[rep] = value
        assert unit == "instructions"
    total = by["insn-profile.instructions"]
    assert set(total) == {0, 1} and 0.09e9 < total[0] < 0.3e9          # a window of >= 0.1 s of instruction-time
    assert by["insn-profile.user"][0] + by["insn-profile.kernel"][0] == total[0]
    # Exact: getppid's own instructions are whole calls in both repetitions (13 each on 6.1.0-47;
    # the kernel switches tasks at the syscall's exit), and the report's per-operation figure (a
    # row's share of the window times the benchmark's instruction-time per operation, 1e9 / ops
    # per second) is that per-call count. It moves only
    # by the blocks other processes left early (page faults) in the window, which the plugin
    # counts whole: 9.7e-5 with a third of the window another process's (3e-4 if all of it were).
    # The window's share and total are not exact: the one vCPU runs what else wakes in those 0.1 s
    # (perf stat, the agent's readings), and how much of it falls in the window follows the host's
    # answers to the guest's I/O: getppid's share 3.4% and 32% apart at load 14-16 (docs/vm.md).
    per_op = {r: 1e9 / v for r, v in cli.sql("SELECT repetition, value FROM sample WHERE run_id = 1 "
                                              "AND metric = 'will-it-scale.workload'")}
    own = by["insn-profile.self.__x64_sys_getppid"]
    getppid = [own[r] / total[r] * per_op[r] for r in (0, 1)]
    per_call = round(getppid[0])
    assert per_call > 0 and all(own[r] % per_call == 0 for r in (0, 1)), (own, per_call)
    assert all(abs(g - per_call) < 1e-3 * per_call for g in getppid), getppid
    values = dict(cli.sql("SELECT metric, avg(value) FROM sample WHERE run_id = 1 GROUP BY metric"))
    assert values["vmstat.cpu.sy"] > 50 and values["interrupts.LOC:Local_timer_interrupts"] > 0
    # perf stat ran in the guest (the host's perf over 9p), counting only around the benchmark
    assert values["perf-stat.page-faults.total"] > 0 and "perf-stat.context-switches" in values
    (record,) = cli.sql("SELECT monitors FROM run WHERE id = 1")[0]
    assert json.loads(record)["perf-stat"]["unsupported"] == ["cycles"]       # TCG has no hardware counters
    notes = json.loads(record)["insn-profile"]["notes"][0]
    assert json.loads(record)["insn-profile"]["window"] == "measured" and "the guest's /proc/kallsyms" in notes
    shown = cli("report", "profile", "1").stdout
    assert "instructions per operation (from will-it-scale.workload)" in shown and "__x64_sys_getppid" in shown


@pytest.mark.skipif(shutil.which("valgrind") is None or shutil.which("cc") is None, reason="needs valgrind and cc")
def test_user_space_functions_counted_by_valgrind_diff_alike(cli, tmp_path):
    """`measure: instructions` stores the process's functions under insn-profile's names: a
    version that adds work to one function is named by that function, exactly."""
    source = ("static volatile long sink;\n__attribute__((noinline)) void work(int n) { for (int i = 0; i < n; i++) sink += i; }\n"
              "__attribute__((noinline)) void other(void) { for (int i = 0; i < 50000; i++) sink ^= i; }\n"
              "int main(void) { work(N); other(); return 0; }\n")
    for tag, n in (("v1", 100000), ("v2", 130000)):
        (tmp_path / f"{tag}.c").write_text(source.replace("N", str(n)))
        subprocess.run(["cc", "-O1", "-o", tmp_path / tag, tmp_path / f"{tag}.c"], check=True)
        cli("run", "cmd", "--measure", "instructions", "--runs", "2", "--tag", tag, "--", str(tmp_path / tag))
    shown = cli("report", "profile", "v1", "v2", "--top", "3").stdout
    rows = [line.split() for line in shown.splitlines() if line.strip() and not line.startswith("#")]
    assert rows[2][-1] == "work", shown                  # after the heading and the (all) row
    base, head, change = (int(w.replace(",", "").lstrip("+")) for w in rows[2][:3])
    assert change == head - base and change >= 30000 * 3     # 30,000 more iterations of a loop of 3+ instructions
    assert "by valgrind on this machine" in shown


@pytest.mark.vm
@needs_vm
def test_perf_profile_samples_the_guest_kernel_with_its_own_symbols(cli, tmp_path):
    """perf-profile in a tcg guest: the host's perf records there and `perf script` runs there,
    so the samples are named by the guest kernel's symbols; report profile shows them."""
    job = tmp_path / "wis.yaml"
    # One run, not will-it-scale's default three: what is checked is how one run's samples are named.
    job.write_text(f"benchmark: will-it-scale\nkernel: {KERNEL}\nvm: {{mode: tcg}}\ntest: getppid1\nduration: 0.5\n"
                   "warmup_time: 0.1\ninterval: 0.5\nruns: 1\nmonitors: {perf-profile: {freq: 2000}}\n")
    cli("run", job, timeout=600)
    metrics = {m for (m,) in cli.sql("SELECT DISTINCT metric FROM sample WHERE run_id = 1")}
    assert "perf-profile.children.cycles-pp.do_syscall_64" in metrics, sorted(metrics)[:20]
    shown = cli("report", "profile", "1").stdout
    assert "[k] do_syscall_64" in shown and "run in the guest over 9p" in shown


# A guest program that runs the agent's process markers itself (vm/c/insns.c): N times the end
# of the window, a new start and a getppid; the bench's source (tools/bench/insn_marker_flood.py).
FLOOD_C = (Path(__file__).resolve().parents[1] / "tools" / "bench" / "marker_flood.c").read_text()


def flood_program(where: Path) -> Path:
    from perflab.core import cbuild

    (where / "marker_flood.c").write_text(FLOOD_C)
    return cbuild.build("marker_flood", where, cc="cc", flags=("-O2", "-static"))


@pytest.mark.vm
@needs_vm
def test_a_marker_flood_is_capped_in_the_hosts_disk_and_memory_and_said(tmp_path):
    """Issue 45, G8: a guest program repeating the end/start marker makes the plugin write a window
    each time. The file it writes in the host's TMPDIR stays under its limit (plus a window), the
    host reads it in bounded memory, and the counts carry a note; the next request is whole again."""
    import threading
    import tracemalloc

    from perflab.core.process import ProcessSpec
    from perflab.execution.vm import VmSpec, boot
    from perflab.execution.vm.counting import COUNTS_FILE, WINDOW_FILE_LIMIT

    flood = flood_program(tmp_path)
    # TCG, not icount: the plugin and its cap are the same; nothing here is a figure.
    with boot(VmSpec(kernel=KERNEL, mode="tcg", count_instructions=True, boot_timeout=300),
              files={"/usr/bin/marker_flood": flood}) as guest:
        largest, done = [0], threading.Event()

        def watch():      # the largest the file got, seen now and then (a bound: missing a peak only lowers it)
            while not done.wait(0.05):
                with contextlib.suppress(OSError):
                    largest[0] = max(largest[0], (guest.workdir / COUNTS_FILE).stat().st_size)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        counts = InstructionCounts()
        tracemalloc.start()
        try:
            result = guest.execute(ProcessSpec(["/usr/bin/marker_flood", "12000"], timeout=900),
                                   hooks=Hooks(inside=[counts]))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
            done.set()
            watcher.join()
        assert result.ok, result.stderr_tail
        assert counts.note.startswith("the guest reported 12,001 instruction-counting windows for one process")
        assert "capped" in counts.note and counts.windows[0], largest
        assert largest[0] <= WINDOW_FILE_LIMIT + (1 << 20), largest
        assert peak < 4 << 20, peak         # reading the windows: one at a time
        # The next process is counted whole again, with nothing of the flood's.
        again = InstructionCounts()
        assert guest.execute(ProcessSpec(["/usr/bin/marker_flood", "0"]), hooks=Hooks(inside=[again])).ok
        assert again.note == "" and again.windows[0][0] > 0


@pytest.mark.vm
@needs_vm
def test_a_job_cannot_forge_the_kernel_symbols_that_name_the_counts(cli, tmp_path, shared_cache):
    """Issue 45, G4: a job mounts a forged /proc/kallsyms over the guest's, its text symbols renamed
    POISONED_*. The symbols were read at boot, before the job ran: its own counts are named by the
    real ones, and nothing forged reaches the host's kallsyms cache (which later boots of the same
    kernel and modules read)."""
    cache = tmp_path / "cache"
    (cache / "perflab").mkdir(parents=True)
    for entry in (shared_cache / "perflab").glob("*") if (shared_cache / "perflab").is_dir() else ():
        if entry.name != "kallsyms":      # the compiled programs are shared; the symbol cache starts empty
            (cache / "perflab" / entry.name).symlink_to(entry)
    forge = ("sed 's/ \\([tT]\\) / \\1 POISONED_/' /proc/kallsyms >/tmp/fk && "
             "mount -c --bind /tmp/fk /proc/1/root/proc/kallsyms && grep -q ' POISONED_' /proc/1/root/proc/kallsyms")
    # Two runs, not cmd's default ten: the first forges the file while it is counted, the second is
    # counted with the forged file in place from its start (as every later run would be). TCG,
    # not icount: the symbols are read at boot alike, and nothing here is a figure.
    cli("run", "cmd", "--runs", "2", "--kernel", KERNEL, "--vm", "tcg", "--monitor", "insn-profile", "--",
        "sh", "-c", forge, timeout=900, env={"XDG_CACHE_HOME": str(cache)})
    assert cli.sql("SELECT count(DISTINCT repetition) FROM sample WHERE metric = 'insn-profile.instructions'") == [(2,)]
    assert cli.sql("SELECT status FROM run") == [("finished",)]     # the forged file was in place
    named = [m for (m,) in cli.sql("SELECT DISTINCT metric FROM sample WHERE metric LIKE 'insn-profile.self.%'")]
    assert len(named) > 2 and not [m for m in named if "POISONED_" in m], named
    kept = list((cache / "perflab" / "kallsyms").glob("kallsyms-*"))
    assert kept and all("POISONED_" not in p.read_text() for p in kept)
    # Only the text symbols came through the agent's UART (SYMS): half the file's bytes.
    lines = [line.split() for p in kept for line in p.read_text().splitlines()]
    assert len(lines) > 1000 and {words[1] for words in lines} <= set("tTwW"), {words[1] for words in lines}

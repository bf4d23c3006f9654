"""The VM executor (perflab.execution.vm), for real: QEMU boots a Debian kernel (fetched by
tools/fetch_kernel.py) with perflab's initramfs, and processes run inside through the launcher.

Skipped with the reason when qemu-system-x86_64 or the kernel is absent. Each test stays
under 60 s on a 2-core machine: one TCG boot is shared by the executor tests; the icount
check boots twice, side by side. The boots here are given BOOT_TIMEOUT, not VmSpec's 60 s:
a TCG boot takes 16 s and an icount one 26 s on this machine under a load of 10, and two side
by side or under more load come near 60 s; a hung boot still fails, after BOOT_TIMEOUT.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from perflab.core import cbuild
from perflab.core.errors import PerflabError
from perflab.core.process import ProcessSpec
from perflab.execution.vm import VmError, VmSpec, boot, initramfs, kernel
from perflab.execution.vm.machine import boot_phase_facts

pytestmark = pytest.mark.vm

KERNEL = os.environ.get("PERFLAB_TEST_KERNEL") or kernel.cached()
# How long a boot here may take before it counts as hung: a backstop, not a measure of speed.
BOOT_TIMEOUT = 300
needs_vm = pytest.mark.skipif(
    shutil.which("qemu-system-x86_64") is None or not KERNEL or not Path(KERNEL).is_file(),
    reason="needs qemu-system-x86_64 (Debian qemu-system-x86) and a kernel: python tools/fetch_kernel.py")

# Times N getppid() calls with clock_gettime, in rounds: under icount, instruction-time.
GETPPID_C = r"""
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000, rounds = argc > 2 ? atol(argv[2]) : 3;
	for (long r = 0; r < rounds; r++) {
		struct timespec a, b;
		clock_gettime(CLOCK_MONOTONIC, &a);
		for (long i = 0; i < n; i++)
			syscall(SYS_getppid);
		clock_gettime(CLOCK_MONOTONIC, &b);
		double ns = ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n;
		printf("{\"round\": %ld, \"getppid_ns\": %.3f}\n", r, ns);
	}
	fprintf(stderr, "done %ld\n", n);
	return 0;
}
"""


@pytest.fixture(scope="module")
def getppid_program(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("getppid")
    (src / "getppid_ns.c").write_text(GETPPID_C)
    return cbuild.build("getppid_ns", src, cc="cc", flags=("-O2", "-static"))


@pytest.fixture(scope="module")
def started_ahead() -> dict:
    """The QEMU pids of the guest fixture's two boots started ahead: the decoy's and the wanted one's."""
    return {}


@pytest.fixture(scope="module")
def guest(getppid_program, started_ahead):
    """The executor tests' one TCG boot, booted as `perflab run` boots it: started ahead, beside
    a decoy boot of another command line, then taken by boot() (which kills the decoy). One boot
    for the executor tests and the start-ahead test, not one each (a TCG boot: 12-16 s of CPU)."""
    from perflab.execution.vm import machine

    if shutil.which("qemu-system-x86_64") is None or not KERNEL:
        pytest.skip("needs qemu-system-x86_64 and a kernel")
    files = {"/usr/bin/getppid_ns": getppid_program}
    wanted = VmSpec(kernel=KERNEL, mode="tcg", boot_timeout=BOOT_TIMEOUT)
    machine.start_ahead(VmSpec(kernel=KERNEL, append="perflab.not-this-one", boot_timeout=BOOT_TIMEOUT))
    machine.start_ahead(wanted, files=files)
    started_ahead["other"], started_ahead["ahead"] = (s.process.pid for s in machine._AHEAD)
    try:
        with boot(wanted, files=files) as g:
            yield g
    finally:
        machine.drop_ahead()
    # The guest's end is the end of the QEMU started ahead (the test's own check, at the module's end).
    assert not _alive(started_ahead["ahead"])


def test_cpio_round_trip():
    entries = [initramfs.Entry("bin", stat.S_IFDIR | 0o755),
               initramfs.Entry("bin/x", stat.S_IFREG | 0o755, b"12345"),
               initramfs.Entry("bin/y", stat.S_IFLNK | 0o777, b"x"),
               initramfs.Entry("dev/null", stat.S_IFCHR | 0o666, rdev=(1, 3))]
    data = initramfs.write_cpio(entries)
    assert len(data) % 4 == 0 and data.startswith(b"070701")
    assert initramfs.read_cpio(data) == entries
    assert b"TRAILER!!!" in data


@pytest.mark.skipif(shutil.which("busybox") is None, reason="needs busybox to read the archive back")
def test_initramfs_is_read_by_busybox_cpio(tmp_path):
    image = initramfs.build({"/opt/hello": "/bin/busybox"})
    assert image == initramfs.build({"/opt/hello": "/bin/busybox"})       # cached by content
    # not compressed: the guest's kernel inflating 2 MB of gzip was 93 M instructions of every boot
    assert image.read_bytes()[:6] == b"070701" and image.suffix == ".cpio"
    subprocess.run(["busybox", "cpio", "-id"], input=image.read_bytes(), cwd=tmp_path,
                   check=True, capture_output=True)
    assert os.access(tmp_path / "init", os.X_OK)
    assert initramfs.is_static(tmp_path / "init") and initramfs.is_static(tmp_path / "usr/lib/perflab/launch")
    assert (tmp_path / "opt/hello").read_bytes() == Path("/bin/busybox").read_bytes()


def test_a_boot_splits_by_the_guest_clock_into_the_kernel_and_the_agent():
    assert boot_phase_facts({"init_ns": "842000000", "hello_ns": "1100000000"}) == {
        "vm_boot_guest": "kernel to /init 0.842 s, /init to HELLO 0.258 s (guest clock)"}
    # an agent that says nothing of it (--remote), or something else: no fact
    assert boot_phase_facts({"init_ns": "0", "hello_ns": "0"}) == boot_phase_facts({"init_ns": "x"}) == {}
    assert boot_phase_facts({"init_ns": "5", "hello_ns": "4"}) == {}


def _ram_mappings(pid: int) -> list[tuple[str, int]]:
    """QEMU's memfd mappings (path, bytes), from /proc/PID/maps."""
    out = []
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        words = line.split(maxsplit=5)
        if len(words) == 6 and words[5].startswith("/memfd:"):
            start, end = (int(a, 16) for a in words[0].split("-"))
            out.append((words[5], end - start))
    return out


@needs_vm
def test_boot_and_execute(guest):
    facts = guest.facts
    assert facts["vm_mode"] == "tcg" and facts["vm_cpus"] == "1"
    # under tcg the guest's RAM stays QEMU's own anonymous memory (huge pages): no memfd, no fact
    assert _ram_mappings(guest.process.pid) == [] and "vm_ram_backing" not in facts
    assert facts["guest_kernel_release"] and facts["qemu_version"][0].isdigit()
    assert re.fullmatch(r"kernel to /init \d+\.\d{3} s, /init to HELLO \d+\.\d{3} s \(guest clock\)",
                        facts["vm_boot_guest"]), facts["vm_boot_guest"]
    ok = guest.execute(ProcessSpec(["/bin/true"]))
    assert ok.ok and ok.exit_status == 0 and ok.wall > 0 and ok.maxrss_kib > 0
    r = guest.execute(ProcessSpec(["/usr/bin/getppid_ns", "1000", "2"]))
    assert r.ok, r.stderr_tail
    assert r.stdout.count("getppid_ns") == 2 and r.stderr_tail == "done 1000\n"
    shell = guest.execute(ProcessSpec(["/bin/sh", "-c", "echo out; echo err >&2; exit 3"]))
    assert (shell.exit_status, shell.stdout, shell.stderr_tail) == (3, "out\n", "err\n")
    assert guest.execute(ProcessSpec(["/bin/uname", "-r"])).stdout.strip() == facts["guest_kernel_release"]


@needs_vm
def test_the_agent_makes_directories_and_reads_the_guest_state_without_a_process(guest):
    # Both were busybox processes (mkdir -p; sh, cat and find), 0.07-0.45 s each under icount.
    guest.make_directory("/tmp/made/by/the/agent")
    assert guest.execute(ProcessSpec(["/bin/sh", "-c", "test -d /tmp/made/by/the/agent"])).ok
    guest.make_directory("/tmp/made/by/the/agent")              # as mkdir -p: there already is fine
    with pytest.raises(PerflabError, match="cannot make /proc/no/such in the guest: No such file"):
        guest.make_directory("/proc/no/such")
    first = guest.state()
    mounts, _, files = first.partition("@@files\n")
    assert " /proc " in mounts and " /tmp " in mounts
    assert guest.execute(ProcessSpec(["/bin/sh", "-c", "echo x > /etc/changed; echo y > /tmp/own"])).ok
    later = guest.state()
    assert "/etc/changed" in later.splitlines() and "/etc/changed" not in files.splitlines()
    assert "/tmp/own" not in later           # /tmp is a mount of its own
    assert "/init" not in later.splitlines()  # older than the first reading


@needs_vm
def test_execute_faults_as_on_the_host(guest):
    with pytest.raises(PerflabError, match="cannot start '/no/such': No such file"):
        guest.execute(ProcessSpec(["/no/such"]))
    # SIGTERM at the timeout; a grace of 30 s before SIGKILL, which the sleep (dead at SIGTERM) never
    # waits out: with 0.5 s, a guest held back for that long by the host could see SIGKILL sent first.
    slow = guest.execute(ProcessSpec(["/bin/sleep", "10"], timeout=0.5), grace=30)
    assert slow.timed_out and slow.signal == signal.SIGTERM and not slow.ok
    killed = guest.execute(ProcessSpec(["/bin/sh", "-c", "kill -SEGV $$"]))
    assert killed.signal == signal.SIGSEGV and killed.exit_status == 128 + signal.SIGSEGV
    quiet = guest.execute(ProcessSpec(["/bin/echo", "x"], capture_stdout=False, env={"PATH": "/bin"}))
    assert quiet.ok and quiet.stdout == ""
    env = guest.execute(ProcessSpec(["/bin/sh", "-c", "echo $PERFLAB_X"], env={"PERFLAB_X": "y"}))
    assert env.stdout == "y\n"
    big = guest.execute(ProcessSpec(["/bin/sh", "-c", "head -c 100000 /dev/zero | tr '\\0' x"]))
    assert big.stdout == "x" * 100000


@needs_vm
def test_icount_is_repeatable_across_boots_and_waits_for_a_helper_slow_on_the_hosts_io(getppid_program):
    """Two icount boots side by side, both with the host's root over 9p (which the helper needs),
    and nothing else apart (one boot fewer than a test each: an icount boot is ~5 s of CPU).

    Instruction-time: the same figure from two boots, to 0.02%. Measured here (docs/vm.md):
    single rounds of 200,000 calls agree across boots to about 0.01% (a timer tick more or less
    falls in a round); the noise only adds instructions, so the minimum of the rounds is
    compared: it agreed to 0.004%. In a CI run one boot had a round cleaner than any seen before
    (336.168 ns against 336.206, 0.011% apart): 9 rounds, 0.02%.

    Then, in the first guest, a helper slow on the host's I/O. Under icount (sleep=off) an idle
    guest's clock jumps from timer to timer, so while a helper (perf in the host's root over 9p)
    waits for the host's answers, the guest's clock runs far ahead of the host's. The agent's
    wait for the helper's ack must not follow it: here the helper reads 128 MiB of the host over
    9p before its first ack and 256 MiB when told to stop (hundreds of round trips, each a jump
    of the guest's clock), and is still enabled, heard and let finish (docs/vm.md, insn-profile).
    """
    from perflab.execution import executor
    from perflab.execution.vm import modules
    from perflab.execution.vm.machine import KERNEL_CMDLINE

    # Not under /tmp: the guest's own /tmp is bound over the host's in the chroot.
    where = Path(os.environ.get("PERFLAB_TEST_VAR_TMP", "/var/tmp"))
    big = where / f"perflab-helper-{os.getpid()}.bin"
    # Two files: the guest keeps what it read (cache=loose). With the waits by the guest's clock
    # (load 9): the first ack was missed at 64 and 128 MiB, not at 32 (the guest's clock jumped
    # 2,181 s in reading the first 128 MiB of a fresh boot, against HELPER_WAIT_MS's 120 s); the
    # end after SIGINT was missed at 256 MiB, not at 64 or 128 read after those 128.
    for path, mib in ((big, 128), (big.with_suffix(".stop"), 256)):
        with path.open("wb") as f:
            f.truncate(mib << 20)
    plan = modules.plan(KERNEL, ["9p"], "test", cmdline=KERNEL_CMDLINE)
    spec = VmSpec(kernel=KERNEL, mode="icount", share_root=True, boot_timeout=BOOT_TIMEOUT)
    setup = [*modules.setup_lines(plan), *modules.share_root_lines("/host")]
    # Slow at its first ack and again at its end (SIGINT), where perf writes its output.
    answer = ('trap \'cat "${2%.bin}.stop" >/dev/null; echo stopped >>"$3"; exit 0\' INT; exec 3<>"$0" 4<>"$1"; '
              'read -r w <&3; cat "$2" >/dev/null; echo ack >&4; '
              'while read -r w <&3; do echo "$w" >>"$3"; echo ack >&4; done')
    ctl, ack, out = "/run/perflab/slow.ctl", "/run/perflab/slow.ack", "/tmp/slow.out"
    helper = executor.Helper(["/bin/sh", "-c", answer, ctl, ack, str(big), out], "/host", ctl, ack, out)
    results: dict[int, object] = {}

    def one(i: int) -> None:
        try:
            with boot(spec, files={**plan.files(), "/usr/bin/getppid_ns": getppid_program}, setup=setup,
                      data=plan.data()) as g:
                results[i] = (g.facts, g.execute(ProcessSpec(["/usr/bin/getppid_ns", "200000", "9"])),
                              _ram_mappings(g.process.pid))
                if i == 0:        # after the figure, alone: the other guest's boot ends when its figure is in
                    results["helper"] = g.execute(ProcessSpec(["/bin/true"]), hooks=executor.Hooks(inside=[helper]))
        except Exception as e:        # noqa: BLE001 (reported below)
            results[i] = e

    try:
        threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        big.unlink()
        big.with_suffix(".stop").unlink()
    for value in results.values():
        if isinstance(value, Exception):
            raise value
    figures = []
    for facts, result, ram in (results[0], results[1]):
        assert facts["vm_mode"] == "icount" and "instruction-time" in facts["time_base"]
        # the guest's RAM is a memfd, not QEMU's anonymous memory with huge pages (docs/vm.md)
        assert ram == [("/memfd:memory-backend-memfd (deleted)", 512 << 20)], ram
        assert facts["vm_ram_backing"].startswith("a memfd")
        assert result.ok, result.stderr_tail
        figures.append([float(line.split(": ")[-1].rstrip("}")) for line in result.stdout.splitlines()])
    a, b = (min(f) for f in figures)
    assert abs(a - b) / a < 2e-4, figures
    assert 50 < a < 5000        # hundreds of instructions per getppid
    assert results["helper"].ok, results["helper"].stderr_tail
    assert helper.output.split() == ["enable", "disable", "stopped"], (helper.output, helper.stderr)


@needs_vm
def test_a_kernel_that_panics_says_so():
    # No init in the initramfs: the kernel looks for a root device, finds none and panics.
    spec = VmSpec(kernel=KERNEL, append="rdinit=/no/init", boot_timeout=BOOT_TIMEOUT)
    start = time.monotonic()
    with pytest.raises(VmError) as caught:
        with boot(spec):
            pass
    assert "panicked before perflab's init ran" in caught.value.summary
    assert "Kernel panic" in caught.value.console_tail
    # said when QEMU stopped at the panic, not when the boot's time was up
    assert time.monotonic() - start < spec.boot_timeout


@needs_vm
def test_not_a_kernel(tmp_path):
    bogus = tmp_path / "vmlinuz"
    bogus.write_bytes(b"not a kernel\n" * 100)
    with pytest.raises(VmError, match="QEMU could not boot kernel vmlinuz"):
        with boot(VmSpec(kernel=bogus)):
            pass


@needs_vm
def test_a_hung_boot_times_out_and_leaves_no_qemu():
    with pytest.raises(VmError, match=r"did not reach perflab's init in 2 s \(mode tcg\)"):
        # A shell as init waits on the console for ever: the agent never says HELLO.
        with boot(VmSpec(kernel=KERNEL, append="rdinit=/bin/sh", boot_timeout=2)):
            pass
    assert not _qemus("rdinit=/bin/sh")


@needs_vm
def test_kvm_is_never_silently_tcg():
    try:
        with boot(VmSpec(kernel=KERNEL, mode="kvm", boot_timeout=20)) as g:
            assert g.facts["vm_mode"] == "kvm" and "TCG" not in g.facts["vm_cpu_model"]
    except VmError as e:
        assert "kvm" in e.summary.lower()
        assert "\n" not in e.summary


def test_missing_qemu_and_kernel_are_one_line(monkeypatch, tmp_path):
    with pytest.raises(PerflabError, match=r"kernel /no/vmlinuz: no such file"):
        with boot(VmSpec(kernel="/no/vmlinuz")):
            pass
    monkeypatch.setenv("PATH", str(tmp_path))
    kernel_file = tmp_path / "k"
    kernel_file.write_bytes(b"x")
    with pytest.raises(PerflabError, match=r"qemu-system-x86_64 not found \(Debian package qemu-system-x86\)"):
        with boot(VmSpec(kernel=kernel_file)):
            pass
    with pytest.raises(PerflabError, match="vm mode 'fast'"):
        VmSpec(kernel=kernel_file, mode="fast").check()


@needs_vm
def test_a_boot_started_ahead_is_the_boot_taken_and_another_is_killed(guest, started_ahead):
    from perflab.execution.vm import machine

    assert guest.process.pid == started_ahead["ahead"]            # QEMU was not started again
    assert not _alive(started_ahead["other"]) and machine.running_ahead() == 0
    assert guest.facts["guest_kernel_release"]
    # no_timer_check (KERNEL_CMDLINE) skipped the trial, not the routing: the PIT's IRQ 0
    # through the IO-APIC's pin 2, as the trial finds it on QEMU's board (docs/vm.md).
    timer = [line.split() for line in guest.read("/proc/interrupts").decode().splitlines()
             if line.split()[:1] == ["0:"]]
    assert b"no_timer_check" in guest.read("/proc/cmdline")
    assert timer and timer[0][2:] == ["IO-APIC", "2-edge", "timer"], timer


@needs_vm
def test_a_refused_run_leaves_no_qemu_started_ahead(tmp_path, monkeypatch):
    from perflab import cli
    from perflab.execution.vm import machine

    started = []
    launch = machine._launch_command      # every QEMU started: made anew or remembered (start_remembered)
    monkeypatch.setattr(machine, "_launch_command", lambda *a: started.append(launch(*a)) or started[-1])
    err = tmp_path / "err"
    with open(err, "w") as f, contextlib.redirect_stderr(f):
        # Refused by the run service (the job's CPUs), after the guest was started ahead.
        rc = cli.main(["--db", str(tmp_path / "db.sqlite"), "run", "cmd", "--runs", "1", "--cpus", "999",
                       "--kernel", str(KERNEL), "--vm", "tcg", "--", "true"])
    said = err.read_text().strip()
    assert rc != 0 and len(said.splitlines()) == 1 and "CPU 999" in said, said
    assert len(started) == 1 and not _alive(started[0].process.pid)
    assert not started[0].workdir.exists() and machine.running_ahead() == 0


@needs_vm
def test_kill_9_of_perflab_leaves_no_qemu(tmp_path):
    script = textwrap.dedent(f"""
        import sys, time
        from perflab.execution.vm import VmSpec, boot
        with boot(VmSpec(kernel={str(KERNEL)!r}, boot_timeout={BOOT_TIMEOUT})) as g:
            print(g.process.pid, flush=True)
            time.sleep(600)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        qemu_pid = int(proc.stdout.readline())
        assert Path(f"/proc/{qemu_pid}").exists()
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 60   # QEMU dies at its parent's death (PR_SET_PDEATHSIG): at once
    while _alive(qemu_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(qemu_pid)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


def _qemus(pattern: str) -> set[int]:
    """QEMU processes whose command line holds `pattern`."""
    out = subprocess.run(["pgrep", "-f", f"qemu-system-x86_64 .*{pattern}"], capture_output=True, text=True).stdout
    return {int(p) for p in out.split()}

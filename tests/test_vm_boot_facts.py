"""How a guest's boot is cut (issue 47; docs/vm.md, "Modules without their signatures"): the
modules go into the initramfs without the signatures appended to them where the kernel loads
unsigned modules, the agent says what each setup line took, and QEMU is killed once the agent
said BYE. Facts, not times: the bytes that go in, the decisions, and one real boot that shows the
modules loaded, the kernel's taint saying so, and the run's facts.
"""

from __future__ import annotations

import os
import shutil
import signal
import struct
from pathlib import Path

import pytest

from perflab.core.errors import PerflabError
from perflab.core.process import ProcessSpec
from perflab.execution.vm import VmError, VmSpec, boot, kernel, modules
from perflab.execution.vm.machine import KERNEL_CMDLINE, boot_phase_facts

KERNEL = os.environ.get("PERFLAB_TEST_KERNEL") or kernel.cached()
RELEASE = modules.release_of(Path(KERNEL)) if KERNEL else None
needs_kernel = pytest.mark.skipif(
    not KERNEL or not RELEASE or modules.modules_dir(Path(KERNEL), RELEASE) is None,
    reason="needs a Debian kernel with its modules: python tools/fetch_kernel.py")
needs_vm = pytest.mark.skipif(shutil.which("qemu-system-x86_64") is None,
                              reason="needs qemu-system-x86_64 (Debian qemu-system-x86)")
BOOT_TIMEOUT = 300           # a backstop for a loaded machine, as tests/test_vm.py
ROOT = "/run/perflab/host"
TAINT_UNSIGNED_MODULE = 1 << 13      # 'E' in the kernel's taint flags


def _trailer(data: bytes) -> int:
    """The length of a signed module's appended signature, its info block and magic."""
    sig_len, = struct.unpack_from(">I", data, len(data) - len(modules.SIGNATURE_MAGIC) - 4)
    return sig_len + modules.SIGNATURE_INFO + len(modules.SIGNATURE_MAGIC)


@needs_kernel
def test_a_module_without_its_signature_is_the_bytes_that_were_signed():
    plan = modules.plan(KERNEL, ["9p"], "test")
    for module in plan.load:
        data = modules.module_bytes(module)
        assert data.endswith(modules.SIGNATURE_MAGIC), module      # Debian signs its modules
        bare = modules.without_signature(data)
        assert data[:len(bare)] == bare and len(data) - len(bare) == _trailer(data)
        # still a whole ELF file: its section table lies inside it
        shoff, = struct.unpack_from("<Q", bare, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", bare, 0x3A)
        assert bare[:4] == b"\x7fELF" and shoff + shentsize * shnum <= len(bare)
        assert modules.without_signature(bare) == bare                # nothing more to take
    # a trailer that claims more than the file holds is refused in one line
    forged = bytearray(modules.module_bytes(plan.load[0]))
    struct.pack_into(">I", forged, len(forged) - len(modules.SIGNATURE_MAGIC) - 4, len(forged))
    with pytest.raises(PerflabError, match=f"^{plan.load[0].name}: its signature says it is .* more than the file holds"):
        modules.without_signature(bytes(forged), plan.load[0].name)
    with pytest.raises(PerflabError, match="more than the file holds"):
        modules.without_signature(b"\x7fELF" + modules.SIGNATURE_MAGIC)        # a trailer cut short


def test_signatures_are_kept_where_the_kernel_may_refuse_a_module_without_one():
    debian = {"CONFIG_MODULE_SIG": "y", "CONFIG_LOCK_DOWN_KERNEL_FORCE_NONE": "y"}
    assert modules.signatures_needed(debian, KERNEL_CMDLINE) is None
    assert modules.signatures_needed(debian, KERNEL_CMDLINE + " module.sig_enforce=0") is None
    # a kernel whose config is not found may force the check (module.sig_enforce=0 cannot lift
    # CONFIG_MODULE_SIG_FORCE: the parameter only enables): its modules keep their signatures
    assert modules.signatures_needed(None, KERNEL_CMDLINE + " module.sig_enforce=0") == \
        "its config is not found: CONFIG_MODULE_SIG_FORCE may be set"
    assert modules.signatures_needed({**debian, "CONFIG_MODULE_SIG_FORCE": "y"}, KERNEL_CMDLINE) == \
        "CONFIG_MODULE_SIG_FORCE=y"
    assert modules.signatures_needed({"CONFIG_LOCK_DOWN_KERNEL_FORCE_INTEGRITY": "y"}, "") == \
        "CONFIG_LOCK_DOWN_KERNEL_FORCE_INTEGRITY=y"
    assert modules.signatures_needed({"CONFIG_IMA_APPRAISE_REQUIRE_MODULE_SIGS": "y"}, "") == \
        "CONFIG_IMA_APPRAISE_REQUIRE_MODULE_SIGS=y"
    for word in ("module.sig_enforce", "module.sig_enforce=1", "lockdown=integrity", "ima_policy=secure_boot",
                 "ima_appraise=enforce"):
        assert modules.signatures_needed(debian, f"{KERNEL_CMDLINE} {word}") == word


def test_signatures_are_kept_where_a_module_without_one_panics_the_kernel_or_is_refused_by_another_spelling():
    """The kernel panics on an unsigned crypto module under fips=1 (crypto/algapi.c,
    crypto_check_module_sig: ext4's and btrfs's checksum drivers are modules), and on taint E
    under panic_on_taint with bit 13 (kernel/panic.c, add_taint); it reads a parameter's '-' as
    '_' (kernel/params.c, parameq), so module.sig-enforce=1 enforces too."""
    debian = {"CONFIG_MODULE_SIG": "y"}
    for word in ("fips=1", "panic_on_taint=0x2000", "panic_on_taint=2001,nousertaint", "module.sig-enforce=1",
                 "ima-appraise=enforce"):
        assert modules.signatures_needed(debian, f"{KERNEL_CMDLINE} {word}") == word, word
    for word in ("fips=0", "panic_on_taint=0x1", "panic_on_taint=20", "module.sig-enforce=off"):
        assert modules.signatures_needed(debian, f"{KERNEL_CMDLINE} {word}") is None, word


@needs_kernel
def test_a_boot_plan_puts_the_modules_in_without_their_signatures_unless_the_kernel_needs_them():
    kept = modules.plan(KERNEL, ["9p"], "test")                       # no command line: as they are
    bare = modules.plan(KERNEL, ["9p"], "test", cmdline=KERNEL_CMDLINE)
    assert bare.load == kept.load and bare.signed is None and bare.files() == {}
    originals = {**{path: module.read_bytes() for path, module in kept.files().items()}, **kept.data()}
    assert set(bare.data()) == set(originals)
    for path, data in bare.data().items():
        assert data == modules.without_signature(originals[path]) != originals[path], path
    assert "without their signatures" in bare.signature_fact() and "taint E" in bare.signature_fact()
    enforced = modules.plan(KERNEL, ["9p"], "test", cmdline=f"{KERNEL_CMDLINE} module.sig_enforce=1")
    assert enforced.signed == "module.sig_enforce=1"
    assert {**{p: m.read_bytes() for p, m in enforced.files().items()}, **enforced.data()} == originals
    assert enforced.signature_fact() == "checked by the kernel (module.sig_enforce=1)"
    assert modules.Plan(RELEASE).signature_fact() == ""              # a guest that loads none says nothing


def test_the_modules_part_of_a_boot_comes_from_the_agents_setup_times():
    said = {"init_ns": "800000000", "hello_ns": "1000000000",
            "setup_times": "insmod /lib/modules/r/netfs.ko 120000000|insmod /lib/modules/r/9p.ko 30000000|"
                           "mount hostroot /run/perflab/host 9p ro trans=virtio,version=9p2000.L,msiz 9000000|"}
    assert boot_phase_facts(said) == {
        "vm_boot_guest": "kernel to /init 0.800 s, /init to HELLO 0.200 s (guest clock)",
        "vm_boot_modules": "2 modules loaded in 0.150 s (guest clock)"}
    # no module loaded, or an agent that does not say: no such fact
    assert "vm_boot_modules" not in boot_phase_facts({**said, "setup_times": "bind /proc /x/proc 5|"})
    assert "vm_boot_modules" not in boot_phase_facts({**said, "setup_times": "insmod /x.ko junk|"})


def _setup(plan: modules.Plan) -> list[str]:
    return [*modules.setup_lines(plan), *modules.share_root_lines(ROOT)]


@pytest.mark.vm
@needs_vm
@needs_kernel
def test_modules_without_signatures_are_all_loaded_the_kernel_says_so_and_qemu_is_killed_after_bye():
    plan = modules.plan(KERNEL, ["9p"], "test", cmdline=KERNEL_CMDLINE)
    spec = VmSpec(kernel=KERNEL, mode="tcg", share_root=True, boot_timeout=BOOT_TIMEOUT)
    with boot(spec, files=plan.files(), setup=_setup(plan), data=plan.data()) as guest:
        loaded = {line.split()[0] for line in guest.read("/proc/modules").decode().splitlines()}
        tainted = int(guest.read("/proc/sys/kernel/tainted").decode())
        # the host's root came up over them: a host program runs there
        assert guest.execute(ProcessSpec(["/bin/true"]), root=ROOT).ok
        facts = guest.facts
        process = guest.process
    assert {m.name.split(".ko")[0].replace("-", "_") for m in plan.load} <= loaded
    assert tainted & TAINT_UNSIGNED_MODULE
    assert facts["vm_boot_modules"].startswith(f"{len(plan.load)} modules loaded in ")
    assert process.poll() is not None                                   # no QEMU left behind


# A guest agent's last words, played by a process that then never ends by itself: it answers
# OFF with BYE as agent.c does, and 8 s later leaves a mark that it was still there: far beyond
# any load's delay of the kill that follows BYE, and within the 10 s (SHUTDOWN_SECONDS) the
# host waited before.
AFTER_BYE = r"""
import os, sys, time
from perflab.execution.vm.channel import frame
line = sys.stdin.buffer.readline()
assert line.startswith(b"@PL OFF "), line
sys.stdin.buffer.readline()
os.write(1, frame("BYE", b""))
time.sleep(8)
open(sys.argv[1], "w").write("still running 8 s after BYE")
time.sleep(60)
"""


def test_the_host_kills_qemu_once_the_agent_said_bye_rather_than_wait_for_the_power_off(tmp_path):
    import subprocess
    import sys

    from perflab.execution.vm.channel import Channel
    from perflab.execution.vm.machine import Guest

    mark = tmp_path / "mark"
    process = subprocess.Popen([sys.executable, "-c", AFTER_BYE, str(mark)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, start_new_session=True, bufsize=0)
    guest = Guest(VmSpec(kernel=str(tmp_path / "k")), process, Channel(process.stdin.fileno(),
                                                                      process.stdout.fileno()), tmp_path)
    guest.shutdown()
    assert process.returncode == -signal.SIGKILL
    assert not mark.exists()            # before: waited up to 10 s for the guest to power off by itself


@pytest.mark.vm
@needs_vm
@needs_kernel
def test_a_kernel_that_refuses_a_module_without_its_signature_fails_the_boot_in_one_line():
    """What modules.signatures_needed exists for: under module.sig_enforce=1 the first module
    without its signature is refused, and the boot says which, in one line."""
    plan = modules.plan(KERNEL, ["9p"], "test", cmdline=KERNEL_CMDLINE)
    spec = VmSpec(kernel=KERNEL, mode="tcg", share_root=True, boot_timeout=BOOT_TIMEOUT,
                  append="module.sig_enforce=1")
    with pytest.raises(VmError) as failed, boot(spec, files=plan.files(), setup=_setup(plan), data=plan.data()):
        pass
    first = plan.guest_path(plan.load[0])
    assert "\n" not in failed.value.summary
    assert f"could not prepare its devices: insmod {first}: " in failed.value.summary


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _own_vm_cache(tmp_path, monkeypatch) -> None:
    """A cache of the test's own for the initramfs and what is remembered (files are removed
    there), sharing the built programs and the kernels' vmlinux with the real one (nothing
    compiled or decompressed again)."""
    from perflab.core import paths

    real = paths.cache_home()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    paths.cache_home().mkdir(parents=True, exist_ok=True)
    for shared in ("cbuild", "vmlinux"):
        if (real / shared).is_dir():
            (paths.cache_home() / shared).symlink_to(real / shared)


@pytest.mark.vm
@needs_vm
@needs_kernel
def test_a_remembered_start_is_the_command_made_before_and_nothing_when_a_file_is_gone(tmp_path, monkeypatch):
    """start_remembered starts the command line start_ahead made for the same inputs, without
    making the initramfs again; a memo whose initramfs is gone, or made for other inputs, starts
    nothing. (The QEMUs started are killed at once: no boot is waited for.)"""
    from perflab.execution.vm import initramfs, machine, remembering

    _own_vm_cache(tmp_path, monkeypatch)
    plan = modules.plan(KERNEL, ["9p"], "test", cmdline=KERNEL_CMDLINE)
    spec = VmSpec(kernel=KERNEL, mode="tcg", share_root=True, boot_timeout=BOOT_TIMEOUT)
    try:
        assert not machine.start_remembered("inputs A")                 # nothing remembered yet
        machine.start_ahead(spec, files=plan.files(), setup=_setup(plan), data=plan.data(), remember="inputs A")
        made = machine._AHEAD[-1].key
        machine.drop_ahead()
        assert machine.start_remembered("inputs A") and machine._AHEAD[-1].key == made
        pid = machine._AHEAD[-1].process.pid
        machine.drop_ahead()
        assert not _alive(pid)
        assert not machine.start_remembered("inputs B") and machine.running_ahead() == 0
        Path(made[made.index("-initrd") + 1]).unlink()
        assert not machine.start_remembered("inputs A") and machine.running_ahead() == 0
        # the cache keeps the newest few command lines, not every one ever made
        for n in range(remembering.KEPT + 5):
            remembering.keep(f"inputs {n}", made)
        assert len(list(initramfs.cache_dir().glob("ahead-*.json"))) == remembering.KEPT
        assert remembering.command(f"inputs {remembering.KEPT + 4}") is None      # its initramfs is gone
    finally:
        machine.drop_ahead()


def test_a_remembered_command_that_is_not_this_qemus_starts_nothing(tmp_path, monkeypatch):
    """The memo is a file in the user's cache: one that names another program than the QEMU
    this command would run (written by hand, by another tool, or garbled) is no command line
    to start, not even for boot() to kill after it ran."""
    import json

    from perflab.execution.vm import machine, remembering

    _own_vm_cache(tmp_path, monkeypatch)
    marker, kernel_file, initrd = tmp_path / "ran", tmp_path / "vmlinux", tmp_path / "initrd"
    kernel_file.write_bytes(b"k")
    initrd.write_bytes(b"i")
    shell = shutil.which("sh")
    remembering._path("inputs H").parent.mkdir(parents=True, exist_ok=True)
    remembering._path("inputs H").write_text(json.dumps(
        {"remember": "inputs H", "command": [shell, "-c", f"touch {marker}", "-kernel", str(kernel_file),
                                             "-initrd", str(initrd)]}))
    try:
        assert not machine.start_remembered("inputs H") and machine.running_ahead() == 0
    finally:
        machine.drop_ahead()
    assert not marker.exists()


def test_the_initramfs_cache_keeps_the_most_recently_booted_archives_not_every_one(tmp_path, monkeypatch):
    """Every agent, launcher, module set and signature choice makes another 5-20 MB archive; the
    cache kept them all (438 MB in 107 archives on the machine this was written on). It keeps
    the KEEP_ARCHIVES most recently used; one used again is kept longest."""
    from perflab.execution.vm import initramfs

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    used = initramfs.build(data={"/etc/marker": b"used again\n"}, with_busybox=False)
    initramfs.cache_dir().mkdir(parents=True, exist_ok=True)
    for n in range(initramfs.KEEP_ARCHIVES + 3):
        old = initramfs.cache_dir() / f"initramfs-{n:020x}.cpio"
        old.write_bytes(b"an old archive")
        os.utime(old, (1_000_000 + n, 1_000_000 + n))
    os.utime(used, (1, 1))                                          # the oldest of all ...
    assert initramfs.build(data={"/etc/marker": b"used again\n"}, with_busybox=False) == used   # ... until used
    new = initramfs.build(data={"/etc/marker": b"new\n"}, with_busybox=False)
    kept = set(initramfs.cache_dir().glob("initramfs-*.cpio"))
    assert len(kept) == initramfs.KEEP_ARCHIVES and {new, used} <= kept
    assert initramfs.cache_dir() / "initramfs-00000000000000000000.cpio" not in kept     # the least recent go


@needs_kernel
def test_the_inputs_of_a_start_ahead_name_what_its_command_line_is_made_from(tmp_path):
    from perflab.execution.vm import remembering

    machine, needs = {"mode": "tcg", "cpus": 1}, ["host-programs"]
    said = remembering.inputs(KERNEL, machine, "", needs)
    assert said == remembering.inputs(KERNEL, machine, "", needs) and str(Path(KERNEL).resolve()) in said
    assert "agent.c" in said and "launch.c" in said and "initramfs.py" in said
    assert f"config-{RELEASE}" in said and f"lib/modules/{RELEASE}" in said
    for other in (remembering.inputs(KERNEL, {**machine, "mode": "icount"}, "", needs),
                  remembering.inputs(KERNEL, machine, "mitigations=off", needs),
                  remembering.inputs(KERNEL, machine, "", [*needs, "disk"]),
                  remembering.inputs(KERNEL, machine, "", needs, (Path(__file__),))):
        assert other not in (said, None)
    copy = tmp_path / Path(KERNEL).name
    shutil.copy(KERNEL, copy)
    assert remembering.inputs(copy, machine, "", needs) not in (said, None)
    copy.unlink()
    assert remembering.inputs(copy, machine, "", needs) is None          # a file gone: nothing guessed


@pytest.mark.vm
@needs_vm
def test_qemus_version_is_asked_once_per_binary_then_remembered(tmp_path, monkeypatch):
    from perflab.execution.vm import machine, remembering

    _own_vm_cache(tmp_path, monkeypatch)
    qemu = machine.qemu_binary()
    asked = machine.asking_version(qemu)
    assert asked is not None                      # nothing remembered: QEMU is asked
    said = machine.qemu_version(qemu, asked)
    assert said[0].isdigit()
    assert machine.asking_version(qemu) is None and machine.qemu_version(qemu) == said     # no process now
    # kept by the program file's size and modification time: another file (an upgrade) is asked again
    other = tmp_path / "qemu-system-x86_64"
    shutil.copy(qemu, other)
    assert remembering.output(str(other), ("--version",)) is None
    remembering.keep_output(str(other), ("--version",), "QEMU emulator version 99.0\n")
    assert machine.qemu_version(str(other)) == "99.0"
    os.utime(other, ns=(0, 0))
    assert remembering.output(str(other), ("--version",)) is None

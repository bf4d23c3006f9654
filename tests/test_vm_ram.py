"""The guest's RAM under icount (execution.vm.machine.ram_args, docs/vm.md "The guest's RAM under
icount"): a memfd where QEMU can give one, QEMU's own anonymous memory where it cannot, and the
run's fact `vm_ram_backing` says which. No guest boots here: QEMU's command line and its answer."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from perflab.execution.vm import VmSpec
from perflab.execution.vm import machine

# A QEMU before 5.0 (Ubuntu 20.04's 4.2.1) has no `-machine memory-backend=`: this one is the
# machine's own QEMU saying it is 4.2.1 when asked its version.
OLD_QEMU = """#!/bin/sh
if [ "$1" = "--version" ]; then
    echo "QEMU emulator version 4.2.1 (Debian 1:4.2-3ubuntu6.30)"
    echo "Copyright (c) 2003-2019 Fabrice Bellard and the QEMU Project developers"
    exit 0
fi
exec {qemu} "$@"
"""


def _command(binary: str, mode: str) -> list[str]:
    return machine.qemu_command(binary, VmSpec(kernel="vmlinuz", mode=mode), Path("initrd"), Path("console"))


@pytest.fixture
def qemu() -> str:
    found = shutil.which(machine.QEMU)
    if found is None:
        pytest.skip(f"{machine.QEMU} not installed")
    return found


def test_an_older_qemu_keeps_its_own_ram_under_icount_and_the_run_says_so(tmp_path, monkeypatch, qemu):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))      # its answer remembered here
    old = tmp_path / "qemu-system-x86_64"
    old.write_text(OLD_QEMU.format(qemu=qemu))
    old.chmod(0o755)
    command = _command(str(old), "icount")
    assert not any("memory-backend" in word for word in command), command   # QEMU 4.2 would refuse it
    assert machine.ram_backing(VmSpec(kernel="vmlinuz", mode="icount"), str(old)) == (
        "QEMU's anonymous memory (QEMU 4.2.1 has no -machine memory-backend; 5.0 and later give a memfd)")
    # This machine's QEMU (7.2) gives a memfd, said so; tcg and kvm keep QEMU's own memory, no fact.
    assert "memory-backend=perflab-ram" in _command(qemu, "icount")
    assert machine.ram_backing(VmSpec(kernel="vmlinuz", mode="icount"), qemu) == machine.RAM_FACT
    assert not any("memory-backend" in word for word in _command(qemu, "tcg") + _command(qemu, "kvm"))
    assert machine.ram_backing(VmSpec(kernel="vmlinuz", mode="tcg"), qemu) is None


def test_the_ram_backing_fact_is_no_part_of_a_run_s_variant():
    """docs/views.md: runs of one kernel and mode before the memfd (no fact), with it, and on a QEMU
    before 5.0 are one variant and one line, pooled and matched: the figures are the same."""
    from types import SimpleNamespace

    from perflab.analysis import variant

    def run(**facts):
        return SimpleNamespace(params={"vm": "icount", "testcase": "getppid1"}, box="lab", tag="t",
                               benchmark="will-it-scale", commit="c0ffee",
                               job={"kernel": "debian:6.1.0-47-amd64", "vm": {"mode": "icount"}},
                               environment={"kernel_release": "6.1.0-47-amd64", **facts})

    before, memfd = variant.of(run()), variant.of(run(vm_ram_backing=machine.RAM_FACT))
    old_qemu = variant.of(run(vm_ram_backing="QEMU's anonymous memory (QEMU 4.2.1 has no ...)"))
    assert before.identity == memfd.identity == old_qemu.identity
    assert before.line == memfd.line == old_qemu.line

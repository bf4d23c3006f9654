"""How QEMU enters a kernel (execution.vm.entry): a bzImage's payload is decompressed on the
host once and booted through its PVH note; a kernel without one boots as the bzImage it is,
and the run says why. Synthetic images here; the Debian kernels in test_vm*.py."""

from __future__ import annotations

import gzip
import lzma
import struct

import pytest

from perflab.execution.vm import entry


def elf(pvh: bool) -> bytes:
    """An ELF64 header, one PT_NOTE program header and its notes (Xen PHYS32_ENTRY when `pvh`)."""
    def note(name: bytes, kind: int, desc: bytes) -> bytes:
        padded = name + b"\0" * (-len(name) % 4)
        return struct.pack("<III", len(name), len(desc), kind) + padded + desc + b"\0" * (-len(desc) % 4)

    notes = note(b"GNU\0", 3, b"\x01" * 20) + note(b"Xen\0", 18 if pvh else 17, struct.pack("<I", 0x1000000))
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", header, 0x20, 64)            # e_phoff
    struct.pack_into("<HH", header, 0x36, 56, 1)        # e_phentsize, e_phnum
    phdr = struct.pack("<IIQQQQQQ", 4, 4, 64 + 56, 0, 0, len(notes), len(notes), 4)
    return bytes(header) + phdr + notes + b"\0" * 4096


def bzimage(payload: bytes) -> bytes:
    setup = bytearray(1024)                             # setup_sects 1: the payload's code starts at 1024
    setup[0x1F1] = 1
    setup[0x202:0x206] = b"HdrS"
    struct.pack_into("<II", setup, 0x248, 16, len(payload))
    return bytes(setup) + b"\0" * 16 + payload + b"\0" * 64


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


@pytest.mark.parametrize("pack", [lambda b: lzma.compress(b, format=lzma.FORMAT_XZ) + b"\x00\x10\x00\x00",
                                  lambda b: gzip.compress(b, mtime=0)], ids=["xz", "gzip"])
def test_a_pvh_kernel_is_booted_as_its_vmlinux_decompressed_once(tmp_path, pack):
    kernel = tmp_path / "vmlinuz"
    kernel.write_bytes(bzimage(pack(elf(pvh=True))))
    first = entry.entry_of(kernel)
    assert first.pvh and first.image != kernel and first.image.read_bytes() == elf(pvh=True)
    assert "no KASLR" in first.how
    again = entry.entry_of(kernel)
    assert again == first                               # from the cache, keyed by the image's content


def test_a_kernel_without_the_pvh_note_boots_as_the_bzimage_and_says_why(tmp_path):
    kernel = tmp_path / "vmlinuz"
    kernel.write_bytes(bzimage(gzip.compress(elf(pvh=False))))
    got = entry.entry_of(kernel)
    assert got.image == kernel and not got.pvh
    assert got.how == "bzImage (its vmlinux has no PVH entry note (CONFIG_PVH))"
    assert entry.entry_of(kernel) == got                # remembered: not decompressed again


@pytest.mark.parametrize("content, why", [
    (bzimage(b"\x02\x21\x4c\x18" + b"\0" * 64), "(lz4 or lzo), which is not unpacked here"),
    (bzimage(b"\xfd7zXZ\x00garbage"), "its payload does not decompress"),
    (bzimage(gzip.compress(b"not an elf")), "its payload is not an ELF vmlinux"),
    (b"MZ" + b"\0" * 100, "not a bzImage"),
])
def test_what_cannot_be_unpacked_boots_as_given(tmp_path, content, why):
    kernel = tmp_path / "vmlinuz"
    kernel.write_bytes(content)
    got = entry.entry_of(kernel)
    assert got.image == kernel and why in got.how


def test_an_elf_vmlinux_is_booted_as_given(tmp_path):
    kernel = tmp_path / "vmlinux"
    kernel.write_bytes(elf(pvh=True))
    assert entry.entry_of(kernel) == entry.Entry(kernel, "PVH (an ELF vmlinux, as given)")


def test_a_cached_vmlinux_gone_while_the_cache_is_pruned_is_no_failure(tmp_path):
    """The cache is shared by every perflab of the user and pruned by whichever unpacks a new
    kernel: a file listed, then removed by another one before its time is read, is skipped.
    (A name whose target is gone stands for it: listed, and not there to stat.)"""
    entry.cache_dir().mkdir(parents=True)
    (entry.cache_dir() / f"{entry.PREFIX}0123456789abcdef0123").symlink_to(tmp_path / "removed-meanwhile")
    for n in range(entry.KEEP + 2):
        (entry.cache_dir() / f"{entry.PREFIX}{n:020x}").write_bytes(b"old")
    kernel = tmp_path / "vmlinuz"
    kernel.write_bytes(bzimage(gzip.compress(elf(pvh=True))))
    got = entry.entry_of(kernel)
    assert got.pvh and got.image.read_bytes() == elf(pvh=True)
    assert len([p for p in entry.cache_dir().glob(f"{entry.PREFIX}*") if p.exists()]) == entry.KEEP

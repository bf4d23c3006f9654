"""How QEMU enters a kernel: the PVH entry of its vmlinux, decompressed once on the host.

A distribution's vmlinuz is a bzImage: real-mode setup code, then a compressed vmlinux that
the kernel's own decompressor unpacks before start_kernel. Under TCG that decompressor is the
slowest part of a boot: Debian 6.1's xz payload took 2.9 s of the 5.1 s to the agent's HELLO
(measured here, QEMU 7.2, 2 cores; docs/vm.md "Where a boot's time goes"). QEMU boots an ELF
vmlinux directly through the PVH entry point (the Xen PHYS32_ENTRY note, CONFIG_PVH, which
Debian's kernels have), so perflab decompresses the payload on the host once, keeps the ELF in
its cache, keyed by the bzImage's content, and boots that.

The kernel that runs is the same code; what differs is recorded (`kernel_entry`): no
decompressor runs, and with it no kernel address randomisation (KASLR is the decompressor's
work), so every boot of a kernel places it alike, which only helps repeatability. A kernel
without the PVH note, or with a payload the host cannot unpack here (lz4, lzo), boots as the
bzImage it is, and the run says why.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import lzma
import os
import shutil
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

from perflab.core import paths

# The bzImage setup header (Documentation/arch/x86/boot.rst): setup_sects at 0x1f1, the
# "HdrS" magic at 0x202, payload_offset/payload_length at 0x248 (boot protocol >= 2.08).
HEADER_MAGIC = b"HdrS"
XEN_NOTE_NAME = b"Xen"
XEN_ELFNOTE_PHYS32_ENTRY = 18
KEEP = 12                   # decompressed kernels kept in the cache (least recently booted go first)
PREFIX = "vmlinux-"


@dataclass(frozen=True)
class Entry:
    """What QEMU is given as -kernel, and how the run records it."""

    image: Path
    how: str

    @property
    def pvh(self) -> bool:
        return self.how.startswith("PVH")


def cache_dir() -> Path:
    return paths.cache_home() / "vmlinux"


def entry_of(kernel: Path) -> Entry:
    """How to boot `kernel`: its cached PVH vmlinux when it has one, else the file itself."""
    kernel = Path(kernel)
    try:
        data = kernel.read_bytes()
    except OSError as e:
        return Entry(kernel, f"bzImage (cannot read it: {e.strerror})")
    if data[:4] == b"\x7fELF":
        return Entry(kernel, "PVH (an ELF vmlinux, as given)" if _has_pvh_note(data) else "ELF as given (no PVH note)")
    key = hashlib.sha256(data).hexdigest()[:20]
    cached = cache_dir() / f"{PREFIX}{key}"
    refused = cache_dir() / f"{PREFIX}{key}.not-pvh"
    try:
        os.utime(cached)        # recently booted: kept longest
        return Entry(cached, "PVH (vmlinux decompressed on the host; no decompressor, no KASLR)")
    except FileNotFoundError:
        pass                    # not unpacked yet, or pruned just now by another perflab: unpacked again
    if refused.is_file():
        return Entry(kernel, f"bzImage ({refused.read_text().strip()})")
    why, elf = _unpack(data)
    cache_dir().mkdir(parents=True, exist_ok=True)
    if elf is None or not _has_pvh_note(elf):
        why = why or "its vmlinux has no PVH entry note (CONFIG_PVH)"
        _write(refused, why.encode())
        return Entry(kernel, f"bzImage ({why})")
    _write(cached, elf)
    _prune()
    return Entry(cached, "PVH (vmlinux decompressed on the host; no decompressor, no KASLR)")


def _unpack(data: bytes) -> tuple[str, bytes | None]:
    """A bzImage's vmlinux ELF: ("", elf), or (why not, None)."""
    if len(data) < 0x250 or data[0x202:0x206] != HEADER_MAGIC:
        return "not a bzImage", None
    setup_sects = data[0x1F1] or 4
    start = (setup_sects + 1) * 512
    offset, length = struct.unpack_from("<II", data, 0x248)
    payload = data[start + offset:start + offset + length]
    try:
        if payload.startswith(b"\xfd7zXZ\x00"):
            elf = lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(payload)
        elif payload.startswith(b"\x1f\x8b"):
            elf = gzip.decompress(payload)
        elif payload.startswith(b"BZh"):
            elf = bz2.decompress(payload)
        elif payload.startswith(b"\x5d\x00\x00"):
            elf = lzma.LZMADecompressor(format=lzma.FORMAT_ALONE).decompress(payload)
        elif payload.startswith(b"\x28\xb5\x2f\xfd"):
            if shutil.which("zstd") is None:
                return "a zstd payload, and the zstd program is not installed (Debian package zstd)", None
            # The build appends the uncompressed size (4 bytes) after the zstd frame.
            done = subprocess.run(["zstd", "-dc"], input=payload[:-4], capture_output=True)
            if done.returncode != 0:
                return "its zstd payload does not decompress", None
            elf = done.stdout
        else:
            return f"a payload compressed as {payload[:4].hex()} (lz4 or lzo), which is not unpacked here", None
    except (lzma.LZMAError, OSError, EOFError, ValueError):
        return "its payload does not decompress", None
    if elf[:4] != b"\x7fELF":
        return "its payload is not an ELF vmlinux", None
    return "", elf


def _has_pvh_note(elf: bytes) -> bool:
    """Whether an ELF64 has the Xen PHYS32_ENTRY note QEMU enters a kernel through."""
    try:
        if elf[4] != 2 or elf[5] != 1:          # ELFCLASS64, little-endian
            return False
        phoff, = struct.unpack_from("<Q", elf, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
        for i in range(phnum):
            kind, _flags, offset, _v, _p, filesz = struct.unpack_from("<IIQQQQ", elf, phoff + i * phentsize)
            if kind != 4:                       # PT_NOTE
                continue
            at, end = offset, offset + filesz
            while at + 12 <= end:
                namesz, descsz, note = struct.unpack_from("<III", elf, at)
                name = elf[at + 12:at + 12 + namesz].rstrip(b"\0")
                if name == XEN_NOTE_NAME and note == XEN_ELFNOTE_PHYS32_ENTRY:
                    return True
                at += 12 + (namesz + 3) // 4 * 4 + (descsz + 3) // 4 * 4
    except struct.error:
        return False
    return False


def _write(path: Path, data: bytes) -> None:
    """Whole or not at all: another process may be writing the same file."""
    paths.write_whole(path, data)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _prune() -> None:
    timed = []
    for p in cache_dir().glob(f"{PREFIX}*"):
        if p.name.endswith(".not-pvh"):
            continue
        try:
            timed.append((p.stat().st_mtime, p))
        except FileNotFoundError:
            continue            # removed meanwhile by another perflab pruning the shared cache
    for _, old in sorted(timed, reverse=True)[KEEP:]:
        _unlink(str(old))

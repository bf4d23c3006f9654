"""Kernel configurations that boot under perflab: the options, a minimal config, and a check.

`OPTIONS` is what a kernel needs to boot perflab's guest and run the guest families:
64-bit, a serial console (two 8250 ports: console and agent), an initramfs (gzip),
ELF and script binaries, proc/sysfs/devtmpfs/tmpfs, virtio and 9p (the host's root,
a disk), and the syscalls the families use (futex, epoll, eventfd, SysV IPC, file
locks, unix and inet sockets, POSIX timers, SMP). Each is `y`: perflab's initramfs
loads no modules, so an `m` is as good as absent.

`write_config` makes a minimal `.config` with the tree's own kbuild: `make tinyconfig`
(or defconfig) in a scratch output directory, the options merged on top with the
tree's `scripts/kconfig/merge_config.sh -m`, then `make olddefconfig`; the result is
checked with `missing`, so an option the tree cannot give (a dependency absent in that
version) is named instead of silently dropped.

`find_config` reads a kernel's configuration from a `.config`, from the image itself
when it was built with IKCONFIG (the gzip stream between `IKCFG_ST` and `IKCFG_ED`
inside the compressed payload), or from the config beside it (Debian's
`/boot/config-RELEASE` beside `vmlinuz-RELEASE`, a build tree's `.config`).
"""

from __future__ import annotations

import lzma
import os
import re
import shutil
import subprocess
import tempfile
import zlib
from pathlib import Path

from perflab.core.errors import PerflabError
from perflab.execution.vm import kernel as kernels

# (option, why): every one must be `y`.
OPTIONS: tuple[tuple[str, str], ...] = (
    ("64BIT", "perflab's guest programs are x86-64"),
    ("PRINTK", "the console tail of a failed boot"),
    ("TTY", "serial console"), ("SERIAL_8250", "serial console and agent channel"),
    ("SERIAL_8250_CONSOLE", "console=ttyS0"),
    ("BLK_DEV_INITRD", "perflab's initramfs"), ("RD_GZIP", "the initramfs is gzipped"),
    ("BINFMT_ELF", "static programs"), ("BINFMT_SCRIPT", "#! scripts (cmd jobs)"),
    ("PROC_FS", "/proc"), ("SYSFS", "/sys"), ("DEVTMPFS", "/dev"), ("TMPFS", "/tmp, /run"),
    ("SHMEM", "tmpfs and shared memory"),
    ("MULTIUSER", "uids and gids (setuid, getuid)"),
    ("FUTEX", "threads (futex1-4, posix_semaphore1, ebizzy)"), ("EPOLL", "epoll"),
    ("EVENTFD", "eventfd1"), ("SIGNALFD", "signalfd"), ("TIMERFD", "timerfd"),
    ("POSIX_TIMERS", "clock_gettime, timers"), ("HIGH_RES_TIMERS", "timing"),
    ("FILE_LOCKING", "lock1, lmbench lat_fcntl"), ("SYSVIPC", "lmbench lat_sem, shared memory"),
    ("ADVISE_SYSCALLS", "madvise (malloc)"), ("AIO", "io_submit"),
    ("NET", "sockets"), ("UNIX", "hackbench, unix1, lmbench lat_unix"), ("INET", "lmbench lat_tcp/lat_udp"),
    ("SMP", "vm.cpus > 1"),
    ("PCI", "virtio devices"), ("VIRTIO_MENU", "virtio"), ("VIRTIO_PCI", "virtio devices"),
    ("BLOCK", "disks"), ("VIRTIO_BLK", "a disk for fs: jobs"),
    ("NETWORK_FILESYSTEMS", "9p"), ("NET_9P", "9p"), ("NET_9P_VIRTIO", "9p over virtio"),
    ("9P_FS", "the host's root, read-only, for cmd jobs"),
)
NAMES = tuple(name for name, _why in OPTIONS)
# Set by `perflab kernel config` besides, not required of a kernel: the image carries its own
# config, which `perflab kernel check bzImage` reads; the PVH entry (under HYPERVISOR_GUEST),
# through which QEMU boots the vmlinux without the kernel's decompressor (execution.vm.entry);
# and ACPI, through which the kernel finds the HPET: without it the local APIC timer is
# calibrated against the PIT, which under icount took a minimal 6.1 kernel 9 s of TCG
# (10.2 s to HELLO; with ACPI 4.5-5.8 s, Debian's 5.9 s; under tcg 1.0 -> 1.5 s; docs/vm.md);
# and KALLSYMS, through which insn-profile names the guest kernel's functions (System.map
# beside the image does too).
EXTRA = ("IKCONFIG", "HYPERVISOR_GUEST", "PVH", "ACPI", "KALLSYMS")
BASES = ("tinyconfig", "defconfig")

_LINE = re.compile(r"^(CONFIG_[A-Za-z0-9_]+)=(.*)$")
_UNSET = re.compile(r"^# (CONFIG_[A-Za-z0-9_]+) is not set$")


def parse(text: str) -> dict[str, str]:
    """A .config's text -> {"CONFIG_X": value}; "n" for `# CONFIG_X is not set`."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        m = _LINE.match(line)
        if m:
            out[m.group(1)] = m.group(2)
            continue
        m = _UNSET.match(line)
        if m:
            out[m.group(1)] = "n"
    return out


def loaded_as_modules() -> frozenset[str]:
    """The options perflab's guest loads as modules when they are `=m` (its 9p, disk and file
    systems: execution.vm.modules.NEEDS), as CONFIG_ names."""
    from perflab.execution.vm.modules import NEEDS

    return frozenset(option for pairs in NEEDS.values() for option, module in pairs if module)


def missing(config: dict[str, str], modules: bool = False) -> list[str]:
    """The options of OPTIONS a parsed config lacks (absent, n, or only a module), as CONFIG_ names.
    `modules`: the kernel's modules are at hand, so an option the guest loads as a module
    (loaded_as_modules) is not lacking when it is `=m`."""
    loadable = loaded_as_modules() if modules else frozenset()
    out = []
    for name in NAMES:
        value = config.get(f"CONFIG_{name}", "n")
        if value != "y" and not (value == "m" and f"CONFIG_{name}" in loadable):
            out.append(f"CONFIG_{name}" + ("=m" if value == "m" else ""))
    return out


def fragment() -> str:
    """The options as a kconfig fragment (what merge_config.sh reads)."""
    return "".join(f"CONFIG_{name}=y\n" for name in (*NAMES, *EXTRA))


# -- reading a kernel's configuration ---------------------------------------------------

# Reading is streamed and bounded (issue 31, M2 and M3): a kernel image or a hostile file of
# any size is read in CHUNK pieces, at most MAX_CANDIDATES compressed streams are tried per
# kind, each decompressed to at most MAX_PAYLOAD bytes and never kept whole, so memory stays
# near a few CHUNKs and time near one pass over the file and the streams tried.
CHUNK = 4 << 20
MAX_TEXT = 16 << 20          # a .config is ~300 KB
MAX_CANDIDATES = 16          # a bzImage's payload is its first stream; a few spares for odd images
MAX_PAYLOAD = 256 << 20      # a decompressed vmlinux is 30-100 MB
MAX_EMBEDDED = 4 << 20       # the gzip between IKCFG_ST and IKCFG_ED is ~40 KB
# How far into a file the config and the payload are looked for: a bzImage's payload starts in
# its first kilobytes, and a vmlinux's IKCONFIG is in .rodata, its first tens of MB (the debug
# sections of a 700 MB vmlinux come after).
MAX_SCAN = 256 << 20
START, END = b"IKCFG_ST", b"IKCFG_ED"
MAGICS = ((b"\x1f\x8b\x08", "gzip"), (b"\xfd7zXZ\x00", "xz"))


def _embedded(window: bytes) -> str | None:
    """The config of IKCFG_ST<gzip>IKCFG_ED starting `window` (bounded), or None."""
    end = window.find(END, len(START))
    blob = window[len(START):end if end > 0 else None]
    try:
        out = zlib.decompressobj(16 + zlib.MAX_WBITS)
        text = out.decompress(blob, MAX_TEXT)
    except (zlib.error, EOFError):
        return None
    return text.decode(errors="replace") if text else None


class _Finder:
    """Feeds a stream of bytes (a file, a decompressor's output) through, finding IKCFG_ST and
    returning the embedded config, keeping only a window of the stream."""

    def __init__(self):
        self.tail = b""
        self.capture: bytearray | None = None

    def feed(self, data: bytes) -> str | None:
        if self.capture is not None:
            self.capture += data[:MAX_EMBEDDED - len(self.capture)]
        else:
            joined = self.tail + data
            at = joined.find(START)
            if at < 0:
                self.tail = joined[-(len(START) - 1):]
                return None
            self.capture = bytearray(joined[at:at + MAX_EMBEDDED])
        if END in self.capture or len(self.capture) >= MAX_EMBEDDED:
            return self.finish()
        return None

    def finish(self) -> str | None:
        if self.capture is None:
            return None
        captured, self.capture = bytes(self.capture), None
        return _embedded(captured)


def _scan(path: Path) -> tuple[str | None, list[tuple[int, str]]]:
    """One pass over the file's first MAX_SCAN bytes: the IKCONFIG of an uncompressed image, else
    (None, the offsets of the first MAX_CANDIDATES gzip and xz signatures)."""
    finder = _Finder()
    found: dict[str, list[int]] = {kind: [] for _, kind in MAGICS}
    overlap = max(len(m) for m, _ in MAGICS) - 1
    with open(path, "rb") as f:
        base, tail = 0, b""
        while base < MAX_SCAN:
            chunk = f.read(CHUNK)
            if not chunk:
                break
            config = finder.feed(chunk)
            if config is not None:
                return config, []
            joined = tail + chunk
            origin = base - len(tail)
            for magic, kind in MAGICS:
                at = joined.find(magic)
                while at >= 0 and len(found[kind]) < MAX_CANDIDATES:
                    if origin + at not in found[kind]:
                        found[kind].append(origin + at)
                    at = joined.find(magic, at + 1)
            base += len(chunk)
            tail = joined[-overlap:]
    return finder.finish(), [(offset, kind) for _, kind in MAGICS for offset in found[kind]]


def _from_payload(path: Path, offset: int, kind: str) -> str | None:
    """The IKCONFIG of the compressed stream at `offset`, decompressed as a stream (bounded)."""
    gz = kind == "gzip"
    decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS) if gz else lzma.LZMADecompressor()
    finder, produced = _Finder(), 0
    with open(path, "rb") as f:
        f.seek(offset)
        while produced < MAX_PAYLOAD and not decompressor.eof:
            if gz:
                data = decompressor.unconsumed_tail or f.read(CHUNK)
            else:   # lzma keeps unconsumed input itself; needs_input is False while output waits
                data = f.read(CHUNK) if decompressor.needs_input else b""
            if not data and (gz or decompressor.needs_input):
                break
            try:
                out = decompressor.decompress(data, CHUNK)
            except (zlib.error, lzma.LZMAError, EOFError):
                return None
            produced += len(out)
            found = finder.feed(out)
            if found is not None:
                return found
    return finder.finish()


def config_text(path: Path) -> tuple[str, str]:
    """(config text, where it came from) of a .config or a kernel image; PerflabError in one line."""
    if not path.exists():
        raise PerflabError(f"{path}: no such file")
    if not path.is_file():
        raise PerflabError(f"{path}: not a regular file (a .config or a kernel image)")
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(65536)
            if b"CONFIG_" in head and head.isascii():
                if size > MAX_TEXT:
                    raise PerflabError(f"{path}: {size} bytes of text is not a kernel configuration "
                                       f"(a .config is under {MAX_TEXT >> 20} MB)")
                return (head + f.read(MAX_TEXT)).decode(errors="replace"), str(path)
        found, candidates = _scan(path)
        for offset, kind in candidates:
            if found is not None:
                break
            found = _from_payload(path, offset, kind)
    except OSError as e:
        raise PerflabError(f"{path}: {e.strerror or e}") from None
    if found is not None:
        return found, f"{path} (IKCONFIG)"
    beside = kernels.config_of(path)
    if beside is not None:
        return beside.read_text(errors="replace"), str(beside)
    raise PerflabError(f"{path}: no kernel configuration found: not a .config, no IKCONFIG in the image "
                       "(gzip or xz payload), no config-RELEASE or build tree .config beside it")


def check(path: Path) -> tuple[str, list[str], list[str]]:
    """(where the config was read, the options it lacks, the options the guest loads as modules).

    A kernel image whose modules are found (execution.vm.modules.modules_dir: beside it, in its
    build tree or /lib/modules) has its `=m` 9p, disk and file-system options loaded by the
    guest; a bare .config cannot say where its modules will be, so they count as lacking there."""
    from perflab.execution.vm import modules as kmodules

    text, where = config_text(path)
    config = parse(text)
    if not config:
        raise PerflabError(f"{where}: no CONFIG_ lines: not a kernel configuration")
    at_hand = bool(kmodules.modules_dir(path, kmodules.release_of(path))) if path.is_file() else False
    lacking = missing(config, modules=at_hand)
    loaded = [f"CONFIG_{n}=m" for n in NAMES if f"CONFIG_{n}=m" not in lacking and config.get(f"CONFIG_{n}") == "m"]
    return where, lacking, loaded


# -- writing a minimal configuration -------------------------------------------------------

def kernel_tree(tree: Path) -> Path:
    """`tree` if it is a kernel source tree (top Makefile, Kconfig and merge_config.sh), else a one-line error."""
    tree = tree.expanduser().resolve()
    needed = ("Makefile", "Kconfig", "scripts/kconfig/merge_config.sh")
    absent = [name for name in needed if not (tree / name).is_file()]
    if absent:
        raise PerflabError(f"--tree {tree}: not a kernel source tree (no {', '.join(absent)})")
    return tree


def _make(tree: Path, out: Path, *targets: str, timeout: float = 900) -> None:
    if shutil.which("make") is None:
        raise PerflabError("make not found (Debian package make)")
    done = subprocess.run(["make", "-C", str(tree), f"O={out}", *targets], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=timeout)
    if done.returncode != 0:
        lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        hint = ""
        if any("flex" in line or "bison" in line for line in lines[-5:]):
            hint = " (kconfig needs flex and bison: Debian packages flex, bison)"
        raise PerflabError(f"make {' '.join(targets)} in {tree} failed: {lines[-1] if lines else done.returncode}{hint}")


def write_config(tree: Path, output: Path, base: str = "tinyconfig") -> list[str]:
    """Write a minimal config of `tree` to `output`; the options given on top of the base."""
    if base not in BASES:
        raise PerflabError(f"--base {base}: expected one of {', '.join(BASES)}")
    tree = kernel_tree(tree)
    with tempfile.TemporaryDirectory(prefix="perflab-kconfig-") as scratch:
        out = Path(scratch)
        _make(tree, out, base)
        frag = out / "perflab.config"
        frag.write_text(fragment())
        merged = subprocess.run(["/bin/sh", str(tree / "scripts/kconfig/merge_config.sh"), "-m", "-O", str(out),
                                 str(out / ".config"), str(frag)], capture_output=True, text=True,
                                stdin=subprocess.DEVNULL, cwd=scratch)
        if merged.returncode != 0:
            raise PerflabError(f"merge_config.sh failed: {(merged.stderr or merged.stdout).strip().splitlines()[-1:]}")
        _make(tree, out, "olddefconfig")
        text = (out / ".config").read_text()
        lacking = missing(parse(text))
        if lacking:
            raise PerflabError(f"{tree}: kconfig could not set {' '.join(lacking)} (absent in this kernel "
                               "version, or a dependency it cannot meet); nothing written")
        output = output.expanduser()
        tmp = output.with_name(output.name + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, output)
    return list(NAMES)

"""What a guest needs of its kernel beyond booting: 9p for the host's root, virtio disks, file systems.

A job that runs host programs (`cmd`, `fio`) needs the host's root over virtio-9p; a job
with `fs:` needs a virtio disk and that file system. Debian's kernels have all of it as
modules, which the guest must load itself (it has no modprobe): `plan()` names the
modules, with their dependencies first, read from each module's own `.modinfo` section
(`depends=`, and `softdep=pre:` for the checksum drivers ext4 and btrfs ask for lazily),
and the initramfs carries them; the agent loads them in that order (finit_module).

Where a kernel's pieces are found (docs/vm.md, "Modules"):
- its release: the bzImage header's version string (offset 0x20E points at it), so a
  kernel of any name works;
- its config: `config-RELEASE` beside a Debian vmlinuz, or a build tree's `.config`
  (`kernel.config_of`); when none is found, the modules present decide, and what fails
  to mount is said after the guest's HELLO;
- its modules: `../lib/modules/RELEASE` beside `boot/` (how tools/fetch_kernel.py
  unpacks a Debian package), the build tree itself, or `/lib/modules/RELEASE`.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

from perflab.core.errors import PerflabError
from perflab.execution.vm import kernel as kernels

# What each need takes: (config option, module name), in loading order.
NEEDS = {
    "9p": (("CONFIG_VIRTIO_PCI", "virtio_pci"), ("CONFIG_NET_9P", "9pnet"), ("CONFIG_NET_9P_VIRTIO", "9pnet_virtio"),
           ("CONFIG_9P_FS", "9p")),
    "disk": (("CONFIG_VIRTIO_PCI", "virtio_pci"), ("CONFIG_VIRTIO_BLK", "virtio_blk")),
    "ext4": (("CONFIG_EXT4_FS", "ext4"),),
    "xfs": (("CONFIG_XFS_FS", "xfs"),),
    "btrfs": (("CONFIG_BTRFS_FS", "btrfs"),),
    "tmpfs": (("CONFIG_TMPFS", None),),
}
WHY = {"9p": "the host's root is shared over virtio-9p", "disk": "the job's file system is a virtio disk"}
# How a kernel's modules may be stored: as they are, or compressed (Debian's 6.12 kernels ship
# .ko.xz). A compressed one is decompressed on the host when the initramfs is made: the agent's
# finit_module then needs no decompressor in the guest's kernel.
MODULE_SUFFIXES = (".ko", ".ko.xz", ".ko.zst", ".ko.gz")


def version_string_of(image: Path) -> str | None:
    """A bzImage/vmlinuz's setup header version string ("RELEASE (BUILDER) #1 SMP ... (DATE)"), or None."""
    try:
        with open(image, "rb") as f:
            head = f.read(0x210)
            if len(head) < 0x210 or head[0x202:0x206] != b"HdrS":
                return None
            pointer, = struct.unpack_from("<H", head, 0x20E)
            f.seek(pointer + 0x200)
            text = f.read(256).split(b"\0")[0].decode(errors="replace")
    except OSError:
        return None
    return text if text.strip() else None


def release_of(image: Path) -> str | None:
    """The kernel release a bzImage/vmlinuz says it is (its setup header's version string)."""
    text = version_string_of(image)
    return text.split()[0] if text else None


def read_config(path: Path | None) -> dict[str, str] | None:
    """CONFIG_X -> 'y'/'m'/value of a kernel .config; None without one."""
    if path is None:
        return None
    out = {}
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("CONFIG_") and "=" in line:
            key, value = line.split("=", 1)
            out[key] = value
    return out


def modules_dir(image: Path, release: str | None) -> Path | None:
    """Where the kernel's modules are, or None."""
    if not release:
        return None
    image = image.resolve()
    candidates = [image.parent.parent / "lib" / "modules" / release, Path("/lib/modules") / release]
    if image.name == "bzImage" and len(image.parents) >= 3:
        candidates.insert(0, image.parents[2])      # a build tree: modules sit beside their sources
    for candidate in candidates:
        if candidate.is_dir() and any(any(candidate.glob(f"**/*{suffix}")) for suffix in MODULE_SUFFIXES):
            return candidate
    return None


def module_bytes(path: Path) -> bytes:
    """A module's ELF file, decompressed when it is stored compressed (.ko.xz, .ko.gz, .ko.zst)."""
    import gzip
    import lzma
    import shutil
    import subprocess

    data = path.read_bytes()
    try:
        if path.name.endswith(".xz"):
            return lzma.decompress(data)
        if path.name.endswith(".gz"):
            return gzip.decompress(data)
    except (lzma.LZMAError, OSError, EOFError) as e:
        raise PerflabError(f"{path}: cannot decompress the module: {e}") from None
    if path.name.endswith(".zst"):
        # Python 3.11 has no zstd: the zstd program, where installed.
        if shutil.which("zstd") is None:
            raise PerflabError(f"{path}: a zstd-compressed module needs the zstd program (Debian package zstd)")
        done = subprocess.run(["zstd", "-dc", str(path)], capture_output=True)
        if done.returncode != 0:
            raise PerflabError(f"{path}: cannot decompress the module: {done.stderr.decode(errors='replace').strip()}")
        return done.stdout
    return data


def modinfo(path: Path) -> dict[str, list[str]]:
    """The `.modinfo` section of a module: key -> values (an ELF64 file's section table, read directly)."""
    data = module_bytes(path)
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise PerflabError(f"{path}: not a 64-bit kernel module")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)

    def section(i: int) -> tuple[int, int, int]:
        name, _type, _flags, _addr, offset, size = struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
        return name, offset, size

    _, names_at, _ = section(shstrndx)
    out: dict[str, list[str]] = {}
    for i in range(shnum):
        name, offset, size = section(i)
        if data[names_at + name:].split(b"\0", 1)[0] == b".modinfo":
            for entry in data[offset:offset + size].split(b"\0"):
                key, eq, value = entry.decode(errors="replace").partition("=")
                if eq:
                    out.setdefault(key, []).append(value)
    return out


def _norm(name: str) -> str:
    return name.replace("-", "_")


@dataclass
class Plan:
    """The modules a guest loads (host paths, in order) and the guest paths they go to."""

    release: str | None
    load: list[Path] = field(default_factory=list)
    directory: Path | None = None

    def files(self) -> dict[str, Path]:
        """The modules stored as they are: guest path -> host file."""
        return {self.guest_path(p): p for p in self.load if p.name.endswith(".ko")}

    def data(self) -> dict[str, bytes]:
        """The compressed modules, decompressed: guest path -> the module's bytes."""
        return {self.guest_path(p): module_bytes(p) for p in self.load if not p.name.endswith(".ko")}

    def guest_path(self, module: Path) -> str:
        relative = str(module.relative_to(self.directory))
        return f"/lib/modules/{self.release}/{relative[:relative.rindex('.ko') + 3]}"


class _Index:
    def __init__(self, directory: Path):
        self.directory = directory
        self.paths = {_norm(p.name[:p.name.rindex(".ko")]): p
                      for suffix in reversed(MODULE_SUFFIXES) for p in sorted(directory.glob(f"**/*{suffix}"))}

    def find(self, name: str) -> Path | None:
        # A softdep may name an algorithm (crypto-crc32c, xxhash64, blake2b-256) rather than a
        # module: its generic driver provides it.
        base = _norm(name.removeprefix("crypto-"))
        for candidate in (base, base + "_generic", re.sub(r"_?\d+$", "", base) + "_generic"):
            if candidate in self.paths:
                return self.paths[candidate]
        return None


def _add(index: _Index, path: Path, out: list[Path], seen: set[Path]) -> None:
    if path in seen:
        return
    seen.add(path)
    info = modinfo(path)
    pre = []
    for soft in info.get("softdep", []):
        words = soft.replace("post:", " post: ").split()
        in_pre = False
        for word in words:
            if word.endswith(":"):
                in_pre = word == "pre:"
            elif in_pre:
                pre.append(word)
    for name in [*pre, *",".join(info.get("depends", [])).split(",")]:
        dep = index.find(name) if name else None
        if dep is not None:          # an unknown softdep is optional: the module works without it
            _add(index, dep, out, seen)
    out.append(path)


def plan(image: Path | str, needs: list[str], purpose: str) -> Plan:
    """The modules the guest of `image` loads for `needs` ('9p', 'disk', 'ext4' ...).

    PerflabError (one line, naming the option or the missing module) when the kernel
    cannot do it: refused before anything boots.
    """
    image = Path(image)
    release = release_of(image)
    config = read_config(kernels.config_of(image))
    directory = modules_dir(image, release)
    index = _Index(directory) if directory else None
    result = Plan(release, directory=directory)
    seen: set[Path] = set()
    for need in needs:
        for option, module in NEEDS[need]:
            state = config.get(option) if config is not None else None
            if config is not None and state not in ("y", "m"):
                raise PerflabError(f"{purpose}: kernel {image.name} lacks {option} "
                                   f"({WHY.get(need, f'the job needs {need}')}: a kernel built with {option}=y or =m has it)")
            if module is None or state == "y":
                continue
            path = index.find(module) if index else None
            if path is None and state == "m":
                where = f"{directory}" if directory else f"../lib/modules/{release} or /lib/modules/{release}"
                raise PerflabError(f"{purpose}: kernel {image.name} has {option}=m but module {module}.ko "
                                   f"is not in {where} (nor compressed: {', '.join(MODULE_SUFFIXES[1:])}; "
                                   "tools/fetch_kernel.py unpacks Debian's modules)")
            if path is not None:
                _add(index, path, result.load, seen)
    return result


def setup_lines(plan_: Plan) -> list[str]:
    """The agent's setup lines that load the planned modules."""
    return [f"insmod {plan_.guest_path(p)}" for p in plan_.load]


def share_root_lines(root: str) -> list[str]:
    """Mount the host's root (9p tag `hostroot`) read-only at `root`, with the guest's own
    /proc, /sys, /dev, /tmp and /run bound inside it (the chroot a host program runs in)."""
    # msize: 9p's default of 8 KiB makes every read of a program a dozen round trips.
    lines = [f"mount hostroot {root} 9p ro trans=virtio,version=9p2000.L,msize=262144,cache=loose"]
    lines += [f"bind /{d} {root}/{d}" for d in ("proc", "sys", "dev", "tmp", "run")]
    return lines

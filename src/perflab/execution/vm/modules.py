"""What a guest needs of its kernel beyond booting: 9p for the host's root, virtio disks, file systems.

A job that runs host programs (`cmd`, `fio`) needs the host's root over virtio-9p; a job
with `fs:` needs a virtio disk and that file system. Debian's kernels have all of it as
modules, which the guest must load itself (it has no modprobe): `plan()` names the
modules, with their dependencies first, read from each module's own `.modinfo` section
(`depends=`, and `softdep=pre:` for the checksum drivers ext4 and btrfs ask for lazily),
and the initramfs carries them; the agent loads them in that order (finit_module).

A module goes into the initramfs without the signature appended to it (`without_signature`)
when the kernel loads unsigned modules (`signatures_needed`): checking it was most of the
agent's work under TCG (Debian 6.12: SHA-256 of 1.2 MB of modules and an ECDSA verification
each, 0.22 s of 0.33 s of instruction-time from /init to HELLO). The code loaded is the same;
the kernel notes the unsigned module in its taint (E). docs/vm.md, "Modules without their
signatures".

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

import os
import re
import struct
from collections.abc import Iterator
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
# scripts/sign-file's layout at a module's end: the PKCS#7 signature, struct module_signature
# (12 bytes: algo, hash, id_type, signer_len, key_id_len, 3 pad bytes, sig_len big-endian), the magic.
SIGNATURE_MAGIC = b"~Module signature appended~\n"
SIGNATURE_INFO = 12
# Boot options under which the kernel may refuse a module without its signature: an enforced
# signature check, a locked-down kernel, an IMA policy that appraises modules (modsig).
SIGNATURE_OPTIONS = ("module.sig_enforce", "lockdown", "ima_appraise", "ima_policy")
# Kernel options that do the same whatever the command line says.
# (CONFIG_IMA_ARCH_POLICY acts only under UEFI secure boot, which perflab's guests do not have.)
TAINT_UNSIGNED_MODULE = 1 << 13      # 'E', what a module loaded without its signature adds to the taint
# (CONFIG_IMA_APPRAISE_REQUIRE_MODULE_SIGS: a built-in IMA rule that appraises every module, the
# initramfs's too; ima_appraise_tcb's rules leave tmpfs and ramfs, where the modules are, alone.)
SIGNATURE_CONFIG = ("CONFIG_MODULE_SIG_FORCE", "CONFIG_LOCK_DOWN_KERNEL_FORCE_INTEGRITY",
                    "CONFIG_LOCK_DOWN_KERNEL_FORCE_CONFIDENTIALITY", "CONFIG_IMA_APPRAISE_REQUIRE_MODULE_SIGS")


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
        if candidate.is_dir() and next(_module_files(candidate), None) is not None:
            return candidate
    return None


def _module_files(directory: Path) -> Iterator[Path]:
    """The module files under `directory`, stored as they are or compressed: one walk of the tree
    (a build tree is the kernel's whole source), symbolic links to directories not followed."""
    for root, dirs, names in os.walk(directory):
        dirs.sort()
        for name in sorted(names):
            if name.endswith(MODULE_SUFFIXES):
                yield Path(root) / name


# A module read once per process and change: the plan reads its .modinfo and the initramfs its
# bytes (a .ko.xz decompressed twice was 10-20 ms of the command's time before its guest starts).
_READ: dict[tuple[str, int, int], bytes] = {}


def module_bytes(path: Path) -> bytes:
    """A module's ELF file, decompressed when it is stored compressed (.ko.xz, .ko.gz, .ko.zst)."""
    try:
        st = path.stat()
    except OSError as e:
        raise PerflabError(f"{path}: cannot read the module: {e.strerror}") from None
    key = (str(path), st.st_mtime_ns, st.st_size)
    if key not in _READ:
        if len(_READ) > 64:
            _READ.clear()
        _READ[key] = _module_bytes(path)
    return _READ[key]


def _module_bytes(path: Path) -> bytes:
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


def without_signature(data: bytes, name: str = "a module") -> bytes:
    """A module's ELF file without the signature appended to it: the bytes the signature was
    made over. A module without one comes back as it is; PerflabError naming `name` for a
    signature whose stated length does not fit the file."""
    if not data.endswith(SIGNATURE_MAGIC):
        return data
    end = len(data) - len(SIGNATURE_MAGIC)
    signer_len, key_id_len = (data[end - 9], data[end - 8]) if end >= SIGNATURE_INFO else (0, 0)
    sig_len, = struct.unpack_from(">I", data, end - 4) if end >= SIGNATURE_INFO else (end,)
    start = end - SIGNATURE_INFO - sig_len - signer_len - key_id_len
    if start < 64 or data[:4] != b"\x7fELF":
        raise PerflabError(f"{name}: its signature says it is {sig_len} bytes long, more than the file holds")
    return data[:start]


def signatures_needed(config: dict[str, str] | None, cmdline: str) -> str | None:
    """Why the guest's kernel may refuse a module without its signature (its config or its
    command line), or None: modules then go into the initramfs without it."""
    if config is None:          # nothing says the check is not forced; one forced refuses every bare module
        return "its config is not found: CONFIG_MODULE_SIG_FORCE may be set"
    for option in SIGNATURE_CONFIG:
        if config.get(option) == "y":
            return f"{option}=y"
    for word in cmdline.split():
        name, _, value = word.partition("=")
        name = name.replace("-", "_")       # the kernel reads a parameter's '-' as '_' (params.c, parameq)
        if name in SIGNATURE_OPTIONS and not (name == "module.sig_enforce" and value.lower() in ("0", "n", "no", "off")):
            return word
        # Where an unsigned module panics the kernel: any crypto module under FIPS mode
        # (crypto/algapi.c, crypto_check_module_sig), and taint E when panic_on_taint names it.
        if name == "fips" and not re.fullmatch(r"0*|0x0*", value.lower()):
            return word
        if name == "panic_on_taint" and _taint_mask(value) & TAINT_UNSIGNED_MODULE:
            return word
    return None


def _taint_mask(value: str) -> int:
    """panic_on_taint's mask as the kernel reads it (hexadecimal before an optional ",nousertaint");
    one it could not read counts as all flags, so signatures are kept."""
    try:
        return int(value.partition(",")[0], 16)
    except ValueError:
        return -1


def _norm(name: str) -> str:
    return name.replace("-", "_")


@dataclass
class Plan:
    """The modules a guest loads (host paths, in order) and the guest paths they go to."""

    release: str | None
    load: list[Path] = field(default_factory=list)
    directory: Path | None = None
    signed: str | None = "kept"      # why the modules keep their signatures; None: they go without

    def _as_is(self, module: Path) -> bool:
        return module.name.endswith(".ko") and self.signed is not None

    def files(self) -> dict[str, Path]:
        """The modules stored as they are (plain, signatures kept): guest path -> host file."""
        return {self.guest_path(p): p for p in self.load if self._as_is(p)}

    def data(self) -> dict[str, bytes]:
        """The other modules, decompressed and, when `signed` is None, without their signatures:
        guest path -> the module's bytes."""
        keep = self.signed is not None
        return {self.guest_path(p): module_bytes(p) if keep else without_signature(module_bytes(p), str(p))
                for p in self.load if not self._as_is(p)}

    def signature_fact(self) -> str:
        """How the guest's modules were loaded, as the run records it ("" when it loads none)."""
        if not self.load:
            return ""
        if self.signed is None:
            return "stripped: loaded without their signatures, not checked (kernel taint E)"
        return f"checked by the kernel ({self.signed})"

    def guest_path(self, module: Path) -> str:
        relative = str(module.relative_to(self.directory))
        return f"/lib/modules/{self.release}/{relative[:relative.rindex('.ko') + 3]}"


class _Index:
    def __init__(self, directory: Path):
        self.directory = directory
        # A module stored as it is wins over a compressed copy of it (.ko, then .ko.xz, .ko.zst, .ko.gz).
        rank = {suffix: i for i, suffix in enumerate(MODULE_SUFFIXES)}
        found = sorted(_module_files(directory), key=lambda p: (-rank[p.name[p.name.rindex(".ko"):]], p))
        self.paths = {_norm(p.name[:p.name.rindex(".ko")]): p for p in found}

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


def plan(image: Path | str, needs: list[str], purpose: str, cmdline: str | None = None) -> Plan:
    """The modules the guest of `image` loads for `needs` ('9p', 'disk', 'ext4' ...).

    `cmdline`: the guest kernel's command line; given, the modules go without their signatures
    unless the kernel may refuse them so (`signatures_needed`). None: they keep them.

    PerflabError (one line, naming the option or the missing module) when the kernel
    cannot do it: refused before anything boots.
    """
    image = Path(image)
    release = release_of(image)
    config = read_config(kernels.config_of(image))
    directory = modules_dir(image, release)
    index = _Index(directory) if directory else None
    result = Plan(release, directory=directory,
                  signed="kept" if cmdline is None else signatures_needed(config, cmdline))
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

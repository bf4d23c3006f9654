"""The guest's root: a newc cpio archive that perflab writes itself, uncompressed.

It holds perflab's agent as /init (execution/vm/c/agent.c), perflab's launcher
(execution/c/launch.c) at /usr/lib/perflab/launch, busybox-static with a link per
applet in /bin when the host has it (a shell, mount, ls ... for `cmd` jobs), the device
nodes the agent needs before devtmpfs is mounted, and any extra static programs the
caller names (guest path -> host file). All programs are built static (`-static`,
through perflab.core.cbuild), since the guest has no C library.

The archive is cached under $XDG_CACHE_HOME/perflab/vm/ by a hash of everything in it,
so a job's boots after the first reuse it. It is not compressed: the guest's kernel inflating
2.1 MB of gzip took 93 M instructions of Debian 6.1's boot (unpacking 126 ms of instruction-time
under icount, 33 ms for the 4.6 MB archive; `Run /init` at 0.842 s instead of 0.934 s), and
under TCG the unpacking is on the boot's critical path (crypto_kdf108_init waits for it).

newc format (the kernel's usr/gen_init_cpio and init/initramfs.c read it): per entry a
110-byte ASCII header ("070701" and thirteen 8-digit hex fields), the NUL-terminated name
padded to a multiple of 4 bytes (counting the header), the data padded likewise; the
archive ends with an entry named TRAILER!!!.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import struct
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from perflab.core import cbuild, paths
from perflab.core.errors import PerflabError
from perflab.execution import executor

AGENT_DIR = Path(__file__).parent / "c"
GUEST_LAUNCHER = "/usr/lib/perflab/launch"
SETUP = "/etc/perflab/setup"      # what the agent does before HELLO (agent.c: insmod, mount, bind)
BUSYBOX_CANDIDATES = ("/bin/busybox", "/usr/bin/busybox")
FORMAT_VERSION = "2"          # bump when the archive's layout changes: part of the cache key
# Archives kept in the cache, the most recently used: one boot's is 5-20 MB, and every agent,
# launcher, module set and signature choice makes another.
KEEP_ARCHIVES = 24


@dataclass(frozen=True)
class Entry:
    """One member of the archive."""

    name: str                  # without the leading "/"
    mode: int                  # file type and permission bits (stat.S_IFREG | 0o755 ...)
    data: bytes = b""          # a file's content, a symlink's target
    rdev: tuple[int, int] = (0, 0)


def _header(ino: int, entry: Entry) -> bytes:
    name = entry.name.encode() + b"\0"
    fields = (ino, entry.mode, 0, 0, 2 if stat.S_ISDIR(entry.mode) else 1, 0, len(entry.data),
              0, 0, entry.rdev[0], entry.rdev[1], len(name), 0)
    return b"070701" + b"".join(b"%08X" % f for f in fields) + name


def _pad(n: int) -> bytes:
    return b"\0" * (-n % 4)


def write_cpio(entries: list[Entry]) -> bytes:
    """The newc archive of `entries`, in order (a directory must come before what it holds)."""
    parts: list[bytes] = []
    for ino, entry in enumerate([*entries, Entry("TRAILER!!!", 0)], start=1):
        if entry.name == "TRAILER!!!":
            ino = 0
        head = _header(ino, entry)
        parts += [head, _pad(len(head)), entry.data, _pad(len(entry.data))]
    return b"".join(parts)


def read_cpio(data: bytes) -> list[Entry]:
    """The entries of a newc archive (the tests read back what write_cpio wrote)."""
    entries = []
    pos = 0
    while True:
        if data[pos:pos + 6] != b"070701":
            raise ValueError(f"not a newc header at offset {pos}")
        fields = [int(data[pos + 6 + 8 * i: pos + 14 + 8 * i], 16) for i in range(13)]
        namesize, filesize = fields[11], fields[6]
        name_start = pos + 110
        name = data[name_start:name_start + namesize - 1].decode()
        pos = name_start + namesize
        pos += -pos % 4
        body = data[pos:pos + filesize]
        pos += filesize
        pos += -pos % 4
        if name == "TRAILER!!!":
            return entries
        entries.append(Entry(name, fields[1], body, (fields[9], fields[10])))


def _directory(name: str) -> Entry:
    return Entry(name, stat.S_IFDIR | 0o755)


def _program(name: str, path: Path) -> Entry:
    try:
        return Entry(name, stat.S_IFREG | 0o755, path.read_bytes())
    except OSError as e:
        raise PerflabError(f"cannot put {path} into the guest's initramfs: {e.strerror}") from None


def build_static(program: str, source_dir: Path) -> Path:
    """A static binary of source_dir/<program>.c, through cbuild's cache (the machine's `cc`)."""
    try:
        with cbuild.static_programs():     # the one way a program is linked static (the families' too)
            return cbuild.build(program, source_dir, cc="cc")
    except cbuild.BuildError as e:
        raise PerflabError(f"cannot build {program} for the guest (static): {e.detail} "
                           "(a static C library is needed: Debian package libc6-dev)") from None


def is_static(path: Path) -> bool:
    """True when `path` is an ELF executable without a program interpreter (runs without ld.so)."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:4] != b"\x7fELF" or head[4] != 2:          # 64-bit ELF only (x86-64 guest)
                return False
            phoff, = struct.unpack_from("<Q", head, 32)
            phentsize, phnum = struct.unpack_from("<HH", head, 54)
            f.seek(phoff)
            table = f.read(phentsize * phnum)
    except (OSError, struct.error):
        return False
    return all(struct.unpack_from("<I", table, i * phentsize)[0] != 3 for i in range(phnum))   # PT_INTERP


def busybox() -> Path | None:
    """busybox-static's binary when installed (a dynamic busybox would not run in the guest)."""
    for candidate in BUSYBOX_CANDIDATES:
        if is_static(Path(candidate)):
            return Path(candidate)
    return None


def _applets(path: Path) -> list[str]:
    """busybox's applets (`busybox --list`), kept in the cache beside the archives by the binary's
    size and modification time: the command that boots a guest runs no program to learn them (a
    fork and exec before its QEMU can start)."""
    st = path.stat()
    kept = cache_dir() / f"busybox-{hashlib.sha256(f'{path}:{st.st_size}:{st.st_mtime_ns}'.encode()).hexdigest()[:16]}.list"
    try:
        return kept.read_text().split()
    except OSError:
        pass
    listing = subprocess.run([str(path), "--list"], capture_output=True, text=True)
    applets = sorted(set(listing.stdout.split()))
    if listing.returncode == 0 and applets:
        kept.parent.mkdir(parents=True, exist_ok=True)
        paths.write_whole(kept, "\n".join(applets) + "\n")
    return applets


def _busybox_entries(path: Path) -> list[Entry]:
    entries = [_program("bin/busybox", path)]
    for applet in _applets(path):
        if applet and "/" not in applet and applet != "busybox":
            entries.append(Entry(f"bin/{applet}", stat.S_IFLNK | 0o777, b"busybox"))
    return entries


def _parents(name: str, seen: set[str]) -> list[Entry]:
    out = []
    parts = name.split("/")[:-1]
    for i in range(1, len(parts) + 1):
        d = "/".join(parts[:i])
        if d not in seen:
            seen.add(d)
            out.append(_directory(d))
    return out


def entries(files: Mapping[str, Path | str] | None = None, *, with_busybox: bool = True,
            data: Mapping[str, bytes] | None = None) -> list[Entry]:
    """Every member of the guest's root: agent, launcher, busybox, device nodes, `files`, `data`
    (guest path -> content, e.g. the agent's setup lines)."""
    agent = build_static("agent", AGENT_DIR)
    launch = build_static("launch", executor.LAUNCHER_DIR)
    out = [_directory(d) for d in ("bin", "dev", "etc", "proc", "sys", "tmp", "run", "root",
                                   "usr", "usr/bin", "usr/lib", "usr/lib/perflab")]
    seen = {e.name for e in out}
    out += [
        Entry("dev/console", stat.S_IFCHR | 0o600, rdev=(5, 1)),
        Entry("dev/null", stat.S_IFCHR | 0o666, rdev=(1, 3)),
        Entry("dev/ttyS0", stat.S_IFCHR | 0o600, rdev=(4, 64)),
        Entry("dev/ttyS1", stat.S_IFCHR | 0o600, rdev=(4, 65)),
        Entry("etc/passwd", stat.S_IFREG | 0o644, b"root:x:0:0:root:/root:/bin/sh\n"),
        Entry("etc/group", stat.S_IFREG | 0o644, b"root:x:0:\n"),
        _program("init", agent),
        _program(GUEST_LAUNCHER.lstrip("/"), launch),
    ]
    seen |= {e.name for e in out}
    bb = busybox() if with_busybox else None
    if bb:
        out += [e for e in _busybox_entries(bb) if e.name not in seen]
        seen |= {e.name for e in out}
    for guest_path, host_path in sorted((files or {}).items()):
        name = str(guest_path).lstrip("/")
        if not name or name == "init" or name.startswith("usr/lib/perflab/"):
            raise PerflabError(f"guest path {guest_path!r} is perflab's own; choose another")
        out += _parents(name, seen)
        out = [e for e in out if e.name != name]      # a caller's file replaces a busybox link
        out.append(_program(name, Path(host_path)))
        seen.add(name)
    for guest_path, content in sorted((data or {}).items()):
        name = guest_path.lstrip("/")
        out += _parents(name, seen)
        out.append(Entry(name, stat.S_IFREG | 0o644, content))
        seen.add(name)
    return out


def cache_dir() -> Path:
    return paths.cache_home() / "vm"


def _intact(path: Path, archive: bytes) -> bool:
    """Whether a cached initramfs is whole: byte for byte the archive its name was made from (a
    truncated one was reused and its boot blamed on the kernel: "No working init found";
    issue 31, L3). A comparison of 5 MB in memory: ~2 ms, where inflating the gzip one took 60-80."""
    try:
        return path.stat().st_size == len(archive) and path.read_bytes() == archive
    except OSError:
        return False


def build(files: Mapping[str, Path | str] | None = None, *, with_busybox: bool = True,
          data: Mapping[str, bytes] | None = None) -> Path:
    """The initramfs holding `files` (guest path -> host file) and `data`, built or found in the cache."""
    members = entries(files, with_busybox=with_busybox, data=data)
    digest = hashlib.sha256(FORMAT_VERSION.encode())
    for e in members:
        digest.update(f"{e.name}\0{e.mode}\0{e.rdev}\0{len(e.data)}\0".encode())
        digest.update(e.data)
    target = cache_dir() / f"initramfs-{digest.hexdigest()[:20]}.cpio"
    archive = write_cpio(members)
    if target.is_file() and _intact(target, archive):
        with contextlib.suppress(OSError):
            os.utime(target)            # used again: kept longest (_prune_archives)
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    paths.write_whole(target, archive)
    _prune_archives()
    return target


def _prune_archives() -> None:
    """The KEEP_ARCHIVES most recently used archives kept, the others removed (one removed
    meanwhile by another perflab is skipped)."""
    timed = []
    for path in cache_dir().glob("initramfs-*.cpio"):
        with contextlib.suppress(FileNotFoundError):
            timed.append((path.stat().st_mtime, path))
    for _, old in sorted(timed, reverse=True)[KEEP_ARCHIVES:]:
        old.unlink(missing_ok=True)

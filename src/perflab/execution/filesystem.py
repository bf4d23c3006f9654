"""A fresh filesystem for one run (LKP's `fs:` key): made, mounted, and always undone.

`mounted(fstype, size, prefix)` makes a sparse backing file in /dev/shm (RAM, as
LKP's brd ramdisk), attaches it to a loop device, makes the filesystem on it
(ext4, xfs, btrfs; tmpfs is mounted directly with `size=`), mounts it on a fresh
directory and yields a work directory inside it with the facts to record. On the
way out — normal end, failure, Ctrl-C/SIGTERM (the runner turns them into a flag
and leaves its contexts normally) — it unmounts (retrying while a benchmark that is
being killed still holds files open, then lazily), detaches the loop device and
removes the backing file and the mount point.

A `kill -9` of perflab cannot run that code. So before anything is made, a state
record (JSON: owner pid and its kernel start time, backing file, mount point, loop
device) is written in the state directory (/dev/shm/perflab-fs, or
$PERFLAB_FS_STATE_DIR), and `cleanup_stale()` — called by every command that opens
the store and before every new mount — undoes the filesystems whose owner is gone,
saying so on stderr. The records live in RAM like the filesystems: a reboot removes
both.

Everything that can be known before anything is made is checked first, with a
one-line error saying what is missing and what would work here: the size, root,
loop devices, the mkfs tool, the kernel's support for the type, free memory.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field

from perflab.core import units
from perflab.core.errors import PerflabError, UsageProblem
from perflab.execution import scratch

SHM = "/dev/shm"
TYPES = ("ext4", "xfs", "btrfs", "tmpfs")
# mkfs command (quiet, overwrite) and the Debian package that has it.
MKFS = {
    "ext4": (["mkfs.ext4", "-q", "-F"], "e2fsprogs"),
    "xfs": (["mkfs.xfs", "-f", "-q"], "xfsprogs"),
    "btrfs": (["mkfs.btrfs", "-f", "-q"], "btrfs-progs"),
}
# The smallest filesystem each mkfs makes (xfsprogs 6: "must be larger than 300MB";
# btrfs-progs 6: 114294784 bytes per device; ext4 with a journal: about 2 MiB).
MINIMUM = {"ext4": 4 << 20, "xfs": 300 << 20, "btrfs": 110 << 20, "tmpfs": 1 << 20}
SBIN = ("/usr/local/sbin", "/usr/sbin", "/sbin")
UNMOUNT_PATIENCE = 10.0   # seconds to retry an unmount a dying benchmark still holds


def filesystem_of(path: str, mounts: str | None = None) -> tuple[str, str, str]:
    """(type, mount point, mount options) of the mount holding `path`, from /proc/self/mounts, or
    from `mounts`, another machine's (an SSH machine's, read by its agent)."""
    best = ("n/a", "", "")
    real = os.path.realpath(path) if mounts is None else path
    try:
        with (nullcontext(mounts.splitlines()) if mounts is not None else open("/proc/self/mounts")) as f:
            for line in f:
                parts = line.split()
                if len(parts) < 4:
                    continue
                mount = parts[1].replace("\\040", " ")
                if (real == mount or real.startswith(mount.rstrip("/") + "/")) and len(mount) >= len(best[1]):
                    best = (parts[2], mount, parts[3])
    except OSError:
        pass
    return best



@dataclass
class Workdir:
    """A run's work directory and the facts to record about it (type, mount, backing ...).

    Defined here, below perflab.execution.workdir, because both yield one: workdir()
    for any directory, mounted() for a fresh filesystem; imports go workdir -> filesystem.
    """

    path: str
    facts: dict = field(default_factory=dict)


def state_dir() -> str:
    return os.environ.get("PERFLAB_FS_STATE_DIR") or os.path.join(SHM, "perflab-fs")


# -- sizes ------------------------------------------------------------------------

def parse_size(text, key: str = "fs_size") -> int:
    """'512M', '4G', '1.5G', '1048576' -> bytes; ValueError unless positive."""
    value = units.parse_size(text)
    if value <= 0:
        raise ValueError("must be a positive size, e.g. 512M or 4G")
    return value


human = units.human


def check_minimum(fstype: str | None, nbytes: int) -> None:
    """ValueError when fs_size is below what mkfs of that type makes."""
    if fstype in MINIMUM and nbytes < MINIMUM[fstype]:
        raise ValueError(f"{human(nbytes)} is too small for {fstype} (at least {human(MINIMUM[fstype])})")


# -- what this machine can do --------------------------------------------------------

def _which(tool: str) -> str | None:
    path = os.environ.get("PATH", "")
    return shutil.which(tool, path=os.pathsep.join([path, *SBIN]))


def _kernel_types() -> set[str]:
    try:
        with open("/proc/filesystems") as f:
            return {line.split()[-1] for line in f if line.strip()}
    except OSError:
        return set()


def _modprobe(module: str) -> None:
    import subprocess

    tool = _which("modprobe")
    if tool:
        subprocess.run([tool, "-q", module], capture_output=True, timeout=30)


def _loop_support() -> bool:
    if os.path.exists("/dev/loop-control"):
        return True
    _modprobe("loop")
    return os.path.exists("/dev/loop-control")


def _mem_available() -> int | None:
    # core.environment loads here, on first use: workdir imports this module with every family.
    from perflab.core import environment

    return environment.memory_available()


def missing(fstype: str) -> str | None:
    """Why a filesystem of this type cannot be made here (None: it can). Tries modprobe."""
    if fstype not in TYPES:
        return f"perflab makes {', '.join(TYPES)}"
    if os.geteuid() != 0:
        return f"making and mounting a filesystem needs root (perflab runs as uid {os.geteuid()})"
    for tool in ("mount", "umount"):
        if _which(tool) is None:
            return f"the {tool} command is not installed (Debian package mount)"
    if fstype != "tmpfs":
        if _which("losetup") is None:
            return "the losetup command is not installed (Debian package mount)"
        command, package = MKFS[fstype]
        if _which(command[0]) is None:
            return f"{command[0]} is not installed (Debian package {package})"
        if not _loop_support():
            return "this machine has no loop devices (/dev/loop-control is missing and modprobe loop did not add it)"
    if fstype not in _kernel_types():
        _modprobe(fstype)
        if fstype not in _kernel_types():
            return f"the kernel cannot mount {fstype} (not in /proc/filesystems, and modprobe {fstype} did not add it)"
    return None


def usable() -> list[str]:
    """The types this machine can make now (for error messages)."""
    return [t for t in TYPES if missing(t) is None]


def check(fstype: str, size) -> int:
    """Everything that can be refused before anything is made; the size in bytes."""
    try:
        nbytes = parse_size(size)
        check_minimum(fstype, nbytes)
    except ValueError as e:
        raise UsageProblem(f"parameter fs_size = {size!r}: {e}") from None
    why = missing(fstype)
    if why is not None:
        others = [t for t in usable() if t != fstype] if os.geteuid() == 0 else []
        alternatives = (f"fs: {'|'.join(others)} would work here, or dir: PATH" if others
                        else "use dir: PATH (an existing directory) instead")
        raise UsageProblem(f"parameter fs = {fstype}: {why}; {alternatives}")
    available = _mem_available()
    try:
        st = os.statvfs(SHM)
        shm_free = st.f_bavail * st.f_frsize
    except OSError:
        shm_free = None
    if fstype != "tmpfs" and shm_free is None:
        raise UsageProblem(f"parameter fs = {fstype}: {SHM} (the RAM disk for the backing file) is missing; "
                           "use fs: tmpfs or dir: PATH")
    limits = [(available, "free memory (MemAvailable)")]
    if fstype != "tmpfs":
        limits.append((shm_free, f"free space in {SHM}"))
    for limit, what in limits:
        if limit is not None and nbytes > limit:
            raise UsageProblem(f"parameter fs_size = {size!r} ({human(nbytes)}) is larger than the {what}, "
                               f"{human(limit)}: the filesystem lives in RAM; choose a smaller fs_size")
    return nbytes


# -- state records ------------------------------------------------------------------

def _start_time(pid: int) -> str | None:
    from perflab.store.rows import process_start_time

    return process_start_time(pid)


def _write_record(path: str, record: dict) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(record, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _alive(record: dict) -> bool:
    pid = record.get("pid")
    if not isinstance(pid, int):
        return False
    started = _start_time(pid)
    return started is not None and started == record.get("start_time")


# -- making and undoing ----------------------------------------------------------------

def _run(argv: list[str], what: str, timeout: float = 300) -> str:
    """A set-up command; PerflabError with its last line of error output when it fails."""
    import subprocess

    argv = [_which(argv[0]) or argv[0], *argv[1:]]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise PerflabError(f"{what}: {argv[0]} did not finish in {timeout:g} s") from None
    if proc.returncode != 0:
        lines = [line.strip() for line in (proc.stderr or proc.stdout).splitlines() if line.strip()]
        detail = lines[-1] if lines else f"exit status {proc.returncode}"
        raise PerflabError(f"{what}: {' '.join(argv[:3])} failed: {detail}")
    return proc.stdout


def _mounts() -> dict[str, tuple[str, str, str]]:
    """mount point -> (source, type, options), from /proc/self/mounts (the last mount on a point wins)."""
    out = {}
    try:
        with open("/proc/self/mounts") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 4:
                    out[parts[1].replace("\\040", " ")] = (parts[0], parts[2], parts[3])
    except OSError:
        pass
    return out


def _loops_on(backing: str) -> list[str]:
    """Loop devices attached to `backing` (also after the file was removed)."""
    found = []
    try:
        names = os.listdir("/sys/block")
    except OSError:
        return found
    for name in names:
        if not name.startswith("loop"):
            continue
        try:
            with open(f"/sys/block/{name}/loop/backing_file") as f:
                attached = f.read().strip()
        except OSError:
            continue
        if attached.removesuffix(" (deleted)") == backing:
            found.append(f"/dev/{name}")
    return found


def _unmount(mount: str, patience: float = UNMOUNT_PATIENCE) -> None:
    """Unmount, retrying while the mount is busy (a benchmark being killed); lazily at last."""
    import subprocess

    umount = _which("umount") or "umount"
    deadline = time.monotonic() + patience
    while os.path.realpath(mount) in _mounts() or mount in _mounts():
        proc = subprocess.run([umount, mount], capture_output=True, timeout=60)
        if proc.returncode == 0:
            continue
        if time.monotonic() > deadline:
            subprocess.run([umount, "-l", mount], capture_output=True, timeout=60)
            return
        time.sleep(0.05)


def undo(record: dict, patience: float = UNMOUNT_PATIENCE) -> None:
    """Unmount, detach, remove: whatever of the record exists. Never raises for what is already gone."""
    import subprocess

    mount, backing = record.get("mount"), record.get("backing")
    if mount:
        _unmount(mount, patience)
    if backing:
        loops = _loops_on(backing)   # by the sysfs backing file: also a loop attached before the record said so
        losetup = _which("losetup") or "losetup"
        for loop in sorted(loops):
            # A loop still busy (a lazy unmount) is set to detach itself when released.
            subprocess.run([losetup, "-d", loop], capture_output=True, timeout=60)
        try:
            os.unlink(backing)
        except FileNotFoundError:
            pass
    if mount:
        try:
            os.rmdir(mount)
        except FileNotFoundError:
            pass
        except OSError:
            pass   # still mounted lazily, or not empty: left for the kernel / the user to see
    path = record.get("record")
    if path:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def cleanup_stale(echo=None) -> list[str]:
    """Undo the filesystems left by runs that were killed (owner pid gone), one stderr line each;
    then remove their temporary directories (perflab.execution.scratch)."""
    said = _undo_stale(echo)
    scratch.reap()   # after the mounts: a directory is never removed through a mount
    return said


def _undo_stale(echo) -> list[str]:
    directory = state_dir()
    try:
        names = [n for n in os.listdir(directory) if n.endswith(".json")]
    except OSError:
        return []
    if not names or os.geteuid() != 0:
        return []
    import fcntl

    said = []
    with open(os.path.join(directory, ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)   # two commands starting at once: one cleans, the other finds nothing
        for name in sorted(names):
            path = os.path.join(directory, name)
            try:
                with open(path) as f:
                    record = json.load(f)
            except FileNotFoundError:
                continue
            except (OSError, ValueError):
                record = {}
            if not isinstance(record, dict):
                record = {}
            if record and _alive(record):
                continue
            record["record"] = path
            undo(record)
            where = record.get("mount") or "(unknown mount point)"
            device = record.get("loop") or ("tmpfs" if record.get("fs") == "tmpfs" else "no loop device")
            line = f"perflab: removed a stale test filesystem left by a killed run: {where} ({device})"
            said.append(line)
            if echo is None:
                print(line, file=sys.stderr)
            else:
                echo(line)
    return said


def _mkfs_version(fstype: str) -> str:
    import subprocess

    if fstype == "tmpfs":
        return "none (tmpfs is made by the kernel)"
    tool = _which(MKFS[fstype][0][0])
    proc = subprocess.run([tool, "-V"], capture_output=True, text=True, timeout=30)
    lines = [line.strip() for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    return lines[0] if lines else "unknown"


@contextmanager
def mounted(fstype: str, size, prefix: str) -> Iterator:
    """A work directory on a fresh filesystem of `fstype` and `size`; everything undone on the way out."""
    import secrets
    import tempfile

    from perflab.execution import interrupt

    nbytes = check(fstype, size)
    cleanup_stale()
    directory = state_dir()
    ident = secrets.token_hex(4)
    record = {
        "pid": os.getpid(), "start_time": _start_time(os.getpid()), "fs": fstype, "fs_size": str(size),
        # Not in the scratch directory: that is removed when its owner dies, never through a mount.
        "mount": os.path.join(scratch.system_tmp(), f"perflab-fs-{ident}"),
        "backing": None if fstype == "tmpfs" else os.path.join(SHM, f"perflab-fs-{ident}"),
        "loop": None, "created": time.time(),
    }
    path = os.path.join(directory, f"{ident}.json")
    # The record exists before anything it names: a kill -9 at any point leaves nothing unlisted.
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        _write_record(path, record)
    except OSError as e:
        raise PerflabError(f"fs = {fstype}: cannot write the state record in {directory}: {e.strerror}") from None
    record["record"] = path
    mount = record["mount"]
    what = f"fs = {fstype}"
    try:
        os.mkdir(mount, 0o755)
        if fstype == "tmpfs":
            _run(["mount", "-t", "tmpfs", "-o", f"size={nbytes},mode=0755", f"perflab-fs-{ident}", mount], what)
            backing = f"tmpfs of {human(nbytes)} (ram)"
        else:
            fd = os.open(record["backing"], os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            try:
                os.ftruncate(fd, nbytes)   # sparse: RAM is used only as the filesystem fills
            finally:
                os.close(fd)
            loop = _run(["losetup", "--find", "--show", record["backing"]], what, timeout=60).strip()
            record["loop"] = loop
            _write_record(path, {k: v for k, v in record.items() if k != "record"})
            interrupt.check()
            what = f"fs = {fstype} ({loop} on {record['backing']})"
            command, _package = MKFS[fstype]
            _run([*command, loop], what)
            interrupt.check()
            _run(["mount", loop, mount], what)
            backing = f"loop device {loop} on {record['backing']} (ram)"
        interrupt.check()
        source, mounted_type, options = _mounts().get(mount, ("", fstype, ""))
        workdir = tempfile.mkdtemp(prefix=f"perflab-{prefix}-", dir=mount)
        yield Workdir(workdir, {
            "workdir": mount, "workdir_fs": mounted_type, "workdir_mount": mount, "fs_size": str(size),
            "workdir_mount_options": options, "workdir_backing": backing, "mkfs_version": _mkfs_version(fstype),
        })
    finally:
        undo(record)

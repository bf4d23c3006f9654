"""The run's directory of a job in a VM guest: a virtio disk with the job's `fs:`, or the guest's /tmp.

Families that work in a directory (fio, aim7, news) enter `workdir(params, prefix)`
from here instead of `execution.workdir.workdir`: for a host job it is that very
function; while a guest job's session is made (`collecting()`, entered by
the Qemu target's preparing: execution.targets.qemu) it makes, on the host and before anything boots:

- `fs: ext4|xfs|btrfs`: a sparse raw image in /dev/shm of `fs_size`, formatted by the
  host's mkfs (the guest has only busybox), attached to the guest as a virtio disk and
  mounted by the guest's agent at the work directory's path;
- `fs: tmpfs`: a tmpfs of `fs_size` mounted there by the agent;
- neither: a directory in the guest's own /tmp (a tmpfs in the guest's memory).

The work directory's path is the same on the host and in the guest: a fresh directory
under the host's /tmp, which the guest shadows with its own tmpfs. What a session
writes there on the host before the run (news writes its feed) is copied into the
guest's directory after the boot (execution.targets.qemu), through the initramfs. `dir:` names a
host directory, which a guest cannot write: refused in one line.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from perflab.core.errors import UsageProblem
from perflab.execution import filesystem
from perflab.execution.filesystem import Workdir

SHM = filesystem.SHM
IMAGE_PREFIX = "perflab-vm-disk-"
STAGE_LIMIT = 64 << 20      # bytes a session may write before the run (they travel in the initramfs)
GUEST_TMP = "/tmp"


@dataclass
class Disk:
    """One work directory of a guest job: where it is mounted and what backs it."""

    path: str                 # the work directory (same path on the host, where it is staged, and in the guest)
    mount: str                # where the guest mounts the file system (path's parent), or "" for none
    fstype: str | None        # ext4, xfs, btrfs, tmpfs or None (a directory in the guest's /tmp)
    size: int = 0
    image: str | None = None  # the raw image in /dev/shm (a block file system)

    def staged(self) -> dict[str, bytes]:
        """What the session wrote into the directory on the host: path -> content."""
        out: dict[str, bytes] = {}
        total = 0
        for root, _dirs, names in os.walk(self.path):
            for name in names:
                host = os.path.join(root, name)
                if os.path.isfile(host) and not os.path.islink(host):
                    total += os.path.getsize(host)
                    if total > STAGE_LIMIT:
                        raise UsageProblem(f"the run's files in {self.path} exceed {STAGE_LIMIT >> 20} MiB: "
                                           "too much to carry into the guest's initramfs")
                    out[host] = Path(host).read_bytes()
        return out


_DISKS: ContextVar[list[Disk] | None] = ContextVar("perflab_vm_disks", default=None)


@contextlib.contextmanager
def collecting() -> Iterator[list[Disk]]:
    """While a guest job's session is made: work directories become guest disks, listed here."""
    _remove_stale()
    token = _DISKS.set([])
    try:
        yield _DISKS.get()
    finally:
        _DISKS.reset(token)


def pending() -> list[Disk] | None:
    return _DISKS.get()


@contextlib.contextmanager
def workdir(params, prefix: str) -> Iterator[Workdir]:
    """The run's directory: the host's (execution.workdir) or, for a guest job, the guest's."""
    disks = _DISKS.get()
    if disks is None:
        # Here, not at the top: execution.workdir brings pydantic, which a guest started ahead
        # (`run cmd --kernel`) must not wait for (docs/vm.md, "A command's seconds").
        from perflab.execution import workdir as host_workdir

        with host_workdir.workdir(params, prefix) as wd:
            yield wd
        return
    if params.dir is not None:
        raise UsageProblem(f"parameter dir = {params.dir!r}: a job in a VM guest cannot work in a host directory; "
                           "use fs: ext4|xfs|btrfs|tmpfs (a disk of the guest) or neither (the guest's /tmp)")
    mount = tempfile.mkdtemp(prefix=f"perflab-vm-{prefix}-", dir=GUEST_TMP)
    disk = Disk(os.path.join(mount, "work"), mount, params.fs)
    os.mkdir(disk.path)
    try:
        facts = _make(disk, params)
        disks.append(disk)
        yield Workdir(disk.path, facts)
    finally:
        if disk.image:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(disk.image)
        shutil.rmtree(mount, ignore_errors=True)


def _make(disk: Disk, params) -> dict:
    """Make the disk's backing (an image formatted on the host); the facts the run records."""
    if disk.fstype is None:
        return {"workdir": GUEST_TMP, "workdir_fs": "tmpfs", "workdir_mount": GUEST_TMP,
                "workdir_backing": "the guest's /tmp (tmpfs in the guest's memory)"}
    try:
        disk.size = filesystem.parse_size(params.fs_size)
        filesystem.check_minimum(disk.fstype, disk.size)
    except ValueError as e:
        raise UsageProblem(f"parameter fs_size = {params.fs_size!r}: {e}") from None
    facts = {"workdir": disk.mount, "workdir_fs": disk.fstype, "workdir_mount": disk.mount,
             "fs_size": str(params.fs_size)}
    if disk.fstype == "tmpfs":
        return {**facts, "workdir_backing": f"tmpfs of {filesystem.human(disk.size)} in the guest's memory",
                "mkfs_version": "none (tmpfs is made by the kernel)"}
    command, package = filesystem.MKFS[disk.fstype]
    tool = filesystem._which(command[0])
    if tool is None:
        raise UsageProblem(f"parameter fs = {disk.fstype}: {command[0]} is not installed (Debian package {package}); "
                           "the guest's disk is formatted on the host")
    free = shutil.disk_usage(SHM).free
    if disk.size > free:
        raise UsageProblem(f"parameter fs_size = {params.fs_size!r}: larger than the free space in {SHM} "
                           f"({filesystem.human(free)}), where the guest's disk image lives")
    disk.image = os.path.join(SHM, f"{IMAGE_PREFIX}{os.getpid()}-{os.path.basename(disk.mount)}.img")
    fd = os.open(disk.image, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    try:
        os.ftruncate(fd, disk.size)       # sparse: RAM is used only as the file system fills
    finally:
        os.close(fd)
    done = subprocess.run([tool, *command[1:], disk.image], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        why = (done.stderr or done.stdout).strip().splitlines()
        raise UsageProblem(f"fs = {disk.fstype}: {command[0]} failed on the guest's disk image: "
                           f"{why[-1] if why else f'exit {done.returncode}'}")
    return {**facts, "workdir_backing": f"virtio disk on a raw image in {SHM} (ram), formatted on the host",
            "mkfs_version": filesystem._mkfs_version(disk.fstype)}


def free_bytes(path: str) -> int | None:
    """Free space for the run's files in `path`: the host's statvfs, or for a guest's disk an
    estimate made before it exists (its size less what the file system keeps: ~15% at most
    for a small ext4 with its journal); None for the guest's /tmp (its memory decides)."""
    for d in _DISKS.get() or []:
        if path == d.path or path.startswith(d.path + "/"):
            return None if d.fstype is None else (d.size if d.fstype == "tmpfs" else int(d.size * 0.85))
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def setup_lines(disks: list[Disk]) -> list[str]:
    """The agent's lines that mount the disks (vda, vdb ... in the order of `images`)."""
    lines, letter = [], ord("a")
    for disk in disks:
        if disk.image:
            lines.append(f"mount /dev/vd{chr(letter)} {disk.mount} {disk.fstype} rw")
            letter += 1
        elif disk.fstype == "tmpfs":
            lines.append(f"mount tmpfs {disk.mount} tmpfs rw size={disk.size}")
    return lines


def _remove_stale() -> None:
    """Images left in /dev/shm by a perflab that was killed (kill -9) before it could remove them."""
    with contextlib.suppress(OSError):
        for name in os.listdir(SHM):
            if name.startswith(IMAGE_PREFIX):
                pid = name[len(IMAGE_PREFIX):].split("-", 1)[0]
                if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
                    with contextlib.suppress(OSError):
                        os.unlink(os.path.join(SHM, name))

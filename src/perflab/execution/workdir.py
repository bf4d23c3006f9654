"""The directory a run works in: a temporary one, an existing one (`dir`), or a fresh
filesystem of the job's choosing (`fs`, LKP's `fs:` key) on a loop device backed by a
file in /dev/shm, made for the run and removed afterwards.

Families that work in a directory add WorkdirParams to their parameter model and
enter `workdir(params, prefix)` in their session; it yields the directory and the
facts to record (filesystem type, size, mount options, backing).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from perflab.core.errors import UsageProblem
from perflab.core.process import in_run_directory
from perflab.execution import scratch
from perflab.execution.filesystem import Workdir, check_minimum, filesystem_of, mounted, parse_size

__all__ = ["FILESYSTEMS", "Workdir", "WorkdirParams", "filesystem_of", "workdir"]

FILESYSTEMS = ("ext4", "xfs", "btrfs", "tmpfs")


class WorkdirParams(BaseModel):
    """Mixin: where the run's files go."""

    fs: Literal["ext4", "xfs", "btrfs", "tmpfs"] | None = Field(
        None, description="make a fresh filesystem of this type for the run (on a loop device in /dev/shm)")
    fs_size: str = Field("1G", description="size of that filesystem (e.g. 512M, 4G)")
    dir: str | None = Field(None, description="an existing directory to work in instead (default: $TMPDIR)")

    @field_validator("fs_size", mode="before")
    @classmethod
    def _size(cls, v, info):
        # Only a given fs_size is validated (not the default): without fs it would be silently ignored.
        if "fs" in info.data and info.data["fs"] is None:
            raise ValueError("fs_size sizes the filesystem that fs makes: give fs too (e.g. fs: ext4)")
        check_minimum(info.data.get("fs"), parse_size(v))   # fs is validated first (declared before)
        return str(v)

    @field_validator("dir")
    @classmethod
    def _writable(cls, v):
        # An absolute dir is probed now, so a bad one is refused naming the parameter before anything
        # runs (os.access says yes to root for /proc and /sys; creating a directory tells the truth).
        # A relative one lives in the run's directory (a worktree) and is checked when the run starts.
        if v is not None and os.path.isabs(v):
            _probe(v)
        return v


def _probe(directory: str) -> None:
    if not os.path.isdir(directory):
        raise ValueError("no such directory")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".perflab-probe-", dir=directory))
    except OSError as e:
        raise ValueError(f"cannot make a directory there ({e.strerror}): give a writable dir") from None


@contextmanager
def workdir(params: WorkdirParams, prefix: str) -> Iterator[Workdir]:
    """A fresh directory for one run, removed afterwards (also on failure or interruption)."""
    if params.fs is not None and params.dir is not None:
        raise UsageProblem("parameters fs and dir: give one of them (fs makes a new filesystem, dir uses one)")
    if params.fs is not None:
        with mounted(params.fs, params.fs_size, prefix) as fresh:
            yield fresh
        return
    # By default in this process's scratch directory, which the next command reaps after a kill -9.
    parent = params.dir or scratch.system_tmp()
    where = in_run_directory(params.dir) if params.dir else scratch.directory()
    if not os.path.isdir(where):
        raise UsageProblem(f"parameter dir = {parent!r}: no such directory")
    if not os.access(where, os.W_OK | os.X_OK):
        raise UsageProblem(f"parameter dir = {parent!r}: not writable")
    try:
        path = tempfile.mkdtemp(prefix=f"perflab-{prefix}-", dir=where)
    except OSError as e:
        raise UsageProblem(f"parameter dir = {parent!r}: cannot make the run's directory there: {e.strerror}") from None
    if params.dir:
        scratch.register_outside(path)
    fstype, mount, options = filesystem_of(path)
    try:
        yield Workdir(path, {"workdir": parent, "workdir_fs": fstype, "workdir_mount": mount,
                             "workdir_mount_options": options, "workdir_backing": "existing directory"})
    finally:
        shutil.rmtree(path, ignore_errors=True)

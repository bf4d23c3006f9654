"""A bisection's worktrees and the Measurer it measures with.

The worktrees live under one temporary directory (`$TMPDIR/perflab-bisect-ID-XXXX/`)
with an owner file naming the perflab process that made them, so that the next
bisection of the repository removes what a killed one left. One is the steps'
(where `git bisect` checks out each commit); each end gets its own at its first
run and keeps its build for the whole bisection.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from perflab.automate.bisect.record import BisectError, Record
from perflab.automate.measurer import Here, KeptTrees, KernelDirs, KernelSpec, MeasurerSpec, OnBox
from perflab.core.git import Worktrees, git
from perflab.core.git import prune_stale as _prune_stale

OWNER_FILE = "perflab-bisect.owner"
# A kernel bisection's builds, beside its worktrees: one source worktree checked out at each
# commit built, kbuild's output directory (O=) kept between builds, and each commit's image.
KERNEL_SRC, KERNEL_OUT, KERNEL_IMAGES = "kernel-src", "kernel-build", "kernel-images"
BASE_PREFIX = "perflab-bisect-"


def _alive(owner: dict) -> bool:
    """Whether the perflab process that wrote this owner file still runs (not a reused pid)."""
    from perflab.store.db import process_start_time

    return process_start_time(int(owner["pid"])) == owner.get("start")


def prune_stale(repo: Path) -> list[str]:
    """Remove the worktrees a killed bisection left in `repo`; the paths removed.

    A kernel bisection's directory also holds its build output and images: removed with it."""
    removed = _prune_stale(repo, BASE_PREFIX, OWNER_FILE, _alive)
    for path in removed:
        base = Path(path).parent
        if base.name.startswith(BASE_PREFIX) and (base / KERNEL_OUT).exists():
            shutil.rmtree(base, ignore_errors=True)
    return removed


def new_worktrees(repo: Path, bisect_id: str) -> Worktrees:
    from perflab.store.db import process_start_time

    return Worktrees(repo, f"{BASE_PREFIX}{bisect_id}-", OWNER_FILE,
                     {"pid": os.getpid(), "start": process_start_time(os.getpid()), "repo": str(repo)})


class SlotTrees(KeptTrees):
    """Trees for a LocalMeasurer: the bisection's worktrees by slot, each built once per commit.

    A slot's worktree is never moved here: an end's stays at its commit, and `git bisect` moves the
    "step" one; a slot found elsewhere than the commit asked for is a bug, said as such."""

    def move(self, path: Path, commit: str) -> bool:
        head = git(path, "rev-parse", "HEAD").stdout.strip()
        if head != commit:
            raise BisectError(f"internal: worktree {path} is at {head[:12]}, expected {commit[:12]}")
        return False


def measurer_spec(rec: Record, worktrees: Worktrees) -> MeasurerSpec:
    """What a record measures with (measurer.measurer_for makes it): its lab box when it names a
    broker, else here in `worktrees`.

    A kernel bisection (`rec.kernel`) builds each commit's kernel out of tree in one build
    directory kept between steps, beside the worktrees, and runs the job in a guest booted from
    it; the slots' worktrees then only record the commit measured."""
    kernel = KernelSpec(**rec.kernel) if rec.kernel else None
    if rec.broker:
        where = OnBox(rec.broker, rec.box, rec.source_url or rec.repo)
    else:
        base = worktrees.base
        # Removed with the worktrees' base directory (Worktrees.close), not by the Measurer.
        dirs = KernelDirs(Path(rec.repo), base / KERNEL_SRC, base / KERNEL_OUT, base / KERNEL_IMAGES)
        # A kernel's worktrees only record the commit: no file of the tree is written in them.
        where = Here(lambda build, timeout: SlotTrees(worktrees, build, timeout, files=kernel is None), box=rec.box,
                     kernel_dirs=dirs if kernel else None)
    return MeasurerSpec(where, rec.build, rec.build_timeout, kernel)

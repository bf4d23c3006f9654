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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from perflab.automate.bisect.record import BisectError, Record
from perflab.automate.measurer import BoxMeasurer, KernelBuilds, KernelSpec, LocalMeasurer, Measurer, build
from perflab.core.git import BuildFailed, Worktrees, git
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


class SlotTrees:
    """Trees for a LocalMeasurer: the bisection's worktrees by slot, each built once per commit."""

    def __init__(self, worktrees: Worktrees, build_cmd: str, build_timeout: float | None):
        self.worktrees, self.build_cmd, self.build_timeout = worktrees, build_cmd, build_timeout
        self.built: dict[str, str] = {}   # slot -> commit built there

    @contextmanager
    def checkout(self, commit: str, slot: str) -> Iterator[Path]:
        if slot not in self.worktrees.paths:
            self.worktrees.add(slot, commit)   # an end's, at its first run ("step" is made by the bisection)
        path = self.worktrees.paths[slot]
        head = git(path, "rev-parse", "HEAD").stdout.strip()
        if head != commit:
            raise BisectError(f"internal: worktree {path} is at {head[:12]}, expected {commit[:12]}")
        if self.built.get(slot) != commit:
            why = build(path, self.build_cmd, self.build_timeout)
            if why is not None:
                raise BuildFailed(f"--build failed: {why}", why)
            self.built[slot] = commit
        yield path


def measurer_for(store, rec: Record, worktrees: Worktrees, say: Callable[[str], None]) -> Measurer:
    """The Measurer a record asks for: on its lab box when it names a broker, else here in `worktrees`.

    A kernel bisection (`rec.kernel`) builds each commit's kernel out of tree in one build
    directory kept between steps (KernelBuilds, beside the worktrees) and runs the job in a
    guest booted from it; the slots' worktrees then only record the commit measured."""
    kernel = KernelSpec(**rec.kernel) if rec.kernel else None
    if rec.broker:
        return BoxMeasurer(store, broker=rec.broker, box=rec.box, source_url=rec.source_url or rec.repo,
                           build_cmd=rec.build, build_timeout=rec.build_timeout, say=say, kernel=kernel)
    if kernel is None:
        return LocalMeasurer(store, SlotTrees(worktrees, rec.build, rec.build_timeout), box=rec.box)
    base = worktrees.base
    builds = KernelBuilds(Path(rec.repo), base / KERNEL_SRC, base / KERNEL_OUT, base / KERNEL_IMAGES, rec.build,
                          kernel.image, rec.build_timeout)
    return LocalMeasurer(store, SlotTrees(worktrees, "", None), box=rec.box, kernel=kernel, builds=builds, say=say)

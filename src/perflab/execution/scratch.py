"""One temporary directory per perflab process, reaped by the next command if the process was killed.

A run's temporary files — fio's data files, perf's perf.data and control FIFOs, LMbench's
and valgrind's scratch files — go under `$TMPDIR/perflab-run-PID-START/`
(START: the process's kernel start time, so that a reused pid is not taken for its owner).
The process removes it at its exit; a `kill -9` cannot, so `reap()` — called with the
cleanup of stale test filesystems by every command that opens the store — removes the
directories whose owner is gone, as it undoes their mounts. A run's directory made
elsewhere (a job's `dir`) is listed in the owner's directory (file `outside`) and removed
with it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import tempfile

from perflab.store.rows import process_start_time

PREFIX = "perflab-run-"
_NAME = re.compile(rf"{PREFIX}(\d+)-(\d+)")
_LEGACY_PERF = re.compile(r"perflab-perf-(\d+)-")    # perf's directories before this one existed
_OUTSIDE = "outside"

_mine: tuple[int, str] | None = None


def system_tmp() -> str:
    """$TMPDIR (or /tmp): where the per-process directories live; the fact runs record."""
    return tempfile.gettempdir()


def remove_orphans(prefix: str) -> None:
    """Directories $TMPDIR/PREFIX PID-... whose perflab process is gone (killed before it could
    remove them: kill -9): a guest's boot directory, an SSH run's control directory."""
    top = system_tmp()
    with contextlib.suppress(OSError):
        for name in os.listdir(top):
            pid = name[len(prefix):].split("-", 1)[0] if name.startswith(prefix) else ""
            if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
                shutil.rmtree(os.path.join(top, name), ignore_errors=True)


def directory() -> str:
    """This process's directory, made at the first call (again if it was removed meanwhile)."""
    global _mine
    if _mine is not None and _mine[0] == os.getpid() and os.path.isdir(_mine[1]):
        return _mine[1]
    path = os.path.join(system_tmp(), f"{PREFIX}{os.getpid()}-{process_start_time(os.getpid()) or 0}")
    os.makedirs(path, mode=0o700, exist_ok=True)
    if _mine is None or _mine[0] != os.getpid():
        atexit.register(_remove, os.getpid(), path)
    _mine = (os.getpid(), path)
    return path


def register_outside(path: str) -> None:
    """A run's directory outside ours (a job's `dir`): removed with ours if this process is killed."""
    with open(os.path.join(directory(), _OUTSIDE), "a") as f:
        f.write(path + "\n")


def _remove(owner: int, path: str) -> None:
    if os.getpid() == owner:   # not in a forked child, which inherits the atexit hook
        shutil.rmtree(path, ignore_errors=True)


def _dead(pid: str, start: str | None) -> bool:
    started = process_start_time(int(pid))
    return started is None or (start is not None and started != start)


def _holds_mount(path: str) -> bool:
    """A test filesystem still mounted inside (its undo comes first): never remove through a mount."""
    prefix = os.path.realpath(path).rstrip("/") + "/"
    try:
        with open("/proc/self/mounts") as f:
            return any(line.split()[1].replace("\\040", " ").startswith(prefix) for line in f if len(line.split()) > 1)
    except OSError:
        return False


def _remove_dead(path: str) -> None:
    try:
        with open(os.path.join(path, _OUTSIDE)) as f:
            outside = [line.strip() for line in f if line.strip()]
    except OSError:
        outside = []
    for other in outside:
        if os.path.basename(other).startswith("perflab-") and not _holds_mount(other):
            shutil.rmtree(other, ignore_errors=True)
    shutil.rmtree(path, ignore_errors=True)


def reap() -> list[str]:
    """Remove the directories of perflab processes that are gone; the paths removed."""
    root = system_tmp()
    try:
        names = os.listdir(root)
    except OSError:
        return []
    removed = []
    for name in names:
        ours, legacy = _NAME.fullmatch(name), _LEGACY_PERF.match(name)
        if not (ours or legacy):
            continue
        pid, start = (ours.group(1), ours.group(2)) if ours else (legacy.group(1), None)
        path = os.path.join(root, name)
        if int(pid) == os.getpid() or not _dead(pid, start) or _holds_mount(path):
            continue
        try:
            if os.stat(path).st_uid != os.geteuid():   # another user's: theirs to reap
                continue
        except OSError:
            continue
        _remove_dead(path)
        removed.append(path)
    return removed

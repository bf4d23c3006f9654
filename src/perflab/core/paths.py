"""Where perflab keeps what it can make again: $XDG_CACHE_HOME/perflab (default ~/.cache/perflab).

Each cache is a directory under it, named by its owner: cbuild/ (compiled programs),
vm/ (initramfs archives), kernels/ (Debian kernel packages), vmlinux/ (decompressed kernels).

A file of a cache is written whole: into a temporary beside it, renamed into place
(`write_whole`, or `temporary` for a file another program writes). The temporary's name
carries its writer, `.NAME.HOST.PID-START.N.tmp` (START: the process's kernel start time, so a
reused pid is not taken for it), so that the next writer of that cache removes what a
killed perflab left (`sweep`) and spares what a live one is writing. HOST, because a home
(and ~/.cache with it) is often shared over NFS: another machine's pid says nothing here, so
another host's temporary is left to the age rule as an older perflab's is.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import shutil
import time
from pathlib import Path

from perflab.core.process import process_start_time

# A temporary whose writer cannot be told (another host's, an older perflab's name: .NAME.PID.tmp,
# whose PID may be a thread's, .NAME.PID-START.N.tmp without its host, or mkstemp's .tmp-XXXX) is
# removed only when it is far older than any write of a cache takes.
STALE_SECONDS = 24 * 3600
_TEMPORARY = re.compile(r"\..+\.([A-Za-z0-9-]+)\.(\d+)-(\d+)\.\d+\.tmp")
# .NAME.PID.tmp, .NAME.PID.TID.tmp, mkstemp's .tmp-XXXX; the kernels' download directories of
# tempfile (.PACKAGE.XXXXXXXX beside the kernel, .fetch.XXXXXXXX beside its .deb)
_LEGACY = re.compile(r"\..+\.\d+\.tmp|\.tmp-.+|\.(linux-image-.+|fetch)\.[a-z0-9_]{8}")
_serial = itertools.count()
_me: tuple[int, str] | None = None


def cache_home() -> Path:
    """perflab's cache root, read from the environment at each call (tests and CI set it)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "perflab"


def _host() -> str:
    """This machine's name as a temporary's name carries it: its first label, in [A-Za-z0-9-]
    (a pid namespace of its own, a container's, usually has a hostname of its own too)."""
    return re.sub(r"[^A-Za-z0-9-]", "-", os.uname().nodename.split(".", 1)[0]) or "-"


def _writer() -> str:
    global _me
    if _me is None or _me[0] != os.getpid():      # a forked child is a writer of its own
        _me = (os.getpid(), f"{_host()}.{os.getpid()}-{process_start_time(os.getpid()) or 0}")
    return _me[1]


def temporary(target: Path) -> Path:
    """A name beside `target` to write it under before the rename, this process's (and unique
    within it: two threads may write the same target). Sweeps the directory's dead temporaries."""
    sweep(target.parent)
    for _ in range(100):
        path = target.with_name(f".{target.name}.{_writer()}.{next(_serial)}.tmp")
        # A name already taken (the name is foreseeable: planted, or a reused pid-and-start's
        # after a reboot) is never written through; the next one is taken.
        if not os.path.lexists(path):
            return path
    raise FileExistsError(f"{target.parent}: 100 temporaries of {target.name} of this process already exist")


@contextlib.contextmanager
def temporary_directory(target: Path):
    """A directory beside `target`, named as `temporary` names a file, for the block's time (a
    download unpacked there, then renamed into place): removed at its end, or by the next sweep
    of the directory if this process is killed meanwhile."""
    path = temporary(target)
    path.mkdir()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def write_whole(target: Path, data: bytes | str) -> None:
    """`target` holding `data`, whole or not at all (another perflab may write it meanwhile)."""
    tmp = temporary(target)
    # O_EXCL|O_NOFOLLOW: created here, never a symlink or file that appeared at its name since.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
    try:
        with os.fdopen(fd, "w" if isinstance(data, str) else "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _writer_gone(pid: str, start: str) -> bool:
    started = process_start_time(int(pid))
    return started is None or (start != "0" and started != start)


def sweep(directory: Path) -> list[Path]:
    """Remove the temporaries in `directory` whose writer is gone (a perflab killed between
    its write and its rename); those of live writers, this process's included, stay."""
    removed = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        name = entry.name
        if not name.startswith("."):
            continue
        ours, legacy = _TEMPORARY.fullmatch(name), _LEGACY.fullmatch(name)
        if ours and ours.group(1) == _host():
            dead = int(ours.group(2)) != os.getpid() and _writer_gone(ours.group(2), ours.group(3))
        elif ours or legacy:
            try:
                dead = now - entry.stat(follow_symlinks=False).st_mtime > STALE_SECONDS
            except OSError:
                continue
        else:
            continue
        if not dead:
            continue
        path = Path(entry.path)
        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(path)
            else:
                path.unlink()
        except FileNotFoundError:       # another sweeper's, meanwhile
            continue
        except OSError:
            continue                    # not ours to remove (another user's cache entry)
        removed.append(path)
    return removed

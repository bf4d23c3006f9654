"""Writing a file the user named with `-o`/`--out`/`--plot`: write through to what they named.

A regular file (or a name that does not exist yet) is replaced atomically: the
whole content goes to a temporary file beside it, which is renamed over it, so a
failure leaves the old file (or nothing). A symlink is followed: the file it
points at is written, the link stays. A character device or a FIFO is opened and
written like a shell's `>` would (`-o /dev/stdout`, `-o /dev/null`, a pipe);
nothing is ever renamed over a device, a FIFO or a socket. A directory, a block
device or a socket is refused with one line naming the option and the path.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator

from perflab.core.errors import PerflabError
from perflab.core.text import printable


def _name(path: str, label: str) -> str:
    shown = printable(path, 200)
    return f"{label} {shown}" if label else shown


def _kind(real: str) -> str:
    """'missing', 'file', 'stream' (char device/FIFO: written in place) or a refusal word."""
    try:
        mode = os.stat(real).st_mode
    except FileNotFoundError:
        return "missing"
    except OSError:
        return "missing"   # unreadable metadata: the write itself will say why
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return "stream"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def check(path: str, label: str = "") -> None:
    """Fail before any work when `path` cannot be written: one line naming it."""
    real = os.path.realpath(path)
    kind = _kind(real)
    where = _name(path, label)
    if kind == "a directory":
        raise PerflabError(f"{where}: is a directory; give a file name")
    if kind not in ("missing", "file", "stream"):
        raise PerflabError(f"{where}: is {kind}; refusing to write over it")
    if kind == "stream":
        if not os.access(real, os.W_OK):
            raise PerflabError(f"{where}: cannot write (permission denied)")
        return
    directory = os.path.dirname(real)
    if not os.path.isdir(directory):
        raise PerflabError(f"{where}: directory {printable(directory, 200)} does not exist")
    if not os.access(directory, os.W_OK | os.X_OK) or (kind == "file" and not os.access(real, os.W_OK)):
        raise PerflabError(f"{where}: cannot write here (permission denied)")


@contextlib.contextmanager
def staged(path: str, label: str = "", suffix: str = "") -> Iterator[str]:
    """Yield a temporary path to fill; on success its content lands in `path` as described above.

    For tools that want a file name of their own (a plotting library's `savefig`).
    On an exception nothing of the new content reaches `path`.
    """
    check(path, label)
    real = os.path.realpath(path)
    kind = _kind(real)
    where = _name(path, label)
    # A device's directory (/dev) is not ours to litter: stage a stream's bytes in the temp dir.
    directory = None if kind == "stream" else os.path.dirname(real)
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".perflab-", suffix=suffix or ".tmp")
    except OSError as e:
        raise PerflabError(f"{where}: cannot write: {e.strerror}") from None
    os.close(fd)
    try:
        yield tmp
        if kind == "stream":
            _copy_into(tmp, real)
        else:
            _keep_mode(real, tmp, kind == "file")
            os.replace(tmp, real)
    except OSError as e:
        raise PerflabError(f"{where}: cannot write: {e.strerror or e}") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def write(path: str, data: str | bytes, label: str = "") -> None:
    """Write all of `data` to `path` (text as UTF-8) as described above."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    with staged(path, label) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(raw)


def _copy_into(tmp: str, real: str) -> None:
    # O_TRUNC is meaningless on a device or FIFO and refused by some; no O_CREAT: it exists.
    with open(tmp, "rb") as src:
        data = src.read()
    fd = os.open(real, os.O_WRONLY)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def _keep_mode(real: str, tmp: str, exists: bool) -> None:
    # A replaced file keeps its permissions; a new one gets what `>` would give it.
    if exists:
        os.chmod(tmp, stat.S_IMODE(os.stat(real).st_mode))
    else:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)


def check_directory(path: str, label: str = "") -> None:
    """A directory to write files into (`robot --out`): made now if missing, and probed by making a file,
    so a bad one is refused in one line before any work (os.access says yes to root on /proc)."""
    where = _name(path, label)
    if os.path.exists(path) and not os.path.isdir(path):
        raise PerflabError(f"{where}: not a directory")
    try:
        os.makedirs(path, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=path, prefix=".perflab-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise PerflabError(f"{where}: cannot write files there: {e.strerror or e}") from None

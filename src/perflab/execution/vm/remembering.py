"""What a guest's boot remembers across commands, by files' sizes and modification times: the
QEMU command line a lone job's guest was started ahead with, kept under what decided it, so that
the next command with the same inputs starts it at once; and what QEMU says of its version.

Making a `cmd` guest's command line reads and hashes ~20 MB (the modules decompressed, the
initramfs composed and compared with its cached copy, the kernel image hashed for its PVH
vmlinux): 40-60 ms of CPU before QEMU could start, serially, on the command's critical path
(docs/vm.md, "A command's seconds"). What decided it is named instead by cheap facts, the
sizes and modification times of the files it is made from (`inputs`), and the command line
is kept under them (`keep`) and found again (`command`). It is only ever a guess: boot()
makes its own command line from the files' contents, takes the guest started ahead when the
two are the same word for word and kills it otherwise, so a guess gone stale (a file changed
that the inputs do not name) costs a boot's CPU, never a run in the wrong guest.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

from perflab.core import paths
from perflab.core.errors import PerflabError
from perflab.execution import executor
from perflab.execution.vm import initramfs, kernel as kernels, modules

KEPT = 32      # the command lines kept, the most recently started first

# perflab's code that makes a guest's initramfs and command line.
SOURCES = tuple(Path(__file__).parent / f for f in ("machine.py", "initramfs.py", "modules.py", "entry.py",
                                                    "disk.py", "remembering.py"))


def inputs(image: str | Path, machine: dict, cmdline: str, needs: Iterable[str],
           sources: Sequence[Path] = ()) -> str | None:
    """What decides the command line of a guest of `image` (its config, its modules, busybox, the
    compiler, QEMU, perflab's sources and `sources`), with the machine block, the kernel command
    line added and the job's needs: sizes and modification times, no content read. None when a
    file is gone or cannot be read (nothing is guessed then)."""
    try:
        image = Path(image).resolve()
        named = [image, kernels.config_of(image), modules.modules_dir(image, modules.release_of(image)),
                 initramfs.busybox(), shutil.which(os.environ.get("CC") or "cc"), shutil.which("qemu-system-x86_64"),
                 *SOURCES, *sources, *sorted(initramfs.AGENT_DIR.glob("*")), *sorted(executor.LAUNCHER_DIR.glob("*"))]
        stats = [(str(p), (st := os.stat(p)).st_size, st.st_mtime_ns) for p in named if p is not None]
    except (OSError, PerflabError):
        return None
    return json.dumps([initramfs.FORMAT_VERSION, str(paths.cache_home()), repr(sorted(machine.items())), cmdline,
                       sorted(needs), stats])


def _path(remember: str) -> Path:
    return initramfs.cache_dir() / f"ahead-{hashlib.sha256(remember.encode()).hexdigest()[:20]}.json"


def keep(remember: str, command: Sequence[str]) -> None:
    """Keep `command` (a QEMU command line) under `remember`; a cache that cannot be written is
    no failure (the next command makes the command line again)."""
    path = _path(remember)
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        paths.write_whole(path, json.dumps({"remember": remember, "command": list(command)}))
        kept = sorted(path.parent.glob("ahead-*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in kept[KEPT:]:
            old.unlink(missing_ok=True)


def command(remember: str) -> tuple[str, ...] | None:
    """The command line kept under `remember`, or None: none kept, or one whose QEMU, kernel
    entry or initramfs is gone (all three are files of perflab's caches or the system's)."""
    try:
        kept = json.loads(_path(remember).read_text())
        key = tuple(str(word) for word in kept["command"])
        if kept["remember"] != remember:
            return None
        if all(Path(p).is_file() for p in (key[0], key[key.index("-kernel") + 1], key[key.index("-initrd") + 1])):
            os.utime(_path(remember))        # started again: kept longest
            return key
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
        pass
    return None


def _said_path(program: str, args: Sequence[str]) -> Path | None:
    try:
        st = os.stat(program)
    except OSError:
        return None
    key = f"{os.path.realpath(program)}\0{st.st_size}\0{st.st_mtime_ns}\0" + "\0".join(args)
    return initramfs.cache_dir() / f"said-{hashlib.sha256(key.encode()).hexdigest()[:20]}.txt"


def output(program: str, args: Sequence[str]) -> str | None:
    """What `program ARGS` printed when it last ran, kept by the program file's size and
    modification time (QEMU's --version: a process of 20-60 ms of CPU per boot otherwise), or None."""
    path = _said_path(program, args)
    try:
        return path.read_text() if path is not None else None
    except OSError:
        return None


def keep_output(program: str, args: Sequence[str], out: str) -> None:
    path = _said_path(program, args)
    if path is not None and out.strip():
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            paths.write_whole(path, out)

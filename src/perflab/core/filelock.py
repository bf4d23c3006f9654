"""An exclusive flock on an open file, waited for while another process holds it, its holder
named in the file: one kernel build of a tree at a time (execution.vm.kbuild), one job at a time
on a machine (execution.machine_lock). A flock goes with its holder's descriptor, also after
kill -9, so nothing stale is ever left to clear."""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager


def holder(fd: int, limit: int = 300) -> str:
    """What the file says of its holder (empty when nothing)."""
    return os.pread(fd, limit, 0).decode(errors="replace").strip()


def take(fd: int, waiting: Callable[[], AbstractContextManager], poll: float,
         between: Callable[[], None] = lambda: None, holding: str = "") -> None:
    """Take the exclusive flock of `fd`, then write `holding` (who holds it) in the file. While
    another process holds it, inside `waiting()` (a line said, a step shown) try every `poll`
    seconds, calling `between` before each try (an interruption check)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        with waiting():
            while True:
                between()
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    time.sleep(poll)
    os.ftruncate(fd, 0)
    os.pwrite(fd, holding.encode(), 0)

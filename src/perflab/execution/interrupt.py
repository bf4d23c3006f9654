"""Ctrl-C and SIGTERM while a run is recorded: a flag, never an exception.

Python raises KeyboardInterrupt wherever the main thread happens to be — in
the middle of a SQLite commit too, which left a transaction open and the next
write waiting 30 s for a lock ("database is locked"), or an internal
assertion failing. So while runs are recorded, SIGINT and SIGTERM only note
the request and stop the benchmark now running (its launcher kills the
process group); the loop looks at the flag between steps and raises
Interrupted there, outside any database work, and the run's status is then
written once.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

from perflab.execution import executor


class Interrupted(Exception):
    """perflab was asked to stop (Ctrl-C, SIGTERM); raised by the loop at a safe point."""

    def __init__(self, signum: int):
        self.signum = signum
        name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        super().__init__(f"interrupted by {name}")


_requested: int | None = None


def _note(signum, _frame) -> None:
    global _requested
    if _requested is None:
        _requested = signum
    executor.stop_current()


def requested() -> int | None:
    return _requested


def check() -> None:
    """Raise Interrupted if a stop was asked for."""
    if _requested is not None:
        raise Interrupted(_requested)


@contextmanager
def stop_requests_as_flag() -> Iterator[None]:
    """While inside, SIGINT and SIGTERM set the flag instead of raising."""
    global _requested
    _requested = None
    previous = {sig: signal.signal(sig, _note) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

"""Long steps say what they do and for how long, on stderr (docs/runner.md, "Long steps").

A step that may take long — a kernel build's make, a guest boot, a kernel fetch, a clone or
a checkout of a big tree, a revert check, the clean-up of a kernel build — is entered as

    with step("kernel 1a2b3c4d5e6f: make bzImage"):
        ...

On a terminal it is one ticking line, `label  37 s`, redrawn every TICK_S (the innermost step,
its outer ones before it), and when it ends, one line `label: 8 min 36 s` that stays. Elsewhere
(a log, a pipe, a test) a start line `label ...` and an end line `label: 8 min 36 s` (or
`failed after`, `interrupted after`). A step shorter than STEP_AFTER_S says nothing at all, as
the runner's bar appears only after a second: a quick checkout is not news. PERFLAB_STEP_AFTER
(seconds) sets that threshold: 0 shows every step (the tests use it: no timing in a test).

stdout is never written (reports, mails and JSON go there). While the runner's progress bar
is live (runner/progress.Bar), the step does not draw a line of its own: the bar shows it
(`current()`), as a second live line on the same terminal would tear the first.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from perflab.core.text import printable

STEP_AFTER_S = 2.0      # a step that ends sooner says nothing
TICK_S = 1.0            # how often the ticking line is redrawn
LABEL_ROOM = 160        # a label is cut beyond this


@dataclass
class _Step:
    label: str
    began: float = field(default_factory=time.monotonic)
    shown: bool = False          # its start line (or ticking line) was written


_lock = threading.RLock()
_stack: list[_Step] = []
_ticker: threading.Thread | None = None
_drawn = False                   # a ticking line is on the terminal now
_held = 0                        # the runner's bar is live: it shows the step


def after_s() -> float:
    """The threshold under which a step says nothing (PERFLAB_STEP_AFTER, else STEP_AFTER_S)."""
    raw = os.environ.get("PERFLAB_STEP_AFTER", "")
    try:
        value = float(raw)
    except ValueError:
        return STEP_AFTER_S
    return value if value >= 0 and value == value and value != float("inf") else STEP_AFTER_S


def seconds_text(seconds: float) -> str:
    """`4.2 s`, `37 s`, `8 min 36 s`, `1 h 02 min`."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def _tty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _write(text: str) -> None:
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass       # stderr closed: a step's words are not worth failing the work for


def _clear() -> None:
    global _drawn
    if _drawn:
        _write("\r\x1b[K")
        _drawn = False


def _line(now: float) -> str:
    """The ticking line: the steps from the outermost, the innermost's elapsed seconds."""
    inner = _stack[-1]
    text = " › ".join(s.label for s in _stack) + f"  {seconds_text(now - inner.began)}"
    try:
        width = os.get_terminal_size(sys.stderr.fileno()).columns
    except (OSError, ValueError, AttributeError):
        width = 0
    width = width if width >= 40 else 100      # a terminal that does not say (a pty of `script`)
    return text if len(text) < width else "…" + text[-(width - 2):]


def _tick() -> None:
    """Shown steps: the start lines (not a terminal) or the ticking line (a terminal)."""
    global _drawn, _ticker
    while True:
        time.sleep(TICK_S if _tty() else min(TICK_S, max(after_s(), 0.05)))
        with _lock:
            if not _stack:
                _ticker = None
                return
            _show(time.monotonic())


def _show(now: float) -> None:
    global _drawn
    threshold = after_s()
    if _tty():
        if _held or now - _stack[-1].began < threshold:
            return
        for s in _stack:
            if now - s.began >= threshold:
                s.shown = True
        _write("\r\x1b[K" + _line(now))
        _drawn = True
        return
    for s in _stack:
        if not s.shown and now - s.began >= threshold:
            s.shown = True
            _write(f"{s.label} ...\n")


@contextmanager
def step(label: str) -> Iterator[None]:
    """Say what a long step does and for how long (see the module's doc); nothing for a short one."""
    global _ticker
    entry = _Step(printable(label, LABEL_ROOM))
    with _lock:
        _stack.append(entry)
        if after_s() == 0:
            _show(entry.began)
        if _ticker is None:
            _ticker = threading.Thread(target=_tick, name="perflab-steps", daemon=True)
            _ticker.start()
    how = "done in"
    try:
        yield
    except KeyboardInterrupt:
        how = "interrupted after"
        raise
    except BaseException:
        how = "failed after"
        raise
    finally:
        with _lock:
            if entry in _stack:
                _stack.remove(entry)
            took = time.monotonic() - entry.began
            tty = _tty()
            # A step that ended between two ticks past the threshold still says it ran; under the
            # runner's live bar (a terminal) the bar showed it, and a line would tear the bar.
            if (entry.shown or took >= after_s()) and not (tty and _held):
                if not entry.shown and not tty:
                    _write(f"{entry.label} ...\n")
                _clear()
                _write(f"{entry.label}: {how} {seconds_text(took)}\n")
            if _stack and _tty() and not _held:
                _show(time.monotonic())


def say(line: str, *, stdout: bool = False) -> None:
    """A line on stderr (a command's progress words; stdout: the robot's log) that a ticking line
    does not tear: the line is cleared first, and redrawn below it."""
    with _lock:
        _clear()
        if stdout:
            try:
                sys.stdout.write(line.rstrip("\n") + "\n")
                sys.stdout.flush()
            except (OSError, ValueError):
                pass
        else:
            _write(line.rstrip("\n") + "\n")
        if _stack and _tty() and not _held:
            _show(time.monotonic())


def current() -> str:
    """The steps under way and the innermost's elapsed time, for the runner's bar; "" when none."""
    with _lock:
        if not _stack or time.monotonic() - _stack[-1].began < after_s():
            return ""
        inner = _stack[-1]
        return f"{inner.label} {seconds_text(time.monotonic() - inner.began)}"


def hold(held: bool) -> None:
    """The runner's bar went live (True) or away (False): while live it shows the step, no line of ours."""
    global _held
    with _lock:
        if held:
            _clear()
            _held += 1
        else:
            _held = max(_held - 1, 0)

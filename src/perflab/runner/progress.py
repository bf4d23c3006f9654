"""The runner's progress bar: one bar for the whole invocation, moving within a repetition.

A repetition may last many seconds (a will-it-scale point runs warm-up plus duration), so
a bar that moved only when a repetition ends would sit still for all of it. A ticker thread
moves the bar a few times a second on the time spent in the current repetition against what
it is expected to take: the job's declared duration (its `duration` or `runtime` parameter,
plus a `warmup_time` or `ramp_time`), else the time the same job's previous repetition took.
When neither is known the bar waits at the repetition's start and the ETA reads "n/a".

The bar appears once the invocation has run for PROGRESS_AFTER_S (a short command sees
none), on stderr, and is transient. Lines printed while it shows (each atomic job's result,
warnings) go above it. Labels put the parameters that vary across the invocation first and
never cut them; only the rest of the name is shortened.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TYPE_CHECKING

from perflab.core import steps
from perflab.core.text import printable

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

# The bar appears once the invocation has taken longer than this.
PROGRESS_AFTER_S = 1.0
# How often the ticker moves the bar (4 times a second).
TICK_S = 0.25
# Room for the part of a label after the varying parameters.
NAME_ROOM = 40
# A repetition is never shown finished before it is: the bar stops short of its end.
MOST_OF_A_REPETITION = 0.99

# Parameters that say how long one repetition takes (seconds), summed.
DURATION_KEYS = ("duration", "runtime")
LEAD_IN_KEYS = ("warmup_time", "ramp_time")


def declared_seconds(parsed) -> float | None:
    """Seconds one repetition of a job is declared to take, from its parameters; None if it says not."""
    main = [getattr(parsed, k, None) for k in DURATION_KEYS]
    main = [float(v) for v in main if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0]
    if not main:
        return None
    lead = [getattr(parsed, k, None) for k in LEAD_IN_KEYS]
    return main[0] + sum(float(v) for v in lead if isinstance(v, (int, float)) and not isinstance(v, bool))


def label(varying: str, name: str, where: str) -> str:
    """`varying where  name`: the varying parameters and the repetition whole, the name shortened."""
    head = " ".join(part for part in (varying, where) if part)
    return f"{head}  {printable(name, NAME_ROOM)}" if head else printable(name, NAME_ROOM)


def fmt_eta(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


class Bar:
    """One progress bar with ETA for the whole invocation, shown only when it is worth it."""

    def __init__(self, console: Console | None, total: int, *, ticker: bool = True):
        self._console, self.total, self.done = console, total, 0
        self.began = time.monotonic()
        self.progress: Progress | None = None
        self.description = "setting up (building programs)"
        self.expected: float | None = None      # of the repetition under way
        self.rep_began: float | None = None
        self.last: dict[object, float] = {}     # job -> seconds its last repetition took
        self.durations: list[float] = []        # every finished repetition's
        self._job: object = None
        self._holds = False                     # steps.hold(True) was said (a live bar on a terminal)
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, name="perflab-progress", daemon=True) if ticker else None
        if self._thread is not None:
            self._thread.start()

    # -- what the loop says ---------------------------------------------------

    def begin(self, job: object, description: str, declared: float | None) -> None:
        """A repetition of `job` starts: expected to take `declared` s, else as long as its last one."""
        with self._lock:
            self._job, self.description = job, description
            self.expected = declared if declared is not None else self.last.get(job)
            self.rep_began = time.monotonic()

    def step(self, description: str | None = None) -> None:
        """The repetition under way ended."""
        with self._lock:
            if self.rep_began is not None:
                took = time.monotonic() - self.rep_began
                self.last[self._job] = took
                self.durations.append(took)
            self.done += 1
            self.rep_began = None
            if description is not None:
                self.description = description
            self._show()

    # -- figures ----------------------------------------------------------------

    def fraction(self, now: float | None = None) -> float:
        """How much of the current repetition is behind us, by the clock, in [0, 0.99]."""
        if self.rep_began is None or not self.expected:
            return 0.0
        elapsed = (now or time.monotonic()) - self.rep_began
        return min(elapsed / self.expected, MOST_OF_A_REPETITION)

    def completed(self, now: float | None = None) -> float:
        return min(self.done + self.fraction(now), self.total)

    def eta(self, now: float | None = None) -> float | None:
        """Seconds left in the invocation; None when nothing tells how long a repetition takes."""
        now = now or time.monotonic()
        left_after = max(self.total - self.done - (1 if self.rep_began is not None else 0), 0)
        typical = sum(self.durations) / len(self.durations) if self.durations else self.expected
        current = 0.0
        if self.rep_began is not None:
            if not self.expected:
                return None
            current = max(self.expected - (now - self.rep_began), 0.0)
        if left_after and typical is None:
            return None
        return current + left_after * (typical or 0.0)

    # -- display ----------------------------------------------------------------

    @property
    def console(self) -> Console:
        if self._console is None:
            from rich.console import Console

            self._console = Console(stderr=True)
        return self._console

    def _tick(self) -> None:
        while not self._stop.wait(TICK_S):
            with self._lock:
                if self._stop.is_set():
                    return
                self._show()

    def _show(self) -> None:
        if self.progress is None:
            if self.done >= self.total or time.monotonic() - self.began < PROGRESS_AFTER_S:
                return
            self.progress = _progress(self.console, self)
            self.progress.start()
            self.task = self.progress.add_task("", total=self.total)
            if self.console.is_terminal:
                # A long step under way (a guest's boot) is shown in the bar, not on a line of its own.
                steps.hold(True)
                self._holds = True
        # What is under way now (a guest's boot) in place of the label: both would not fit a line.
        under_way = steps.current() if self._holds else ""
        self.progress.update(self.task, completed=self.completed(), description=under_way or self.description)
        self.progress.refresh()

    def echo(self, line: str) -> None:
        """Print a line to stdout above the bar (an atomic job's result as it finishes)."""
        with self._lock:
            if self.progress is not None:
                # Out of the way first: a line written under a live bar would be torn by its redraw.
                self.progress.stop()
                _write(line)
                self.progress.start()
            else:
                _write(line)

    def warn(self, message: str) -> None:
        from rich.markup import escape

        with self._lock:
            target = self.progress.console if self.progress is not None else self.console
            target.print(f"[yellow]warning:[/] {escape(printable(message, None))}", soft_wrap=True, highlight=False)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2)
        with self._lock:
            if self.progress is not None:
                self.progress.stop()
                self.progress = None
            if self._holds:
                steps.hold(False)
                self._holds = False


def _write(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _progress(console: Console, bar: Bar) -> Progress:
    # rich.progress is imported only when a bar is shown: it costs 0.1 s of start-up.
    from rich.progress import BarColumn, Progress, ProgressColumn, TaskProgressColumn, TextColumn
    from rich.text import Text

    class EtaColumn(ProgressColumn):
        """ETA from the expected durations; "n/a" when nothing tells how long a repetition takes."""

        def render(self, task) -> Text:
            return Text(f"ETA {fmt_eta(bar.eta())}", style="progress.remaining")

    return Progress(TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), EtaColumn(),
                    console=console, auto_refresh=False, transient=True)

"""The window a monitor's figures cover, and whether they are tick-sampled: said with every figure.

A monitor declares its window once, on its class (`Monitor.window`, `Monitor.tick_sampled`);
a run records the window it actually counted in its monitor record (`run.monitors[NAME]
["window"]`), because one monitor can choose at run time (insn-profile's `window: auto` counts
will-it-scale's measured part, any other benchmark's whole process). Views read it back with
`window_of` and print it beside the figures; figures over different windows are not set side
by side (docs/monitors.md, "Windows").

Light on purpose (no pydantic): `compare` and `show` ask it for every monitor of a run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MEASURED = "measured"    # the benchmark's own measured part (its harness marks it: will-it-scale)
PROCESS = "process"      # the benchmark process's life, from its start to its reaping (warm-up included)
BOOT = "boot"            # since the machine (a guest) booted: a reading with no start of its own

TEXT = {MEASURED: "the benchmark's measured part",
        PROCESS: "the benchmark process's life (its warm-up included)",
        BOOT: "since the boot"}

# A tick-sampled figure: the kernel charges a whole timer tick to whatever runs when it fires.
TICK_NOTE = {"qemu": "tick-sampled in a guest: the guest kernel charges each timer tick to what runs when it "
                     "fires, so a share can be far from the instructions the window ran",
             "host": "tick-sampled: the kernel charges each timer tick to what runs when it fires"}

# What stored runs said before the window was recorded apart (insn-profile's note).
_OLD_NOTE = re.compile(r"^counted over (the benchmark's measured part|the whole process)(?: and [^;]*)?; ?")


@dataclass(frozen=True)
class Window:
    monitor: str
    window: str                       # MEASURED, PROCESS or BOOT
    tick_sampled: tuple[str, ...]     # the metric names (after "MONITOR.") that start so are tick-sampled
    guest: bool                       # read in a VM guest

    @property
    def text(self) -> str:
        return TEXT.get(self.window, self.window)

    @property
    def tick_note(self) -> str:
        """What a tick-sampled figure of this monitor is, where it was read; "" when none is."""
        if not self.tick_sampled:
            return ""
        return TICK_NOTE["qemu" if self.guest else "host"]

    def is_tick_sampled(self, metric: str) -> bool:
        field = metric.split(".", 1)[1] if "." in metric else metric
        return any(field.startswith(p) for p in self.tick_sampled)

    def describe(self, metrics: list[str] | None = None) -> str:
        """"over the benchmark process's life; cpu.* tick-sampled in a guest: ..." — the window, and the
        tick note when any of `metrics` (None: any of the monitor's) is tick-sampled."""
        text = f"over {self.text}"
        ticked = self.tick_sampled and (metrics is None or any(self.is_tick_sampled(m) for m in metrics))
        if ticked:
            text += f"; {', '.join(p + '*' for p in self.tick_sampled)} {self.tick_note}"
        return text


def declared(name: str) -> tuple[str, tuple[str, ...]]:
    """The (window, tick-sampled prefixes) monitor NAME's class declares."""
    from perflab.monitors import monitor_class

    cls = monitor_class(name)
    return cls.window, tuple(cls.tick_sampled)


def window_of(name: str, record: dict | None) -> Window:
    """The window of monitor NAME in a run whose monitor record is `record` (run.monitors[NAME]):
    the recorded one, else the one its class declares (runs stored before windows were recorded;
    insn-profile's older note says which it counted)."""
    record = record or {}
    window, ticks = declared(name)
    recorded = record.get("window")
    if recorded in TEXT:
        window = recorded
    else:
        for note in record.get("notes", []) or []:
            m = _OLD_NOTE.match(str(note))
            if m:
                window = MEASURED if "measured" in m.group(1) else PROCESS
    return Window(name, window, ticks, "guest" in str(record.get("where", "")))


def run_windows(run) -> dict[str, Window]:
    """Every monitor that ran in `run` (a store row), by name, with its window."""
    from perflab.monitors import MONITORS

    out = {}
    for name, record in (getattr(run, "monitors", None) or {}).items():
        if name in MONITORS and isinstance(record, dict):
            out[name] = window_of(name, record)
    return out


def notes_without_window(notes) -> list[str]:
    """A monitor record's notes without the window, which views print apart (older insn-profile notes
    began with it)."""
    out = []
    for note in notes or []:
        text = _OLD_NOTE.sub("", str(note))
        if text:
            out.append(text)
    return out

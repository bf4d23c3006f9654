"""The window a monitor's figures cover, and whether they are tick-sampled: said with every figure.

A monitor's window is declared once, here (`DECLARED`, which its class's `window` and
`tick_sampled` are read from: perflab.monitors.base), so a view reads it without importing the
monitor classes (pydantic);
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

# The monitors whose window or tick-sampled metrics are not the default (the process's life, none):
# insn-profile marks the harness's measured part; /proc/stat's cpu line (proc-stat's cpu.*,
# vmstat's us/sy/...) is USER_HZ ticks, each charged to what ran when it fired.
DECLARED: dict[str, tuple[str, tuple[str, ...]]] = {
    "insn-profile": (MEASURED, ()),
    "proc-stat": (PROCESS, ("cpu.",)),
    "vmstat": (PROCESS, ("cpu.",)),
}

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
        """"over the benchmark process's life; cpu.* tick-sampled in a guest: ..." — the window, and, read in
        a guest, the tick note when any of `metrics` (None: any of the monitor's) is tick-sampled."""
        text = f"over {self.text}"
        ticked = self.guest and self.tick_sampled and (metrics is None or any(self.is_tick_sampled(m) for m in metrics))
        if ticked:
            text += f"; {', '.join(p + '*' for p in self.tick_sampled)} {self.tick_note}"
        return text


def declared(name: str) -> tuple[str, tuple[str, ...]]:
    """The (window, tick-sampled prefixes) declared for monitor NAME."""
    return DECLARED.get(name, (PROCESS, ()))


def window_of(name: str, record: dict | None) -> Window:
    """The window of monitor NAME in a run whose monitor record is `record` (run.monitors[NAME]):
    the recorded one, else the one its class declares (runs stored before windows were recorded;
    insn-profile's older note says which it counted)."""
    record = record if isinstance(record, dict) else {}
    window, ticks = declared(name)
    recorded = record.get("window")
    if recorded in TEXT:
        window = recorded
    else:
        notes = record.get("notes")
        for note in notes if isinstance(notes, list) else []:
            m = _OLD_NOTE.match(str(note))
            if m:
                window = MEASURED if "measured" in m.group(1) else PROCESS
    return Window(name, window, ticks, "guest" in str(record.get("where", "")))


def run_windows(run) -> dict[str, Window]:
    """Every monitor that ran in `run` (a store row), by name, with its window."""
    from perflab.monitors import MONITORS

    out = {}
    records = getattr(run, "monitors", None)
    for name, record in (records if isinstance(records, dict) else {}).items():
        if name in MONITORS:
            out[name] = window_of(name, record)     # a record not readable: the declared window
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


def side_windows(runs) -> dict[str, Window | None]:
    """Each monitor's window over some runs; None where they counted over several."""
    out: dict[str, Window | None] = {}
    for run in runs:
        for name, w in run_windows(run).items():
            if name not in out:
                out[name] = w
            elif out[name] is not None and out[name].window != w.window:
                out[name] = None
    return out


def apart(sides: list[dict]) -> tuple[set[tuple], list[str]]:
    """(key, monitor) pairs whose figures cover different windows on different sides (or within one),
    and a line each saying so: such figures are not compared. `sides`: per side, {key: its runs},
    the key saying what is compared with what (a testcase)."""
    keys = sorted({k for side in sides for k in side}, key=repr)
    out, lines = set(), []
    for key in keys:
        per_side = [side_windows(side[key]) for side in sides if key in side]
        if len(per_side) < 2:
            continue
        for name in sorted({n for w in per_side for n in w}):
            present = [w[name] for w in per_side if name in w]
            if len(present) < 2:
                continue
            if any(w is None for w in present) or len({w.window for w in present}) > 1:
                said = ", ".join("several" if w is None else w.text for w in present)
                out.add((key, name))
                lines.append(f"{name}: not compared, its figures cover different windows on the sides ({said})")
    return out, list(dict.fromkeys(lines))


def summary(sides: list[list], shown: list[str]) -> str:
    """The windows of the monitors `shown`, once: "window: X" when they share one, else "windows: a, b
    over X; c over Y"; and which of their figures are tick-sampled in a guest."""
    texts: dict[str, list[str]] = {}
    guest: dict[str, Window] = {}
    for runs in sides:
        for run in runs:
            for name, w in run_windows(run).items():
                if name in shown:
                    if w.text not in texts.setdefault(name, []):
                        texts[name].append(w.text)
                    if w.guest and w.tick_sampled:
                        guest[name] = w
    if not texts:
        return ""
    by: dict[str, list[str]] = {}
    for name in shown:
        if name in texts:
            # one monitor over several windows: each testcase's own (insn-profile's auto)
            by.setdefault(" or ".join(texts[name]) + (", by testcase" if len(texts[name]) > 1 else ""), []).append(name)
    if len(by) == 1:
        text = f"window: {next(iter(by))}"
    else:
        text = "windows: " + "; ".join(f"{', '.join(names)} over {t}" for t, names in by.items())
    ticked = [n for n in shown if n in guest]
    if ticked:
        text += "; " + ", ".join(f"{n}.{p}*" for n in ticked for p in guest[n].tick_sampled) + " " + TICK_NOTE["qemu"]
    return text

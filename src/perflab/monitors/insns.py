"""insn-profile: the instructions a VM guest ran while the benchmark ran, per kernel function.

QEMU counts them itself (perflab's TCG plugin, execution/vm/c/insns.c): every translated
block of kernel code has a counter its instruction count is added to each time it runs, and
the guest marks the window (the benchmark process, from perflab's agent; the benchmark's own
measured part, from will-it-scale's harness). Nothing is sampled: under icount the same
kernel and program give the same counts on every boot, and two kernels' counts differ only
where their code or its path differs. The blocks are named with the guest's /proc/kallsyms.

Per repetition it records the instructions of the window (`insn-profile.instructions`), of
user space and of the kernel, and each kernel function's own instructions (self, not
children: no stack is walked) from `min_share` percent of the window up, the rest as
`insn-profile.self.[other]`, so the parts add up to the whole. docs/monitors.md.
"""

from __future__ import annotations

import bisect
import hashlib
from typing import Literal

from pydantic import Field

from perflab.core.model import INFORMATIONAL, Sample
from perflab.execution.targets import INSTRUCTION_COUNTS
from perflab.execution.counted import KERNEL, TOTAL, UNIT, USER, function_samples
from perflab.monitors import windows
from perflab.monitors.base import Collected, Monitor, MonitorOptions, Unavailable

UNKNOWN = "[unknown]"        # kernel addresses kallsyms does not name
TEXT_TYPES = frozenset("tTwW")
MEASURED_PART, PROCESS = 1, 0   # the plugin's channels (insns.c)


class InsnProfileOptions(MonitorOptions):
    min_share: float = Field(0.1, ge=0, le=100, description="store a kernel function whose share of the "
                             "window's instructions reaches this many percent (the rest: [other])")
    window: Literal["auto", "process"] = Field(
        "auto", description="auto: the benchmark's measured part where its harness marks it "
        "(will-it-scale), else the whole process; process: always the whole process")


class KernelSymbols:
    """A guest kernel's text symbols (its /proc/kallsyms), to name the addresses of code."""

    def __init__(self, kallsyms: str):
        rows = []
        for line in kallsyms.splitlines():
            words = line.split()
            if len(words) >= 3 and words[1] in TEXT_TYPES:
                try:
                    rows.append((int(words[0], 16), words[2]))
                except ValueError:
                    continue
        rows.sort()
        self.starts = [a for a, _ in rows]
        self.names = [n for _, n in rows]

    def __bool__(self) -> bool:
        return any(self.starts)     # kptr_restrict hides addresses as zeros

    def name(self, address: int) -> str:
        i = bisect.bisect_right(self.starts, address) - 1
        return self.names[i] if i >= 0 else UNKNOWN


_symbols: dict[str, KernelSymbols] = {}


def symbols_of(kallsyms: str) -> KernelSymbols:
    """Parsed once per distinct kallsyms (one per kernel and boot layout)."""
    key = hashlib.sha1(kallsyms.encode()).hexdigest()
    if key not in _symbols:
        _symbols.clear()
        _symbols[key] = KernelSymbols(kallsyms)
    return _symbols[key]


def by_function(counts: dict[int, int], symbols: KernelSymbols) -> tuple[int, dict[str, int]]:
    """A window's block counts -> (user-space instructions, {kernel function: instructions})."""
    user = counts.get(0, 0)
    functions: dict[str, int] = {}
    for address, n in counts.items():
        if address:
            name = symbols.name(address)
            functions[name] = functions.get(name, 0) + n
    return user, functions


class InsnProfile(Monitor):
    name = "insn-profile"
    summary = ("instructions per kernel function while the benchmark ran, counted by QEMU in a VM guest "
               "(exact and repeatable under icount)")
    records = ("insn-profile.instructions, insn-profile.user, insn-profile.kernel, "
               "insn-profile.self.FUNCTION (instructions of the window; [other] below min_share)")
    Options = InsnProfileOptions
    sampled = False
    needs = frozenset({INSTRUCTION_COUNTS})
    # window (monitors.windows.DECLARED): where the harness marks it (window: auto), else the process's life

    def __init__(self, options: InsnProfileOptions):
        super().__init__(options)
        self.user = 0
        self.functions: dict[str, int] = {}
        self.windows: set[str] = set()
        self.sources: set[str] = set()
        self.notes: set[str] = set()     # what was odd about a window (counting.Windows.note)
        self.said: set[str] = set()      # ... of those, the ones already printed
        self.repeatable = True

    def check(self) -> None:
        raise Unavailable("insn-profile counts a VM guest's instructions: run the job with a kernel (vm mode icount)")

    def replay_counts(self, counts, repeatable: bool) -> None:
        """One process's counts (an executor.InstructionCounts the guest filled)."""
        if not counts.windows:
            return      # the process never ran (it failed to start, or the guest died)
        symbols = symbols_of(counts.symbols)
        if not symbols:
            raise RuntimeError(f"no kernel symbols to name the counts with: {counts.symbols_from or 'none read'}")
        self.sources.add(counts.symbols_from)
        if counts.note:
            # The process split its window with markers of its own: the counts are not the whole process.
            self.notes.add(counts.note)
            repeatable = False
        channel = MEASURED_PART if self.options.window == "auto" and counts.windows.get(MEASURED_PART) else PROCESS
        self.windows.add(windows.MEASURED if channel == MEASURED_PART else windows.PROCESS)
        user, functions = by_function(counts.windows.get(channel, {}), symbols)
        self.user += user
        for name, n in functions.items():
            self.functions[name] = self.functions.get(name, 0) + n
        self.repeatable = self.repeatable and repeatable

    @property
    def counted_window(self) -> str:
        """MEASURED or PROCESS as counted; several processes counted alike, one of them."""
        return windows.PROCESS if windows.PROCESS in self.windows else (min(self.windows) if self.windows else self.window)

    def collect(self) -> Collected:
        user, functions = self.user, self.functions
        self.user, self.functions = 0, {}
        kernel = sum(functions.values())
        if not user + kernel:
            return Collected()
        exact = self.repeatable
        wholes = [Sample(TOTAL, float(user + kernel), UNIT, INFORMATIONAL, exact=exact),
                  Sample(USER, float(user), UNIT, INFORMATIONAL, exact=exact),
                  Sample(KERNEL, float(kernel), UNIT, INFORMATIONAL, exact=exact)]
        # The floor is a share of the whole window; what is under it is kernel code ([other]).
        floor = self.options.min_share * (user + kernel) / kernel if kernel else 0.0
        return Collected(samples=wholes + function_samples(functions, kernel, floor, exact))

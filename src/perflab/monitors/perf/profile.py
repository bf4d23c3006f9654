"""perf-profile: `perf record -a -g` during the timed part, read back with `perf script`.

Reduced here as `perf report --children` would: per symbol the share of samples
(weighted by period) whose leaf it is (self) and whose call chain contains it
(children), and LKP's 5-frame call traces. The per-symbol facts the metric names
cannot hold (command, kernel or user space) go in one series row
(symbol_row; read back by perflab.monitors.symbol_rows). docs/monitors-perf.md.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field

from perflab.core.model import metric_name  # noqa: F401 (re-exported: perflab.monitors.perf)
from perflab.execution.targets import HOST_TOOLS
from perflab.monitors.base import Collected, MonitorOptions, Unavailable, informational
from perflab.monitors.perf.control import PerfFailed, PerfMonitor
from perflab.monitors.perf.probe import check_permission, perf_binary, probe_events
from perflab.monitors.symbol_rows import symbol_field, symbols_from_series  # noqa: F401 (re-exported)



class PerfProfileOptions(MonitorOptions):
    event: Literal["auto", "cycles", "cpu-clock"] = Field(
        "auto", description="sampled event: auto is cycles where the machine counts it, cpu-clock otherwise")
    freq: int = Field(999, ge=1, le=100000, description="samples per second per CPU (perf record -F)")
    call_graph: Literal["fp", "dwarf"] = Field("fp", description="how perf walks stacks (fp: frame pointers)")
    min_children: float = Field(0.5, ge=0, le=100, description="store a symbol whose children%% reaches this")
    min_self: float = Field(0.1, ge=0, le=100, description="... or whose self%% reaches this")
    calltraces: int = Field(10, ge=0, le=1000, description="how many call traces to store at most")
    min_calltrace: float = Field(1.0, ge=0, le=100, description="store a call trace whose share reaches this")


KERNEL_SPACE = 1 << 63      # x86-64 and arm64 kernel addresses have the top bit set
CALLTRACE_FRAMES = 5        # LKP's call traces: a frame and its 4 callers
UNKNOWN = "[unknown]"


@dataclass
class Frame:
    ip: int
    symbol: str
    dso: str

    @property
    def kernel(self) -> bool:
        return self.ip >= KERNEL_SPACE or self.dso == "[kernel.kallsyms]"


@dataclass
class ProfileSample:
    comm: str
    pid: int
    period: int
    frames: list[Frame]      # leaf first
    count: int = 1           # samples of this stack (folded text: fold_awk)


def parse_perf_script(lines: Iterable[str] | str) -> Iterator[ProfileSample]:
    """`perf script -F comm,pid,period,ip,sym,dso` of a -g recording -> samples, leaf first, one at a time.

    A sample is a header line ("comm pid period"; comm may hold spaces) and its
    frames ("addr symbol (dso)"; the symbol may hold spaces and parentheses). After a line
    FOLDED, the text is FOLD_AWK's: a header's pid field is its stack's number of samples.
    """
    if isinstance(lines, str):
        lines = lines.splitlines()
    current: ProfileSample | None = None
    folded = False
    for line in lines:
        if line.rstrip("\n") == FOLDED:
            if current is not None:
                yield current
            current, folded = None, True
            continue
        if not line.strip():
            if current is not None:
                yield current
            current = None
            continue
        if line[0] in " \t" and current is not None:
            body = line.strip()
            addr, _, rest = body.partition(" ")
            symbol, sep, dso = rest.rpartition(" (")
            if not sep:
                symbol, dso = rest, UNKNOWN + ")"
            try:
                ip = int(addr, 16)
            except ValueError:
                continue
            current.frames.append(Frame(ip, symbol.strip() or UNKNOWN, dso[:-1] if dso.endswith(")") else dso))
            continue
        words = line.split()
        if len(words) < 3:
            continue
        try:
            pid, period = int(words[-2]), int(words[-1])
        except ValueError:
            continue
        if current is not None:
            yield current
        current = ProfileSample(" ".join(words[:-2]), 0, period, [], pid) if folded else \
            ProfileSample(" ".join(words[:-2]), pid, period, [])
    if current is not None:
        yield current


FOLDED = "perflab-folded"
# perf script's text with identical stacks summed, where perf ran (awk: POSIX, Debian's mawk):
# a system-wide profile of a many-CPU machine is ~600 bytes a sample, 64 MiB in a couple of
# seconds, and it comes back through the agent; its distinct stacks are few. Per stack: "comm
# SAMPLES PERIOD" and its frames, each address made 0 or 8000000000000000 (user or kernel:
# all reduce_profile reads of it). FOLDED first, only when a sample was read. A task perf
# lost track of (one exiting while it recorded) is ":-1  -1  PERIOD": its pid is negative.
FOLD_AWK = r"""
function flush() { if (have) { n[key]++; p[key] += period; have = 0 } }
/^[ \t]*$/ { flush(); next }
/^[ \t]/ {
    if (have) {
        ip = $1; k = (length(ip) == 16 && ip ~ /^[89a-fA-F]/) ? "8000000000000000" : "0"
        sub(/^[ \t]*[0-9a-fA-F]+/, ""); key = key "\n\t" k $0
    }
    next
}
NF >= 3 && $(NF - 1) ~ /^-?[0-9]+$/ && $NF ~ /^[0-9]+$/ {
    flush(); period = $NF; comm = $0
    sub(/[ \t]+-?[0-9]+[ \t]+[0-9]+[ \t]*$/, "", comm); sub(/^[ \t]+/, "", comm)
    key = comm; have = 1
}
END {
    flush(); started = 0
    for (k in n) {
        if (!started) { print "perflab-folded"; started = 1 }
        i = index(k, "\n")
        printf "%s %d %.0f%s\n\n", (i ? substr(k, 1, i - 1) : k), n[k], p[k], (i ? substr(k, i) : "")
    }
}
"""


@dataclass
class SymbolShare:
    symbol: str
    kind: str          # "[k]" kernel, "[.]" user space
    comm: str          # the command with most of its samples
    children: float    # percent of all samples (by period) whose chain contains it
    self: float        # percent whose leaf it is


@dataclass
class Profile:
    total: int                                 # summed period of every sample
    samples: int
    symbols: dict[str, SymbolShare]
    calltraces: dict[tuple[str, ...], float]   # leaf-first 5-frame windows -> percent

    def top(self, n: int, by: str = "children") -> list[SymbolShare]:
        return sorted(self.symbols.values(), key=lambda s: (-getattr(s, by), s.symbol))[:n]


def reduce_profile(samples: Iterable[ProfileSample]) -> Profile:
    """Self and children shares per symbol as `perf report --children --sort sym` computes them,
    weighted by period; a symbol counts once per sample however often it recurs.

    Identical stacks are summed first (a hot loop repeats its stack thousands of times),
    so memory and time go with the distinct stacks, not with the samples.
    """
    stacks: dict[tuple, int] = {}
    total = count = 0
    for s in samples:
        count += s.count
        total += s.period
        if s.frames:
            key = (s.comm, tuple(f.symbol for f in s.frames), tuple(f.kernel for f in s.frames))
            stacks[key] = stacks.get(key, 0) + s.period
    self_w: dict[str, int] = {}
    children_w: dict[str, int] = {}
    comm_w: dict[str, dict[str, int]] = {}
    kernel: dict[str, bool] = {}
    trace_w: dict[tuple[str, ...], int] = {}
    for (comm, names, kernels), period in stacks.items():
        if names[0] != UNKNOWN:
            self_w[names[0]] = self_w.get(names[0], 0) + period
        for name, k in zip(names, kernels):
            # A name in both spaces (a libc and a kernel `memcpy`) is the kernel's, whatever stack
            # came first: the same profile folded where perf ran (FOLD_AWK, hash order) reads alike.
            if name != UNKNOWN:
                kernel[name] = kernel.get(name, False) or k
        for sym in set(names) - {UNKNOWN}:
            children_w[sym] = children_w.get(sym, 0) + period
            per_comm = comm_w.setdefault(sym, {})
            per_comm[comm] = per_comm.get(comm, 0) + period
        windows = {names[i:i + CALLTRACE_FRAMES] for i in range(len(names)) if names[i] != UNKNOWN}
        for w in windows:
            trace_w[w] = trace_w.get(w, 0) + period
    scale = 100.0 / total if total else 0.0
    symbols = {}
    for sym, w in children_w.items():
        comm = max(comm_w[sym].items(), key=lambda kv: (kv[1], kv[0]))[0]
        symbols[sym] = SymbolShare(sym, "[k]" if kernel.get(sym) else "[.]", comm, w * scale,
                                   self_w.get(sym, 0) * scale)
    return Profile(total, count, symbols, {w: v * scale for w, v in trace_w.items()})


def profile_samples(profile: Profile, options: PerfProfileOptions):
    """LKP's perf-profile metrics of one repetition: symbols above the floors, the top call traces."""
    out = []
    for s in sorted(profile.symbols.values(), key=lambda s: (-s.children, s.symbol)):
        if s.children >= options.min_children or s.self >= options.min_self:
            out.append(informational(metric_name("perf-profile.children.cycles-pp.", s.symbol), s.children, "%"))
            out.append(informational(metric_name("perf-profile.self.cycles-pp.", s.symbol), s.self, "%"))
    traces = sorted(((v, w) for w, v in profile.calltraces.items()
                     if len(w) > 1 and v >= options.min_calltrace), key=lambda vw: (-vw[0], vw[1]))
    for v, w in traces[:options.calltraces]:
        out.append(informational(metric_name("perf-profile.calltrace.cycles-pp.", ".".join(w)), v, "%"))
    return out


def symbol_row(profile: Profile, options: PerfProfileOptions) -> dict[str, float]:
    """The per-symbol facts the stored metrics cannot say (comm, [k]/[.]): one series row whose
    field names are perflab.monitors.symbol_rows.symbol_field's and whose values are the children%."""
    return {symbol_field(s.kind, s.comm, s.symbol): round(s.children, 4)
            for s in profile.symbols.values()
            if s.children >= options.min_children or s.self >= options.min_self}


def script_argv(perf: str, data: str) -> list[str]:
    """`perf script` with the fields parse_perf_script reads."""
    return [perf, "script", "-i", data, "-F", "comm,pid,period,ip,sym,dso"]


def perf_script(perf: str, data: Path) -> Iterator[str]:
    """perf script's lines, streamed (a long system-wide profile is millions of lines)."""
    err = data.with_suffix(".script.err")
    with open(err, "wb") as errfile:
        proc = subprocess.Popen(script_argv(perf, str(data)),
                                stdout=subprocess.PIPE, stderr=errfile, text=True, errors="replace")
        try:
            yield from proc.stdout
        finally:
            proc.stdout.close()
            if proc.poll() is None:
                proc.kill()
            status = proc.wait()
    words = [l.strip() for l in err.read_text(errors="replace").splitlines() if l.strip()]
    err.unlink(missing_ok=True)
    if status != 0:
        raise PerfFailed(f"perf script -i {data} failed: {' | '.join(words[-3:]) or status}")


class PerfProfile(PerfMonitor):
    name = "perf-profile"
    summary = "perf record -a -g during the timed part: children/self % per symbol, top call traces"
    records = ("perf-profile.children.cycles-pp.SYMBOL, perf-profile.self.cycles-pp.SYMBOL (%), "
               "perf-profile.calltrace.cycles-pp.LEAF.CALLER... (%)")
    Options = PerfProfileOptions
    needs = frozenset({HOST_TOOLS})      # in a guest: the host's perf, run there (perflab.monitors.guest)

    def __init__(self, options: PerfProfileOptions):
        super().__init__(options)
        self.event = "cpu-clock"
        self._seconds = 0.0      # counted in this repetition so far

    def check(self) -> None:
        perf_binary()
        check_permission(False)
        wanted = self.options.event
        if wanted in ("auto", "cycles"):
            if probe_events(["cycles"])["cycles"] == "ok":
                self.event = "cycles"
            elif wanted == "cycles":
                self.unsupported = ["cycles (sampling cpu-clock instead)"]
        if probe_events(["cpu-clock"])["cpu-clock"] != "ok" and self.event == "cpu-clock":
            raise Unavailable("perf cannot sample cpu-clock here")
        self.notes.append(f"perf-profile sampled {self.event} at {self.options.freq} Hz "
                          f"(metric names keep LKP's cycles-pp)")
        self.check_launch()

    def output_name(self, n: int) -> str:
        return f"perf-{n}.data"

    def perf_argv(self, output: Path, perf: str | None = None) -> list[str]:
        graph = ["-g"] if self.options.call_graph == "fp" else ["--call-graph", "dwarf"]
        # --no-buildid: perf script reads the file at once, on this machine, so the build-id pass
        # perf record makes at its end (hundreds of ms) buys nothing.
        return [perf or perf_binary(), "record", "-a", *graph, "-e", self.event, "-F", str(self.options.freq),
                "-q", "--no-buildid", "-o", str(output)]

    def begin(self, now: float, process: int | None) -> None:
        self._enable()

    def end(self, now: float) -> None:
        # One perf record per repetition, enabled only during its timed processes.
        if self._perf is not None:
            self._seconds += self._disable()

    def collect(self) -> Collected:
        if self._perf is None or self._seconds == 0:
            return Collected()
        seconds, self._seconds = self._seconds, 0.0
        data = self._finish()
        try:
            profile = reduce_profile(parse_perf_script(perf_script(perf_binary(), data)))
        finally:
            data.unlink(missing_ok=True)
            self._prelaunch()
        out = profile_samples(profile, self.options)
        out.append(informational("perf-profile.samples", profile.samples, ""))
        return Collected(samples=out, series=[(None, round(seconds, 6), symbol_row(profile, self.options))])

"""Counting a benchmark process's instructions under valgrind (`measure: instructions | cache`).

What this module knows: whether valgrind is here and which version; the argv that
puts one process under cachegrind (or callgrind, to count one function alone);
the fixed environment the counted process gets; how valgrind's output file
reads back as event totals; and what a failed start looks like. The family
side (which processes, which samples) is perflab.benchmarks.measured (the valgrind instrument).

Counts are facts of the program, the input, the libraries and the CPU features
glibc and valgrind pick code by — not of the machine's speed. docs/instructions.md.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from perflab.core.environment import dynamic_loader, hwcaps_from_diagnostics
from perflab.core.errors import PerflabError

MODES = ("instructions", "cache")
DEBIAN_PACKAGE = "valgrind"

# The counted process's whole environment: the variables that change what a program does
# (locale, time zone) are fixed, and only PATH and HOME come from the caller (programs must be
# found; configuration files are read from there). Everything else is left out, so that the
# environment's size — which moves the initial stack and with it every address — is the same
# for every run on a box. A family's own variables (ProcessSpec.env) are added to these.
FIXED = {"LANG": "C", "LC_ALL": "C", "TZ": "UTC"}
FROM_CALLER = ("PATH", "HOME")

# cachegrind's and callgrind's event names, as their output files' `events:` line gives them.
IR, I1MR, ILMR, DR, D1MR, DLMR, DW, D1MW, DLMW = "Ir", "I1mr", "ILmr", "Dr", "D1mr", "DLmr", "Dw", "D1mw", "DLmw"
# Cycles estimated from the counts as KCachegrind's "Cycle Estimation" derived event does
# (branch mispredictions left out: perflab does not ask for --branch-sim): an instruction costs 1,
# a first-level miss 10 more, a last-level miss 100 more. A model, not a measurement.
L1_MISS_CYCLES, LL_MISS_CYCLES = 10, 100
# The simulated caches (size,associativity,line size), the same on every box: left to itself
# cachegrind takes the host's from CPUID (on this VM a 256 MiB direct-mapped LL), and the miss
# counts would then compare machines instead of programs. A common desktop geometry.
CACHES = ("--I1=32768,8,64", "--D1=32768,8,64", "--LL=8388608,16,64")


@dataclass(frozen=True)
class Measure:
    """How a job's processes are counted: the mode, whether children are followed, one function alone."""

    mode: str                      # "instructions" or "cache"
    children: bool = False         # --trace-children=yes: count the programs it execs too
    function: str | None = None    # --toggle-collect=FUNCTION (callgrind): count only inside it

    @property
    def tool(self) -> str:
        # cachegrind 3.19 cannot count one function alone; callgrind can (--toggle-collect).
        return "callgrind" if self.function else "cachegrind"

    def describe(self) -> str:
        what = f"{self.tool} --cache-sim={'yes' if self.mode == 'cache' else 'no'}"
        if self.children:
            what += " --trace-children=yes"
        if self.function:
            what += f" --toggle-collect={self.function}"
        return f"{self.mode} (valgrind {what})"


def binary() -> str:
    """valgrind's path; a one-line PerflabError naming the Debian package when it is not installed."""
    path = shutil.which("valgrind")
    if path is None:
        raise PerflabError(f"counting instructions (measure:) needs valgrind, which is not installed "
                           f"(Debian package `{DEBIAN_PACKAGE}`: apt-get install {DEBIAN_PACKAGE})")
    return path


@lru_cache(maxsize=4)
def _version(path: str) -> str:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    except OSError as e:
        raise PerflabError(f"valgrind ({path}) does not run: {e.strerror}") from None
    text = out.stdout.strip()
    if out.returncode != 0 or not text:
        raise PerflabError(f"valgrind ({path}) does not run: {(out.stderr.strip() or 'no version').splitlines()[-1]}")
    return text.removeprefix("valgrind-")


def version() -> str:
    """valgrind's version, e.g. 3.19.0."""
    return _version(binary())


def argv(measure: Measure, out_prefix: Path, log: Path) -> list[str]:
    """What goes before the program's own argv: valgrind counting into `out_prefix`.<pid>."""
    tool = measure.tool
    words = [binary(), "-q", f"--tool={tool}", f"--cache-sim={'yes' if measure.mode == 'cache' else 'no'}",
             f"--{tool}-out-file={out_prefix}.%p", f"--log-file={log}",
             f"--trace-children={'yes' if measure.children else 'no'}"]
    if measure.mode == "cache":
        words += CACHES
    if measure.function:
        words.append(f"--toggle-collect={measure.function}")
    return [*words, "--"]


def environment(own: dict[str, str] | None) -> dict[str, str]:
    """The counted process's environment: FIXED, the caller's PATH and HOME, and the family's own variables."""
    env = {k: os.environ[k] for k in FROM_CALLER if k in os.environ}
    env.update(FIXED)
    if own is not None:
        # A family that passes a whole environment: only what it set itself is kept.
        env.update({k: v for k, v in own.items() if os.environ.get(k) != v})
    return env


def read_counts(path: Path) -> dict[str, int]:
    """The event totals of one cachegrind or callgrind output file ({} when it holds none)."""
    events: list[str] = []
    summary: list[str] = []
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith("summary:"):
                summary = line.split()[1:]
    if not events or not summary:
        return {}
    counts = {name: int(value) for name, value in zip(events, summary)}
    counts.update({name: 0 for name in events[len(summary):]})   # trailing zero events may be left out
    return counts


_COMPRESSED = re.compile(r"^\(\d+\)")


def read_functions(path: Path) -> dict[str, int]:
    """Instructions (Ir) per function of one cachegrind output file: the lines under each `fn=`
    summed, the function's inlined lines (`fi=`/`fe=`) included; {} for callgrind's or an empty file."""
    out: dict[str, int] = {}
    column = None
    function = None
    with open(path, errors="replace") as f:
        for line in f:
            if line[:1].isdigit():
                if function is not None and column is not None:
                    words = line.split()
                    if len(words) > column + 1:
                        out[function] = out.get(function, 0) + int(words[column + 1])
            elif line.startswith("fn="):
                function = line[3:].strip()
                if _COMPRESSED.match(function):    # callgrind's "(12) name": not read here
                    return {}
            elif line.startswith("events:"):
                events = line.split()[1:]
                column = events.index(IR) if IR in events else None
    return out


def outputs(out_prefix: Path) -> list[Path]:
    """The output files `out_prefix`.<pid> written (one per process counted)."""
    return [path for path in sorted(out_prefix.parent.glob(out_prefix.name + ".*"))
            if path.name[len(out_prefix.name) + 1:].isdigit()]


def collect(out_prefix: Path) -> list[dict[str, int]]:
    """The counts of every process that wrote `out_prefix`.<pid> (the process and its followed children)."""
    return [counts for counts in map(read_counts, outputs(out_prefix)) if counts]


def total(per_process: list[dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for counts in per_process:
        for name, value in counts.items():
            out[name] = out.get(name, 0) + value
    return out


def estimated_cycles(c: dict[str, int]) -> int:
    """Ir + 10·(I1mr + D1mr + D1mw) + 100·(ILmr + DLmr + DLmw) (see L1_MISS_CYCLES)."""
    l1 = c.get(I1MR, 0) + c.get(D1MR, 0) + c.get(D1MW, 0)
    ll = c.get(ILMR, 0) + c.get(DLMR, 0) + c.get(DLMW, 0)
    return c.get(IR, 0) + L1_MISS_CYCLES * l1 + LL_MISS_CYCLES * ll


_NOISE = re.compile(r"^--\d+-- warning: (L3 cache found|specified LL cache|simulated LL cache)")


def start_failure(stderr_tail: str, log: Path) -> str:
    """valgrind's own words on why it ran nothing (one line): its messages on stderr, else its log."""
    lines = [line.strip() for line in stderr_tail.splitlines() if line.strip().startswith("valgrind:")]
    if not lines:
        try:
            logged = log.read_text(errors="replace").splitlines()
        except OSError:
            logged = []
        lines = [line.strip() for line in logged if line.strip() and not _NOISE.match(line)]
    return lines[-1] if lines else "valgrind wrote no counts (it did not run the program)"


@lru_cache(maxsize=4)
def _probe(path: str, cache: bool) -> dict[str, str]:
    with tempfile.TemporaryDirectory(prefix="perflab-valgrind-probe-") as tmp:
        out = Path(tmp) / "probe.out"
        command = [path, "-q", "--tool=cachegrind", f"--cache-sim={'yes' if cache else 'no'}", *(CACHES if cache else ()),
                   f"--cachegrind-out-file={out}", f"--log-file={Path(tmp) / 'log'}"]
        facts = {}
        loader = dynamic_loader()
        target = [loader, "--list-diagnostics"] if loader else ["/bin/true"]
        try:
            done = subprocess.run([*command, *target], capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise PerflabError(f"valgrind ({path}) does not run here: {e}") from None
        if not out.exists():
            raise PerflabError(f"valgrind ({path}) does not run here: {start_failure(done.stderr, Path(tmp) / 'log')}")
        if loader and done.returncode == 0:
            facts["glibc_hwcaps_under_valgrind"] = hwcaps_from_diagnostics(done.stdout)
        if cache:
            desc = [line.split(":", 1)[1].strip() for line in out.read_text(errors="replace").splitlines()
                    if line.startswith("desc:")]
            facts["valgrind_caches"] = "; ".join(" ".join(d.split()) for d in desc) or "n/a"
        return facts


def probe(cache: bool) -> dict[str, str]:
    """What the counted program sees under valgrind: glibc's hwcaps there (valgrind's virtual CPU
    offers fewer features than the host's), and with the cache simulation the caches simulated.

    Runs valgrind once (about half a second), also proving that it runs here.
    """
    return dict(_probe(binary(), cache))

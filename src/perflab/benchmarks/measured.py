"""The valgrind instrument: a job's processes counted (`measure: instructions | cache`).

An instrument on the executor seam (perflab.execution.instruments): the runner's loop
asks it to wrap every recorded process of a repetition — valgrind's argv goes in front
through `execute(wrapper=)`, with address randomisation off and a fixed environment (the
untimed helpers, such as cmd's --prepare, start as they are) — and, after it ends, for its
samples: valgrind's output files become ordinary samples beside the family's own (wall and
CPU time are then the times under valgrind). The family itself knows nothing of it.

Metrics (unit and direction in METRICS): valgrind.instructions for every
counted process (its children included when they are followed); where one
repetition runs several recorded processes (the lmbench suite) each gets
valgrind.instructions.ITEM and the repetition's sum is valgrind.instructions.
`measure: cache` adds data reads and writes, first-level and last-level
misses and valgrind.estimated_cycles (execution.valgrind.estimated_cycles).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from perflab.execution import scratch
from perflab.execution.counted import TOTAL, UNIT, function_samples
from perflab.benchmarks.base import Metric, catalog_of
from perflab.core.environment import NA
from perflab.core.model import INFORMATIONAL, LOWER_IS_BETTER, Sample
from perflab.core.process import ProcessResult, ProcessSpec
from perflab.execution import valgrind
from perflab.execution.instruments import Instrument, Watch
from perflab.execution.valgrind import D1MR, D1MW, DLMR, DLMW, DR, DW, I1MR, ILMR, IR, Measure

# Every valgrind figure is exact by construction: the same program and input give the same count.
INSTRUCTIONS = Metric("valgrind.instructions", "instructions", LOWER_IS_BETTER,
                      "instructions executed, counted by valgrind (exact: the same program and input give the same count)",
                      exact=True)
PROCESSES = Metric("valgrind.processes", "processes", INFORMATIONAL,
                   "processes counted (the benchmark and the children followed)", exact=True)
CACHE = catalog_of(
    Metric("valgrind.data_reads", "reads", LOWER_IS_BETTER, "data reads (cachegrind Dr)", exact=True),
    Metric("valgrind.data_writes", "writes", LOWER_IS_BETTER, "data writes (cachegrind Dw)", exact=True),
    Metric("valgrind.I1_misses", "misses", LOWER_IS_BETTER, "first-level instruction cache misses (I1mr)", exact=True),
    Metric("valgrind.D1_misses", "misses", LOWER_IS_BETTER,
           "first-level data cache misses, reads and writes (D1mr + D1mw)", exact=True),
    Metric("valgrind.LL_misses", "misses", LOWER_IS_BETTER,
           "last-level cache misses, instructions and data (ILmr + DLmr + DLmw)", exact=True),
    Metric("valgrind.estimated_cycles", "cycles", LOWER_IS_BETTER,
           "Ir + 10 x first-level misses + 100 x last-level misses (a model, docs/instructions.md)", exact=True),
)


def metrics(measure: str | None) -> dict[str, Metric]:
    """The metrics a job measured this way adds to its family's catalog."""
    if measure is None:
        return {}
    base = catalog_of(INSTRUCTIONS, PROCESSES)
    return {**base, **CACHE} if measure == "cache" else base


def _figures(counts: dict[str, int], cache: bool) -> list[tuple[Metric, int]]:
    out = [(INSTRUCTIONS, counts.get(IR, 0))]
    if cache:
        m = CACHE
        out += [(m["valgrind.data_reads"], counts.get(DR, 0)), (m["valgrind.data_writes"], counts.get(DW, 0)),
                (m["valgrind.I1_misses"], counts.get(I1MR, 0)),
                (m["valgrind.D1_misses"], counts.get(D1MR, 0) + counts.get(D1MW, 0)),
                (m["valgrind.LL_misses"], counts.get(ILMR, 0) + counts.get(DLMR, 0) + counts.get(DLMW, 0)),
                (m["valgrind.estimated_cycles"], valgrind.estimated_cycles(counts))]
    return out


def _samples(figures: list[tuple[Metric, int]], suffix: str = "") -> list[Sample]:
    return [Sample(m.name + suffix, float(v), m.unit, m.direction, m.exact) for m, v in figures]


@dataclass
class _Counted:
    """One process started under valgrind: where its counts go."""

    prefix: Path
    log: Path
    suffix: str          # "" when it is the repetition's only recorded process, else ".ITEM"
    last: bool           # the repetition's last recorded process: the sum is stored with it


@dataclass(frozen=True)
class Valgrind(Instrument):
    """Count a job's recorded processes under valgrind: `measure: instructions | cache`, following
    the children they exec (`measure_children`), or one function alone (`measure_function`).
    Values are kept as the job wrote them; perflab.jobs.check_measure checks them."""

    name = "valgrind"
    mode: str | None = "instructions"
    children: bool = False
    function: str | None = None

    def keys(self) -> dict:
        # Written only when set, so a job without them has the JSON form it always had.
        return {k: v for k, v in (("measure", self.mode), ("measure_children", self.children),
                                  ("measure_function", self.function)) if v}

    def describe(self) -> str:
        return f"measure: {self.mode} (valgrind)"

    def metrics(self) -> dict[str, Metric]:
        return metrics(self.mode)

    def refusal(self, target, what: str) -> str | None:
        if all(target.offers(n) for n in self.requires):
            return None
        return (f"{what}: key 'measure' = {self.mode!r}: valgrind counts processes on this machine, not in "
                f"{target.describe()}; leave one of them out")

    def ready(self) -> None:
        valgrind.binary()     # looked for before the family builds anything: missing, one line

    def attach(self, what: str, warn=lambda message: None, target=None) -> Watch:
        return _ValgrindWatch(Measure(self.mode, bool(self.children), self.function))


class _ValgrindWatch(Watch):
    """One run's processes under valgrind: valgrind's output files become ordinary samples."""

    def __init__(self, measure: Measure):
        self.measure = measure
        # The measure is a parameter: runs counted under valgrind are their own series.
        self.params = {"measure": measure.mode, **({"measure_children": True} if measure.children else {}),
                       **({"measure_function": measure.function} if measure.function else {})}
        self.facts = facts(measure)
        self.workdir = Path(tempfile.mkdtemp(prefix="perflab-valgrind-", dir=scratch.directory()))  # reaped after a kill -9
        self._suffixes: dict[str, str] = {}
        self._last: str | None = None
        self._counted: _Counted | None = None      # the process now running (they run one at a time)
        self._sum: dict[str, int] | None = None
        self._serial = 0

    def begin(self, specs: list[ProcessSpec]) -> None:
        # The previous round's files were read when its processes ended (or were warm-ups).
        for path in self.workdir.glob("*"):
            path.unlink(missing_ok=True)
        recorded = [s.item for s in specs if s.record]
        self._suffixes = {item: "" if len(recorded) == 1 else "." + _metric_word(item) for item in recorded}
        self._last = recorded[-1] if recorded else None
        self._sum = {}

    def wrap(self, spec: ProcessSpec) -> tuple[ProcessSpec, list[str]]:
        if not spec.record:
            self._counted = None      # the untimed helpers (cmd's --prepare) start as they are
            return spec, []
        self._serial += 1
        counted = _Counted(self.workdir / f"p{self._serial}", self.workdir / f"p{self._serial}.log",
                           self._suffixes.get(spec.item, "." + _metric_word(spec.item)), spec.item == self._last)
        self._counted = counted
        return (replace(spec, env=valgrind.environment(spec.env), no_aslr=True),
                valgrind.argv(self.measure, counted.prefix, counted.log))

    def judge(self, spec: ProcessSpec, result: ProcessResult) -> str | None:
        counted = self._counted
        if counted is None or result.interrupted or result.timed_out:
            return None
        if not valgrind.outputs(counted.prefix):
            self._sum = None
            return f"{spec.item}: valgrind did not run it: {valgrind.start_failure(result.stderr_tail, counted.log)}"
        if self.measure.function and not valgrind.total(valgrind.collect(counted.prefix)).get(valgrind.IR):
            # callgrind counts nothing for a pattern no function matched: a misspelled name
            # must not be stored as a finished run of 0 instructions (issue 31, M4).
            self._sum = None
            return (f"{spec.item}: measure_function {self.measure.function!r} counted no instruction: no "
                    "function of that name ran (misspelled, never called, or inlined away)")
        return None

    def failed(self, spec: ProcessSpec) -> None:
        self._sum = None     # a repetition with a failed process has no total

    def samples(self, spec: ProcessSpec, result: ProcessResult) -> list[Sample]:
        counted = self._counted
        if counted is None:
            return []
        per_process = valgrind.collect(counted.prefix)
        if not per_process:
            return []          # judge() said why (a family that stops at a failure still parses it)
        counts = valgrind.total(per_process)
        if self.measure.function and not counts.get(valgrind.IR):
            return []          # judge() said why: no function of that name ran
        cache = self.measure.mode == "cache"
        samples = _samples(_figures(counts, cache), counted.suffix)
        if self.measure.children or len(per_process) > 1:    # forked children are counted too
            samples.append(Sample(PROCESSES.name + counted.suffix, float(len(per_process)), PROCESSES.unit,
                                  PROCESSES.direction, PROCESSES.exact))
        if not counted.suffix and not self.measure.function:
            samples += _function_samples(counted.prefix, counts.get(valgrind.IR, 0))
        if counted.suffix and self._sum is not None:
            self._sum = valgrind.total([self._sum, counts])
            if counted.last:
                samples += _samples(_figures(self._sum, cache))
        return samples

    def close(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)


# A function is stored from this share of the process's instructions up (the rest as [other]).
FUNCTION_FLOOR = 0.1


def _function_samples(prefix: Path, total: int) -> list[Sample]:
    """Instructions per function of a job's one recorded process (its children's too), under the
    names insn-profile stores a guest's kernel functions with (perflab.execution.counted), so
    `perflab report profile` diffs them alike."""
    functions: dict[str, int] = {}
    for path in valgrind.outputs(prefix):
        for name, n in valgrind.read_functions(path).items():
            functions[name] = functions.get(name, 0) + n
    if not functions or not total:
        return []
    return [Sample(TOTAL, float(total), UNIT, INFORMATIONAL, exact=True),
            *function_samples(functions, total, FUNCTION_FLOOR, exact=True)]


def _metric_word(item: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.\-]+", "_", item).strip("_") or "process"


def facts(measure: Measure) -> dict:
    """What the counts depend on, recorded with the run (valgrind probed once: it runs here)."""
    out = {
        "measure": measure.describe(),
        "valgrind_version": valgrind.version(),
        "benchmark_aslr": "off (personality ADDR_NO_RANDOMIZE; counted under valgrind)",
        "measure_env": " ".join(f"{k}={v}" for k, v in sorted(valgrind.environment(None).items())),
    }
    out.update(valgrind.probe(measure.mode == "cache"))
    out.setdefault("glibc_hwcaps_under_valgrind", NA)
    return out

"""Any family's session, its processes counted under valgrind (`measure: instructions | cache`).

The runner wraps a family's session in a MeasuredSession when the job says
`measure`: every recorded process of a repetition starts under valgrind (the
untimed helpers, such as cmd's --prepare, start as they are), with address
randomisation off and a fixed environment; after it ends, valgrind's output
files become ordinary samples beside the family's own (wall and CPU time are
then the times under valgrind). The family itself knows nothing of it.

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
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from perflab.execution import scratch
from perflab.benchmarks.base import Metric, Session, catalog_of
from perflab.core.environment import NA
from perflab.core.errors import PerflabError
from perflab.core.model import INFORMATIONAL, LOWER_IS_BETTER, Sample
from perflab.core.process import ProcessResult, ProcessSpec
from perflab.execution import valgrind
from perflab.execution.valgrind import D1MR, D1MW, DLMR, DLMW, DR, DW, I1MR, ILMR, IR, Measure

INSTRUCTIONS = Metric("valgrind.instructions", "instructions", LOWER_IS_BETTER,
                      "instructions executed, counted by valgrind (exact: the same program and input give the same count)")
PROCESSES = Metric("valgrind.processes", "processes", INFORMATIONAL, "processes counted (the benchmark and the children followed)")
CACHE = catalog_of(
    Metric("valgrind.data_reads", "reads", LOWER_IS_BETTER, "data reads (cachegrind Dr)"),
    Metric("valgrind.data_writes", "writes", LOWER_IS_BETTER, "data writes (cachegrind Dw)"),
    Metric("valgrind.I1_misses", "misses", LOWER_IS_BETTER, "first-level instruction cache misses (I1mr)"),
    Metric("valgrind.D1_misses", "misses", LOWER_IS_BETTER, "first-level data cache misses, reads and writes (D1mr + D1mw)"),
    Metric("valgrind.LL_misses", "misses", LOWER_IS_BETTER, "last-level cache misses, instructions and data (ILmr + DLmr + DLmw)"),
    Metric("valgrind.estimated_cycles", "cycles", LOWER_IS_BETTER,
           "Ir + 10 x first-level misses + 100 x last-level misses (a model, docs/instructions.md)"),
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
    return [Sample(m.name + suffix, float(v), m.unit, m.direction) for m, v in figures]


@dataclass
class _Counted:
    """One process started under valgrind: where its counts go, and the repetition's other processes."""

    prefix: Path
    log: Path
    suffix: str          # "" when it is the repetition's only recorded process, else ".ITEM"
    last: bool           # the repetition's last recorded process: the sum is stored with it


class MeasuredSession(Session):
    """A family's session whose recorded processes run under valgrind; everything else is the family's."""

    def __init__(self, inner: Session, measure: Measure, workdir: Path):
        self.inner, self.measure, self.workdir = inner, measure, workdir
        # The family's own dicts, extended: what the runner stores with the run is the family's plus
        # the measure. The measure is a parameter: runs counted under valgrind are their own series.
        inner.params.update({"measure": measure.mode}, **({"measure_children": True} if measure.children else {}),
                            **({"measure_function": measure.function} if measure.function else {}))
        inner.facts.update(facts(measure))
        super().__init__(name=inner.name, params=inner.params, facts=inner.facts,
                         build_failures=inner.build_failures)
        self._counted: dict[int, tuple[ProcessSpec, _Counted]] = {}
        self._sum: dict[str, int] | None = None
        self._serial = 0

    def __getattr__(self, name):
        # What the runner does not ask of a session (cmd's `command`) is the family session's.
        return getattr(self.inner, name)

    def processes(self, repetition: int) -> list[ProcessSpec]:
        specs = self.inner.processes(repetition)
        # The previous round's files were read when its processes ended (or were warm-ups).
        for path in self.workdir.glob("*"):    # (gone once the session ended: then nothing to clear)
            path.unlink(missing_ok=True)
        self._counted.clear()
        self._sum = {}
        recorded = [s for s in specs if s.record]
        out = []
        for spec in specs:
            if not spec.record:
                out.append(spec)
                continue
            self._serial += 1
            counted = _Counted(self.workdir / f"p{self._serial}", self.workdir / f"p{self._serial}.log",
                               "" if len(recorded) == 1 else "." + _metric_word(spec.item), spec is recorded[-1])
            wrapped = replace(spec, argv=[*valgrind.argv(self.measure, counted.prefix, counted.log), *spec.argv],
                              env=valgrind.environment(spec.env), no_aslr=True)
            self._counted[id(wrapped)] = (wrapped, counted)
            out.append(wrapped)
        return out

    def judge(self, spec: ProcessSpec, result: ProcessResult) -> str | None:
        entry = self._counted.get(id(spec))
        if entry is not None and not (result.interrupted or result.timed_out):
            counted = entry[1]
            if not valgrind.outputs(counted.prefix):
                self._sum = None
                return f"{spec.item}: valgrind did not run it: {valgrind.start_failure(result.stderr_tail, counted.log)}"
            if self.measure.function and not valgrind.total(valgrind.collect(counted.prefix)).get(valgrind.IR):
                # callgrind counts nothing for a pattern no function matched: a misspelled name
                # must not be stored as a finished run of 0 instructions (issue 31, M4).
                self._sum = None
                return (f"{spec.item}: measure_function {self.measure.function!r} counted no instruction: no "
                        "function of that name ran (misspelled, never called, or inlined away)")
        why = self.inner.judge(spec, result)
        if why is not None:
            self._sum = None     # a repetition with a failed process has no total
        return why

    def parse(self, spec: ProcessSpec, result: ProcessResult) -> list[Sample]:
        samples = self.inner.parse(spec, result)
        entry = self._counted.get(id(spec))
        if entry is None:
            return samples
        counted = entry[1]
        per_process = valgrind.collect(counted.prefix)
        if not per_process:
            return samples     # judge() said why (a family that stops at a failure still parses it)
        counts = valgrind.total(per_process)
        if self.measure.function and not counts.get(valgrind.IR):
            return samples     # judge() said why: no function of that name ran
        cache = self.measure.mode == "cache"
        samples += _samples(_figures(counts, cache), counted.suffix)
        if self.measure.children or len(per_process) > 1:    # forked children are counted too
            samples.append(Sample(PROCESSES.name + counted.suffix, float(len(per_process)), PROCESSES.unit,
                                  PROCESSES.direction))
        if counted.suffix and self._sum is not None:
            self._sum = valgrind.total([self._sum, counts])
            if counted.last:
                samples += _samples(_figures(self._sum, cache))
        return samples


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


@contextmanager
def measuring(job, session: AbstractContextManager[Session]) -> Iterator[Session]:
    """The family's session (a context manager), wrapped when `job` (an AtomicJob) says `measure`.

    Valgrind is looked for before the family builds anything: missing, it is a one-line error.
    """
    if job.measure is None:
        with session as s:
            yield s
        return
    if job.in_guest:
        raise PerflabError(f"{job.benchmark}: measure: {job.measure} counts processes on this machine, not in a guest")
    measure = Measure(job.measure, bool(job.measure_children), job.measure_function)
    valgrind.binary()
    with session as s:
        workdir = Path(tempfile.mkdtemp(prefix="perflab-valgrind-", dir=scratch.directory()))   # reaped after a kill -9
        try:
            yield MeasuredSession(s, measure, workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

"""The `lmbench` family: build each C program, run it in separate processes,
parse its JSON lines into samples.

One `perflab run lmbench` is one run. A repetition is one round: each
selected program runs once, in its own process (a program the mode caps at
fewer processes sits out the later rounds), so that per-process effects
(address layout, page placement, the CPU a process lands on) are part of the
spread and slow drift of the machine hits every program alike. A program that
cannot be built, crashes, exits non-zero, exceeds its timeout or prints
something that is not one of its figures is recorded by the runner as a
failure of that program (named) and skipped from then on; the rest of the
suite goes on and the run ends "partial".
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import Field, field_validator

from perflab.execution import scratch
from perflab.core import cbuild
from perflab.benchmarks import protocol
from perflab.benchmarks.base import Family, ItemFailed, Metric, Params, Session
from perflab.benchmarks.lmbench import catalog
from perflab.core.errors import UsageProblem
from perflab.core.model import Sample
from perflab.core.process import ProcessResult, ProcessSpec
from perflab.execution.workdir import filesystem_of

SOURCE_DIR = Path(__file__).parent / "c"
FLAGS = cbuild.DEFAULT_FLAGS
TINY_ENV = "PERFLAB_LMBENCH_TINY"        # tiny sizes and counts: the test suite's knob
TIMEOUT_ENV = "PERFLAB_LMBENCH_TIMEOUT"  # seconds per program execution (overrides the mode's)


@dataclass(frozen=True)
class Mode:
    name: str
    processes: int      # separate executions of every program
    samples: int        # samples per figure per execution
    target_ms: float    # length of one timed sample
    timeout: float      # seconds one execution of one program may take
    extra: tuple[str, ...] = ()
    # programs run in fewer processes than `processes` (never fewer than two)
    process_caps: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        # every figure's samples come from at least two separate processes
        for program, cap in self.process_caps:
            if cap < 2:
                raise ValueError(f"mode {self.name}: {program} capped at {cap} process(es); at least 2")

    def processes_of(self, program: str) -> int:
        return min(self.processes, dict(self.process_caps).get(program, self.processes))


# lat_fs in --quick: two processes, not four.  Its sample is at least one batch
# of 1,000 files whatever the target length, and creating a file on a slow disk
# costs up to a millisecond, so four processes alone took 40 s of a 75 s run.
QUICK = Mode("quick", processes=4, samples=3, target_ms=10, timeout=120, process_caps=(("lat_fs", 2),))
FULL = Mode("full", processes=5, samples=5, target_ms=50, timeout=900)
TINY = Mode("tiny", processes=2, samples=1, target_ms=0.5, timeout=120, extra=("-T",))


def mode_for(quick: bool) -> Mode:
    if os.environ.get(TINY_ENV, "") not in ("", "0"):
        return TINY
    return QUICK if quick else FULL


def parse_only(values: Iterable[str]) -> list[str]:
    """--only values (repeatable and/or comma-separated) -> categories in suite order.

    An unknown category raises UsageProblem listing the valid ones.
    """
    wanted: list[str] = []
    for value in values:
        for part in value.split(","):
            part = part.strip()
            if not part:
                continue
            if part not in catalog.CATEGORIES:
                raise UsageProblem(f"--only: unknown category {part!r}; valid categories: {', '.join(catalog.CATEGORIES)}")
            wanted.append(part)
    return [c for c in catalog.CATEGORIES if c in wanted]


class ProgramFailed(ItemFailed):
    """One execution of one program went wrong; the message names the program."""


def parse_output(program: str, text: str) -> list[Sample]:
    """A program's JSON lines -> samples, with the catalog's unit and direction.

    Anything that is not one of the program's own figures in its unit, with a
    finite value, is garbage: ProgramFailed naming the program and the line.
    """
    expected = {m: catalog.FIGURES[m].unit for m in catalog.metrics_of_program(program)}
    return [Sample(line.metric, float(line.value), line.unit, catalog.FIGURES[line.metric].direction)
            for line in protocol.read(program, text, expected, ProgramFailed)]



class LmbenchParams(Params):
    quick: bool = Field(False, description="fewer, shorter samples (under a minute)")
    only: list[str] | None = Field(None, description=f"categories to run: {', '.join(catalog.CATEGORIES)}")

    @field_validator("only", mode="before")
    @classmethod
    def _only(cls, v):
        if v is None:
            return None
        values = [v] if isinstance(v, str) else list(v)
        return parse_only(values) or None


class LmbenchSession(Session):
    def __init__(self, params: LmbenchParams, job: dict, workdir: str):
        self.mode = mode_for(params.quick)
        self.programs = catalog.programs_of(params.only or list(catalog.CATEGORIES))
        env_timeout = os.environ.get(TIMEOUT_ENV)
        self.timeout = float(job.get("timeout") or env_timeout or self.mode.timeout)
        self.workdir = workdir
        self.binaries: dict[str, Path] = {}
        stored: dict = {"quick": bool(params.quick)}
        if params.only:
            stored["only"] = list(params.only)
        if self.mode is TINY:
            stored["tiny"] = True
        tmp_parent = os.path.dirname(workdir)
        facts = {"cc_flags": " ".join(FLAGS), "lmbench_tmpdir": tmp_parent,
                 "lmbench_tmpdir_fs": filesystem_of(tmp_parent)[0],
                 "placement": "each program pinned to the first CPU it may use"}
        try:
            facts["cc_path"] = cbuild.compiler().path
        except cbuild.BuildError:
            facts["cc_path"] = "n/a"
        super().__init__(name="lmbench", params=stored, facts=facts)

    def build(self) -> None:
        for program in self.programs:
            try:
                self.binaries[program] = cbuild.build(program, SOURCE_DIR, flags=FLAGS)
            except cbuild.BuildError as e:
                self.build_failures[program] = str(e)

    def processes(self, repetition: int) -> list[ProcessSpec]:
        args = ["-n", str(self.mode.samples), "-t", f"{self.mode.target_ms:g}", "-d", self.workdir, *self.mode.extra]
        return [ProcessSpec([str(binary), *args], item=program, cwd=self.workdir, timeout=self.timeout)
                for program, binary in self.binaries.items() if repetition < self.mode.processes_of(program)]

    def parse(self, spec: ProcessSpec, result: ProcessResult) -> list[Sample]:
        samples = parse_output(spec.item, result.stdout)
        missing = [m for m in catalog.metrics_of_program(spec.item) if not any(s.metric == m for s in samples)]
        if missing:
            raise ProgramFailed(f"{spec.item}: printed no value for {', '.join(missing)}")
        return samples


class LmbenchFamily(Family):
    name = "lmbench"
    summary = "LMbench-class OS microbenchmarks (the LMbench 2.0 summary's figures)"
    Params = LmbenchParams
    duration_params = frozenset({"quick", "only"})

    def metrics(self, params: LmbenchParams) -> dict[str, Metric]:
        wanted = set(catalog.programs_of(params.only or list(catalog.CATEGORIES)))
        return {name: Metric(name, f.unit, f.direction) for name, f in catalog.FIGURES.items()
                if any(name in catalog.metrics_of_program(p) for p in wanted)}

    def runs_for(self, params: LmbenchParams) -> int:
        return mode_for(params.quick).processes

    @contextmanager
    def session(self, params: LmbenchParams, job: dict) -> Iterator[LmbenchSession]:
        workdir = tempfile.mkdtemp(prefix="perflab-lmbench-", dir=scratch.directory())   # reaped after a kill -9
        try:
            session = LmbenchSession(params, job, workdir)
            session.build()
            yield session
        finally:
            shutil.rmtree(workdir, ignore_errors=True)


FAMILY = LmbenchFamily()

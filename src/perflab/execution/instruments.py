"""What watches a job's processes: instruments, on the executor's wrapper and hooks seam.

An instrument (valgrind's instruction counts, the /proc and perf monitors; docs/architecture.md)
is attached to one atomic job's run by the runner's one loop, which asks every instrument the
same questions and knows none by name:

    watch = instrument.attach(what, target=) per run (in the job's target): its params and facts
    watch.stored(store, run_id)              at the run's start and end (what it records of itself)
    watch.begin(specs)                       a repetition's processes, before the first starts
    spec, wrapper = watch.wrap(spec)         put in front of a recorded process: execute(wrapper=)
    watch.hooks(index)                       run just before / after a timed process
    watch.judge(spec, result)                why its figures of the process are not to be kept
    watch.failed(spec)                       the process failed (the family or an instrument said why)
    watch.samples(spec, result)              its figures of the process, beside the family's
    watch.repetition(rep) -> Figures         its figures of a whole repetition (monitors' series)
    watch.close()

Where a job runs, an instrument must be able to run: `check` is the one place an instrument
is checked against a target (and the job's family), before anything is built or booted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import ClassVar

from perflab.core.errors import PerflabError
from perflab.core.model import Sample
from perflab.core.process import ProcessResult, ProcessSpec
from perflab.execution.targets import HOST_PROCESSES


@dataclass
class Figures:
    """An instrument's figures of one repetition: samples, and time series by name."""

    samples: list[Sample] = field(default_factory=list)
    series: dict[str, list] = field(default_factory=dict)


class Watch:
    """One instrument attached to one run; every step does nothing unless the instrument says."""

    # Read-only empties here: a watch that adds to the run's parameters or facts sets its own.
    params: Mapping = MappingProxyType({})   # stored with the run's parameters: runs watched so are their own series
    facts: Mapping = MappingProxyType({})    # recorded in the run's environment

    def stored(self, store, run_id: int) -> None:
        pass

    def begin(self, specs: list[ProcessSpec]) -> None:
        pass

    def wrap(self, spec: ProcessSpec) -> tuple[ProcessSpec, list[str]]:
        return spec, []

    def hooks(self, index: int):
        return None

    def judge(self, spec: ProcessSpec, result: ProcessResult) -> str | None:
        return None

    def failed(self, spec: ProcessSpec) -> None:
        """The process failed (the family's judge or an instrument's said why)."""

    def samples(self, spec: ProcessSpec, result: ProcessResult) -> list[Sample]:
        return []

    def repetition(self, repetition: int) -> Figures:
        return Figures()

    def close(self) -> None:
        pass


class Instrument:
    """What watches processes. Subclasses are frozen dataclasses (a job's typed `instruments`)."""

    name: ClassVar[str]
    # What it asks of the place the processes run (perflab.execution.targets' capabilities), which
    # the target offers or not: by default this machine's processes (valgrind wraps them here).
    requires: ClassVar[frozenset[str]] = frozenset({HOST_PROCESSES})

    def keys(self) -> dict:
        """The atomic job's JSON keys this instrument is written as."""
        return {}

    def describe(self) -> str:
        return self.name

    def needs(self) -> frozenset[str]:
        """What it needs of the job's target (perflab.execution.targets' capabilities)."""
        return frozenset()

    def metrics(self) -> dict:
        """The metrics (name -> perflab.benchmarks.base.Metric) it adds to the family's catalog."""
        return {}

    def refusal(self, target, what: str) -> str | None:
        """Why it cannot watch a job running in `target` (one line), or None."""
        if all(target.offers(n) for n in self.requires):
            return None
        return (f"{what}: {self.describe()} watches processes on this machine, not in {target.describe()}; "
                "leave one of them out")

    def ready(self) -> None:
        """Before the family builds anything: PerflabError when it cannot run here (missing tool)."""

    def attach(self, what: str, warn=lambda message: None, target=None) -> Watch:
        """What watches one run of the job; `target` is where its processes run."""
        return Watch()


def check(instruments, target, what: str) -> None:
    """The one place instruments are checked against the job's target: one line when one cannot run there."""
    for instrument in instruments:
        why = instrument.refusal(target, what)
        if why:
            raise PerflabError(why)

"""The family interface: what a benchmark family tells the one runner.

A family is a plug-in. It declares its parameters (a pydantic model; which of
them only change how long a run takes), its metric catalog (LKP-style names,
unit, direction), how its C programs are built, the processes one repetition
of an atomic job runs, and how their output becomes samples. It knows
nothing of the store, the progress bar, repetitions or other families: the
runner (perflab.runner.loop) owns all of that.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from perflab.benchmarks import DEFAULT_NEEDS, DURATION_PARAMS, NEEDS, RUN_DURATION, SECONDARY_METRICS
from perflab.execution import targets
from perflab.core import cbuild
from perflab.core.errors import PerflabError, UsageProblem
from perflab.core.model import LOWER_IS_BETTER
from perflab.core.params import cpu_percent
from perflab.core.text import brief

from perflab.core.model import Sample
from perflab.core.process import ProcessResult, ProcessSpec


@dataclass(frozen=True)
class Metric:
    name: str        # "suite.metric", as LKP names them
    unit: str
    direction: int   # +1 higher is better, -1 lower is better, 0 informational
    description: str = ""
    exact: bool = False  # exact by construction (an instruction count): perflab.core.model.Sample.exact

    def sample(self, value: float) -> Sample:
        """One value of this metric, with the catalog's unit, direction and exactness."""
        return Sample(self.name, value, self.unit, self.direction, self.exact)


def catalog_of(*metrics: Metric) -> dict[str, Metric]:
    """A metric catalog: the metrics by name, in order."""
    return {m.name: m for m in metrics}


def cpu_time_metrics(user: str, system: str, whose: str = "") -> tuple[Metric, Metric]:
    """The user and system CPU times the launcher measures (wait4), named `user` and `system`."""
    of = f" {whose}" if whose else ""
    return (Metric(user, "s", LOWER_IS_BETTER, f"user CPU time{of} (wait4)"),
            Metric(system, "s", LOWER_IS_BETTER, f"system CPU time{of} (wait4)"))


def task_count(v, field: str, noun: str, low: int, high: int) -> int:
    """A count of tasks given as a number or N% of the online CPUs, from low to high (a parameter validator)."""
    v = cpu_percent(v, field)
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"{v!r} is not a whole number of {noun}")
    if not low <= v <= high:
        raise ValueError(f"must be between {low} and {high}")
    return v


class Params(BaseModel):
    """Base of every family's parameter model: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ItemFailed(Exception):
    """One process of a repetition went wrong (crash, garbage, timeout); the message names the item."""


# What happens when an item fails: "skip" records it, skips that item from then
# on and lets the rest go on (a suite: the run ends partial); "stop" ends the
# run failed (one command: later repetitions would not be comparable).
SKIP, STOP = "skip", "stop"


@dataclass
class Session:
    """One atomic job made ready to run: binaries built, directories made.

    `build_failures` are items that could not be prepared (a program that did
    not compile); the runner records them and runs the rest.
    """

    name: str                                   # the run's name in the log
    params: dict                                # resolved parameters, as stored with the run
    facts: dict = field(default_factory=dict)   # environment facts this family adds
    build_failures: dict[str, str] = field(default_factory=dict)

    def processes(self, repetition: int) -> list[ProcessSpec]:
        """The processes of one repetition, in order; each ProcessSpec.item names it."""
        raise NotImplementedError

    def judge(self, spec: ProcessSpec, result: ProcessResult) -> str | None:
        """Why this process counts as failed (None: it did not). Default: non-zero exit or timeout."""
        if result.ok:
            return None
        return f"{spec.item}: {result.describe_failure(spec.timeout)}"

    def parse(self, spec: ProcessSpec, result: ProcessResult) -> list[Sample]:
        """The samples a finished process produced; ItemFailed for garbage, PerflabError for bad input."""
        raise NotImplementedError


class Family:
    """A benchmark family: subclass it and register the subclass in benchmarks.FAMILIES.

    What most families only declare are class attributes: `default_runs`, the
    metric `catalog`, and for a family whose session is "build one C program,
    hand it to a Session", `program` (with `source_dir`, `build_flags`,
    `build_libs`) and `session_class`. A family whose catalog or session
    depends on its parameters overrides `metrics`, `runs_for` or `session`.
    """

    name: ClassVar[str]
    summary: ClassVar[str]
    Params: ClassVar[type[Params]]
    # Parameters that only change how long a run takes: `compare` ignores them when it matches groups.
    # A registered family's are declared in perflab.benchmarks.DURATION_PARAMS (read without
    # importing the family); another (a test's) may list its own here. Runs, warmup and timeout
    # (RUN_DURATION) are added to every family's.
    duration_params: ClassVar[frozenset[str]] = RUN_DURATION
    failure_policy: ClassVar[str] = SKIP
    # A round's processes are independent of one another (none reads what another left, none
    # waits for another): a place of several machines may run them side by side (issue 47).
    independent_processes: ClassVar[bool] = False
    # Its repetitions are independent of one another: what one runs does not depend on what an
    # earlier one measured (no stopping rule), none reads what another left or waits for another,
    # and a process leaves nothing running behind it. A job of a fixed count of them, alone in its
    # batch, with no warm-up and no instrument, may run them side by side (issue 47, docs/vm.md).
    independent_repetitions: ClassVar[bool] = False
    # Axes a job gets when it does not name the parameter (kernbench: both loads, as kernbench runs).
    default_axes: ClassVar[dict[str, list]] = {}
    # Metrics that describe the harness's view of a process rather than the benchmark's result.
    secondary_metrics: ClassVar[frozenset[str]] = frozenset()   # a registered family's: SECONDARY_METRICS
    # Repetitions when the job does not say.
    default_runs: ClassVar[int] = 1
    # The metric catalog, when it does not depend on the parameters.
    catalog: ClassVar[dict[str, Metric]] = {}
    # The default session: build `program` from source_dir/<program>.c, yield session_class(params, job, binary).
    program: ClassVar[str | None] = None
    source_dir: ClassVar[Path | None] = None
    build_flags: ClassVar[tuple[str, ...]] = ("-O2",)
    build_libs: ClassVar[tuple[str, ...]] = ()
    session_class: ClassVar[type[Session] | None] = None
    # What the family needs of the place it runs in (perflab.execution.targets: a target that
    # lacks one refuses the job in one line). Most run perflab's own C programs; a registered
    # family's are declared in perflab.benchmarks.NEEDS (read without importing the family).
    needs: ClassVar[frozenset[str]] = DEFAULT_NEEDS

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        declared = DURATION_PARAMS.get(cls.__dict__.get("name", ""))
        cls.duration_params = RUN_DURATION | (declared if declared is not None else cls.duration_params)
        cls.secondary_metrics = SECONDARY_METRICS.get(cls.__dict__.get("name", ""), cls.secondary_metrics)
        cls.needs = NEEDS.get(cls.__dict__.get("name", ""), cls.needs)
        unknown = cls.needs - set(targets.CAPABILITIES)
        if unknown:
            raise TypeError(f"{cls.__name__}.needs: {sorted(unknown)} are no target capabilities")

    def metrics(self, params: Params) -> dict[str, Metric]:
        """The metric catalog (for these parameters)."""
        return dict(self.catalog)

    def runs_for(self, params: Params) -> int:
        """Repetitions when the job does not say (for these parameters)."""
        return self.default_runs

    def parse_params(self, raw: dict, where: str = "") -> Params:
        """Validate raw parameters; PerflabError naming the key and the valid values."""
        return validate_params(self, raw, where)

    def after_jobs(self, outcomes: list, add_samples) -> None:
        """Figures that need several atomic jobs of one invocation (e.g. scalability over a task sweep).

        `outcomes` are this family's finished jobs (runner.loop.JobOutcome); `add_samples(outcome,
        repetition, samples)` stores more samples in an outcome's run. Default: nothing.
        """

    @contextmanager
    def session(self, params: Params, job: dict) -> Iterator[Session]:
        """Build and set up what the atomic `job` needs; undo the set-up on leaving (also on failure).

        Default: build `program` and hand it to `session_class`; nothing to undo.
        """
        if self.program is None or self.session_class is None:
            raise NotImplementedError
        binary = cbuild.build(self.program, self.source_dir, flags=self.build_flags, libs=self.build_libs)
        yield self.session_class(params, job, binary)


def job_timeout(job: dict, default: float) -> float:
    """The job's timeout in seconds, or the family's default when it gives none."""
    return float(job.get("timeout") or default)


class JobError(UsageProblem):
    """A job file or a family's parameters are wrong; the message names file, line and key."""


def validate_params(family, raw: dict, where: str = ""):
    """Raw parameters -> the family's model; JobError naming the key, and the valid keys or values."""
    prefix = f"{where}: " if where else ""
    fields = family.Params.model_fields
    for key in raw:
        if key not in fields:
            raise JobError(f"{prefix}unknown parameter {key!r} for {family.name}; valid: {', '.join(fields)}")
    try:
        return family.Params(**raw)
    except ValidationError as e:
        err = e.errors()[0]
        key = ".".join(str(p) for p in err["loc"]) or "(parameters)"
        value = raw.get(err["loc"][0]) if err["loc"] else None
        message = err["msg"].removeprefix("Value error, ")
        shown = f" = {brief(value)}" if value is not None else ""
        raise JobError(f"{prefix}{family.name} parameter {key}{shown}: {message}") from None
    except PerflabError as e:
        raise JobError(f"{prefix}{e}") from None

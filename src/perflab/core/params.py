"""Parameter values as users write them (`50%` of the CPUs, a command-line value read as YAML) and their ranges."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar


# How many CPUs the job being made will run on, while its parameters are parsed and its
# session is entered: None is this process's own (the host's affinity); a job in a VM guest
# sets its vCPU count (perflab.jobs.resolve, the Qemu target: perflab.execution.targets.qemu), so
# `nr_task: 50%` and the families' per-CPU defaults mean the guest's CPUs, not the host's.
_JOB_CPUS: ContextVar[int | None] = ContextVar("perflab_job_cpus", default=None)


@contextmanager
def _within(var: ContextVar, value) -> Iterator[None]:
    """`var` is `value` within the block, as it was after."""
    token = var.set(value)
    try:
        yield
    finally:
        var.reset(token)


def job_cpus(count: int | None) -> AbstractContextManager[None]:
    """Within the block, the job's CPUs are `count` (a guest's vCPUs); None: the host's."""
    return _within(_JOB_CPUS, count)


# Whether the durations the job being made will measure are exact by construction: a guest
# under icount counts instruction-time (its target says so while the session is entered), so
# a family that stops repeating once a figure is known (lmbench) may stop at one agreement.
_TIME_EXACT: ContextVar[bool] = ContextVar("perflab_time_exact", default=False)


def job_time_exact(exact: bool) -> AbstractContextManager[None]:
    """Within the block, the job's durations are exact by construction (instruction-time) or not."""
    return _within(_TIME_EXACT, bool(exact))


def time_is_exact() -> bool:
    """Whether the job being made measures exact durations (see job_time_exact)."""
    return _TIME_EXACT.get()


# The machine the job being made runs on when it is another one (an SSH machine: its programs, its
# PATH, its kernel's settings are its own), or None: this machine, or a guest booted here (whose
# root is this machine's). A family then neither looks its programs up here nor changes this
# machine's settings for it.
_FAR_MACHINE: ContextVar[str | None] = ContextVar("perflab_far_machine", default=None)


def job_machine(name: str | None) -> AbstractContextManager[None]:
    """Within the block, the job runs on the machine `name` (None: here)."""
    return _within(_FAR_MACHINE, name)


def far_machine() -> str | None:
    """The other machine the job being made runs on (see job_machine), or None."""
    return _FAR_MACHINE.get()


def cpu_ids() -> list[int]:
    """The CPU numbers the job's tasks may run on: the host's affinity, or a guest's 0..N-1."""
    count = _JOB_CPUS.get()
    return list(range(count)) if count is not None else sorted(os.sched_getaffinity(0))


def cpus_available() -> int:
    """How many CPUs the job's tasks may run on (see cpu_ids)."""
    return len(cpu_ids())


def cpu_percent(value, key: str) -> int:
    """'50%' -> half the job's CPUs (at least 1; see cpus_available); ints pass through."""
    if isinstance(value, str):
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*%\s*", value)
        if not m:
            raise ValueError(f"{value!r} is not a number or N% of the CPUs")
        cpus = cpus_available()
        return max(1, round(cpus * float(m.group(1)) / 100))
    return value


def parse_scalar(value: str):
    """A value from the command line, read as YAML would ('3' -> 3, '[1, 2]' -> a list, 'x' -> 'x')."""
    import yaml        # here: the modules that import this one for the job's CPUs need no YAML

    from perflab.core import yamlsafe

    try:
        return yamlsafe.load(value) if value.strip() else ""
    except yaml.YAMLError:
        return value


def in_range(low: float, high: float | None = None, message: str | None = None, *,
             above: bool = False):
    """A field's range, for `Annotated[int, in_range(1, 64)]`: low <= value <= high, else ValueError(message).

    `above`: the value must be greater than `low` (an open lower end); `high` None: no upper end.
    Infinite and NaN floats are always outside. None passes (an optional field left out). The
    message defaults to "must be between LOW and HIGH"; every family's message is part of its
    interface (job files' error lines), so a field whose words differ gives its own.
    """
    from pydantic import AfterValidator   # here: parse_scalar's users (the CLI) need no pydantic

    text = message or f"must be between {low} and {high}"

    def check(value):
        if value is None:
            return value
        inside = (value > low if above else value >= low) and (high is None or value <= high)
        if not inside or (isinstance(value, float) and not math.isfinite(value)):
            raise ValueError(text)
        return value

    return AfterValidator(check)

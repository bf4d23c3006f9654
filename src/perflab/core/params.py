"""Parameter values as users write them (`50%` of the CPUs, a command-line value read as YAML) and their ranges."""

from __future__ import annotations

import math
import os
import re

import yaml


def cpu_percent(value, key: str) -> int:
    """'50%' -> half the online CPUs (at least 1); ints pass through."""
    if isinstance(value, str):
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*%\s*", value)
        if not m:
            raise ValueError(f"{value!r} is not a number or N% of the CPUs")
        cpus = len(os.sched_getaffinity(0))
        return max(1, round(cpus * float(m.group(1)) / 100))
    return value


def parse_scalar(value: str):
    """A value from the command line, read as YAML would ('3' -> 3, '[1, 2]' -> a list, 'x' -> 'x')."""
    try:
        return yaml.safe_load(value) if value.strip() else ""
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

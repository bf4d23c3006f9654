"""Parameter values as users write them: `50%` of the CPUs, a command-line value read as YAML."""

from __future__ import annotations

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

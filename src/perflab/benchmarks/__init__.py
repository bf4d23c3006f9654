"""Benchmark families: the registry `perflab run` and job files are built from.

Each family is a module with a FAMILY object (benchmarks.base.Family). The
registry names the module, so that importing the registry imports no family.
"""

from __future__ import annotations

from importlib import import_module

from perflab.core.errors import UsageProblem

FAMILIES: dict[str, str] = {
    "cmd": "perflab.benchmarks.cmd",
    "lmbench": "perflab.benchmarks.lmbench.driver",
    "will-it-scale": "perflab.benchmarks.will_it_scale",
    "kernbench": "perflab.benchmarks.kernbench",
    "ebizzy": "perflab.benchmarks.ebizzy",
    "hackbench": "perflab.benchmarks.hackbench",
    "aim7": "perflab.benchmarks.aim7",
    "fio": "perflab.benchmarks.fio",
    "news": "perflab.benchmarks.news",
}


def family(name: str):
    """The Family object of `name`; UsageProblem listing the valid names otherwise."""
    module = FAMILIES.get(name)
    if module is None:
        raise UsageProblem(f"unknown benchmark {name!r}; valid: {', '.join(FAMILIES)}")
    return import_module(module).FAMILY

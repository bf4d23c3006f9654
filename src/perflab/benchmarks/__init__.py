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
    "will-it-scale": "perflab.benchmarks.will_it_scale.family",
    "kernbench": "perflab.benchmarks.kernbench.family",
    "ebizzy": "perflab.benchmarks.ebizzy",
    "hackbench": "perflab.benchmarks.hackbench",
    "aim7": "perflab.benchmarks.aim7",
    "fio": "perflab.benchmarks.fio",
    "news": "perflab.benchmarks.news",
}

# Parameters that only change how long a run takes (`compare` ignores them when it matches
# groups): runs, warmup and timeout for every family, and each family's own, declared here rather
# than on its class so that a view matching runs imports no family (its pydantic model: ~0.17 s
# of a `perflab compare`). benchmarks.base gives each family class its set from here.
RUN_DURATION = frozenset({"runs", "warmup", "timeout"})
DURATION_PARAMS: dict[str, frozenset[str]] = {
    "cmd": frozenset({"prepare"}),
    "lmbench": frozenset({"quick", "only", "precision", "min_runs", "mem_curve"}),
    "will-it-scale": frozenset({"duration", "warmup_time", "interval"}),
    "ebizzy": frozenset({"duration"}),
    "fio": frozenset({"runtime"}),
}

# Each family's harness-side figures (its own timing of the process, the CPU it reports): tested
# in an FDR group of their own so they do not dilute the power of its own metrics
# (analysis.comparison.fdr). Declared here, as DURATION_PARAMS, so `compare` imports no family;
# each name is one of its family's catalog (tests/test_startup.py checks).
SECONDARY_METRICS: dict[str, frozenset[str]] = {
    "cmd": frozenset({"time.user_time", "time.system_time", "time.maximum_resident_set_size", "time.exit_status"}),
    "ebizzy": frozenset({"ebizzy.time.real", "ebizzy.time.user", "ebizzy.time.sys"}),
    "hackbench": frozenset({"hackbench.time.user", "hackbench.time.sys"}),
    "fio": frozenset({"fio.usr_cpu", "fio.sys_cpu"}),
    "news": frozenset({"time.elapsed_time", "time.user_time", "time.system_time"}),
}

# What a family needs of the place it runs in (perflab.execution.targets' capability names), when
# not perflab's own C programs: declared here so that a guest can start booting before the
# family's module (its pydantic model, ~0.1 s) is imported (`run cmd --kernel`, cli.run's
# _start_ahead). Each family class takes its set from here (benchmarks.base checks the names).
NEEDS: dict[str, frozenset[str]] = {
    "cmd": frozenset({"host-programs"}),                           # the user's command, from the host's root
    "fio": frozenset({"host-programs"}),                           # the host's fio
    "kernbench": frozenset({"host-programs", "writable-host-tree"}),
}
DEFAULT_NEEDS = frozenset({"perflab-programs"})


def needs(name: str) -> frozenset[str]:
    """What family `name` needs of the place it runs in, without importing the family."""
    return NEEDS.get(name, DEFAULT_NEEDS)


def duration_params(name: str) -> frozenset[str]:
    """The parameters of family `name` that only change how long its runs take."""
    return RUN_DURATION | DURATION_PARAMS.get(name, frozenset())


def family(name: str):
    """The Family object of `name`; UsageProblem listing the valid names otherwise."""
    module = FAMILIES.get(name)
    if module is None:
        raise UsageProblem(f"unknown benchmark {name!r}; valid: {', '.join(FAMILIES)}")
    return import_module(module).FAMILY

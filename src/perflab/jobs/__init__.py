"""Job files, LKP's habit: load, validate, expand into atomic jobs.

A job file names a benchmark and its parameters:

    benchmark: will-it-scale
    runs: 3
    timeout: 300
    test: [page_fault1, brk1]      # a list is an axis of the matrix
    mode: [process, thread]
    nr_task: [1, 50%, 100%]        # N% of the online CPUs (at least 1; a guest's: its vCPUs)

Top-level keys other than the job's own (benchmark, runs, warmup, timeout,
tag, comment, monitors) are the family's parameters; they may also sit in a
mapping under the family's name (`will-it-scale: {mode: thread}`), as LKP
writes them. A list value is an axis and the job expands to the Cartesian
product of its axes; a parameter whose value is itself a list (cmd's
`command` words, lmbench's `only`) takes a list of lists as an axis.

Points that resolve to the same parameters on this machine (`nr_task: [1,
50%]` on 2 CPUs) run once.

`runs` left out means the family's default (will-it-scale 3, lmbench its
mode's process count, cmd 1).

An **atomic job** is one point of the matrix (perflab.jobs.job.AtomicJob),
whose JSON form is {"benchmark", "params", "runs", "warmup", "timeout", "tag",
"comment", "monitors"}. The same job runs locally, under bisection and on a
remote worker; every run stores the atomic job it ran.

Every source of atomic jobs builds them here — job files (`load_atomic`,
`expand_atomic`), `perflab run FAMILY` options (`expand_atomic`), one job
from code (`atomic`), a stored run (`resolve` of its dict) — and `resolve` is
the one place their parameters are validated: the job then carries its
family and parsed parameters to the runner. `load` and `expand` give the
same jobs as JSON dicts, for callers that keep dicts.

The package by what it does: `job` the atomic job (its typed target and instruments),
`keys` the job's own keys and `resolve`, `matrix` a mapping's expansion into its points,
`file` job files (YAML with line numbers) and the shipped ones; `guest` the kernel and vm
keys. Everything a caller needs is importable from `perflab.jobs`.
"""


from __future__ import annotations

from dataclasses import replace

from perflab.benchmarks.base import JobError, validate_params  # noqa: F401 (re-exported)
from perflab.core.errors import PerflabError
from perflab.core.params import cpu_percent, parse_scalar  # noqa: F401 (re-exported)
from perflab.execution import instruments
from perflab.jobs.file import SHIPPED_DIR, load, load_atomic, shipped, to_yaml  # noqa: F401
from perflab.jobs.job import MEASURE_KEYS, AtomicJob, target_of
from perflab.jobs.keys import (BUILD_KEYS, GUEST_KEYS, JOB_KEYS, MEASURE_MODES, NOT_PARAMS,  # noqa: F401
                               JobErrors, _did_you_mean, check_compilers, check_measure, resolve)
from perflab.jobs.matrix import _choices, expand, expand_atomic, file_name, varying_keys  # noqa: F401

__all__ = ["AtomicJob", "JobError", "JobErrors", "validate_params", "cpu_percent", "atomic", "resolve", "load", "load_atomic",
           "expand", "expand_atomic", "shipped"]

def measured(job: AtomicJob, measure: str | None, where: str) -> AtomicJob:
    """The job with `run --measure` over its own `measure` key; what watches it (its instruments,
    its monitors) checked against where it runs."""
    if measure is not None:
        check_measure({**{k: getattr(job, k) for k in MEASURE_KEYS}, "measure": measure}, where)
        job = job.with_(measure=measure)
    return check_watching(job, where)


def check_watching(job: AtomicJob, where: str) -> AtomicJob:
    """The job, once what watches it (its instruments, its monitors) is known to run where it runs;
    JobError in one line naming `where` otherwise."""
    try:
        instruments.check(job.watching, job.target, where)
    except PerflabError as e:
        raise JobError(str(e)) from None
    return job

def atomic(benchmark: str, params: dict, *, runs: int | None = None, warmup: int = 0,
           timeout: float | None = None, tag: str | None = None, comment: str | None = None,
           monitors: dict | None = None, where: str = "", kernel: str | None = None,
           vm: dict | None = None, measure: str | None = None) -> AtomicJob:
    """One atomic job built in code (`perflab run cmd`, the lmbench suite), validated."""
    guest_keys = {}
    if kernel is not None or vm:
        from perflab.jobs import guest

        kernel, vm = guest.normalize(benchmark, kernel, vm, where or f"perflab run {benchmark}", monitors)
        guest_keys = {"kernel": kernel, "vm": vm}
    job = resolve(AtomicJob(benchmark, params, runs=runs, warmup=warmup, timeout=timeout, tag=tag,
                            comment=comment, monitors=monitors or {}, target=target_of(guest_keys)[0]), where)
    return measured(job, measure, where or f"perflab run {benchmark}")

def retarget(job: AtomicJob, doc: dict, where: str) -> AtomicJob:
    """The job moved to the target its target keys `doc` name (perflab.execution.targets.placed: a
    target's options over the job's own keys), its compiler kept; a guest's keys normalized and
    checked as a job file's are (a stored guest job's QEMU arguments above all: docs/lab.md)."""
    if doc.get("kernel") is not None or doc.get("vm"):
        from perflab.jobs import guest

        stored, vm = guest.normalize(job.benchmark, doc.get("kernel"), doc.get("vm") or {}, where, job.monitors)
        return placed(job, guest.Qemu.of(stored, vm), where)
    target = target_of(doc)[0]
    return job if target == job.target else placed(job, target, where)


def placed(job: AtomicJob, target, where: str = "") -> AtomicJob:
    """The job to run in `target` (a typed target whose keys were checked where it was made), with
    the job's compiler and flags; its parameters parsed again there: a share of the CPUs
    (`nr_task: 50%`) is one of the target's, and what watches the job must run there too."""
    target = replace(target, toolchain=job.target.toolchain)
    return resolve(replace(job, target=target, parsed=None), where)

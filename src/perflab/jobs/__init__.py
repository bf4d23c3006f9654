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

An **atomic job** is one point of the matrix (perflab.core.job.AtomicJob),
whose JSON form is {"benchmark", "params", "runs", "warmup", "timeout", "tag",
"comment", "monitors"}. The same job runs locally, under bisection and on a
remote worker; every run stores the atomic job it ran.

Every source of atomic jobs builds them here — job files (`load_atomic`,
`expand_atomic`), `perflab run FAMILY` options (`expand_atomic`), one job
from code (`atomic`), a stored run (`resolve` of its dict) — and `resolve` is
the one place their parameters are validated: the job then carries its
family and parsed parameters to the runner. `load` and `expand` give the
same jobs as JSON dicts, for callers that keep dicts.
"""

from __future__ import annotations

import itertools
import os
import re
import types
import typing
from dataclasses import replace
from pathlib import Path

import yaml
from perflab.benchmarks.base import JobError, validate_params  # noqa: F401 (validate_params: re-exported)
from perflab.core.errors import UsageProblem
from perflab.core.job import FILE_ORDER, AtomicJob
from perflab.core.params import cpu_percent, job_cpus, parse_scalar

__all__ = ["AtomicJob", "JobError", "validate_params", "cpu_percent", "atomic", "resolve", "load", "load_atomic",
           "expand", "expand_atomic", "shipped"]

JOB_KEYS = ("benchmark", "runs", "warmup", "timeout", "tag", "comment", "monitors")
# A kernel to boot and run the job in, and its machine (perflab.jobs.guest; docs/vm.md).
GUEST_KEYS = ("kernel", "vm")
# Counting the job's processes under valgrind (docs/instructions.md).
MEASURE_KEYS = ("measure", "measure_children", "measure_function")
MEASURE_MODES = ("instructions", "cache")
NOT_PARAMS = (*JOB_KEYS, *GUEST_KEYS, *MEASURE_KEYS)
SHIPPED_DIR = Path(__file__).parent


# -- atomic jobs ------------------------------------------------------------

def resolve(job: AtomicJob | dict, where: str = "") -> AtomicJob:
    """The job with its family and parsed parameters; JobError naming the bad key.

    The one place an atomic job's parameters are validated: a job that already
    carries them is returned as it is.
    """
    if isinstance(job, dict):
        job = AtomicJob.from_dict(job)
    if job.resolved:
        return job
    family = job.family
    if family is None:
        from perflab import benchmarks

        family = benchmarks.family(job.benchmark)
    cpus = None
    if job.in_guest:
        from perflab.jobs import guest

        cpus = guest.cpus_of(job)      # shares of the CPUs are the guest's vCPUs
    with job_cpus(cpus):
        parsed = family.parse_params(job.params or {}, where)
    if job.measure is not None or job.measure_children or job.measure_function is not None:
        check_measure({k: getattr(job, k) for k in MEASURE_KEYS}, job.in_guest, where or job.benchmark)
    return replace(job, family=family, parsed=parsed)


def check_measure(keys: dict, in_guest: bool, where: str, doc: dict | None = None) -> dict:
    """The measure keys of a job, checked: JobError naming the key (and its line in `doc`) at fault."""
    def fail(key: str, message: str):
        raise JobError(f"{where}{_line(doc, key)}: key {key!r} = {keys.get(key)!r}: {message}")

    measure = keys.get("measure")
    if measure is not None and measure not in MEASURE_MODES:
        fail("measure", f"expected one of {', '.join(MEASURE_MODES)}")
    children, function = keys.get("measure_children", False), keys.get("measure_function")
    if not isinstance(children, bool):
        fail("measure_children", "expected true or false")
    if function is not None and not (isinstance(function, str) and function.strip() and function == function.strip()
                                     and "\n" not in function and not function.startswith("-")):
        fail("measure_function", "expected a function name (valgrind's --toggle-collect pattern, * and ? allowed)")
    for key in ("measure_children", "measure_function"):
        if keys.get(key) and measure is None:
            fail(key, "needs measure: instructions or measure: cache")
    if measure is not None and in_guest:
        fail("measure", "valgrind counts processes on this machine, not in a guest (kernel:); leave one of them out")
    return {k: keys[k] for k in MEASURE_KEYS if keys.get(k) not in (None, False)}


def measured(job: AtomicJob, measure: str | None, where: str) -> AtomicJob:
    """The job with `run --measure` over its own `measure` key, checked."""
    if measure is None:
        return job
    keys = {**{k: getattr(job, k) for k in MEASURE_KEYS}, "measure": measure}
    check_measure(keys, job.in_guest, where)
    return job.with_(measure=measure)


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
                            comment=comment, monitors=monitors or {}, **guest_keys), where)
    return measured(job, measure, where or f"perflab run {benchmark}")


def in_guest(job: AtomicJob, kernel: str | None, vm: dict | None, where: str) -> AtomicJob:
    """The job made to run in a guest booted from `kernel` (`--kernel`, `--vm` over a job file's keys)."""
    from perflab.jobs import guest

    if kernel is None and not vm:
        return job
    merged_vm = {**(job.vm or {}), **(vm or {})}
    kernel, merged_vm = guest.normalize(job.benchmark, kernel or job.kernel, merged_vm, where, job.monitors)
    # Parsed again: a share of the CPUs (`nr_task: 50%`) is now one of the guest's vCPUs.
    return resolve(replace(job.with_(kernel=kernel, vm=merged_vm), parsed=None), where)


# -- parameters ---------------------------------------------------------------

def _is_list_type(annotation) -> bool:
    """Whether a pydantic field's type takes a list as one value."""
    origin = typing.get_origin(annotation)
    if origin in (list, tuple, set, frozenset):
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_is_list_type(a) for a in typing.get_args(annotation))
    return annotation in (list, tuple)


# -- files --------------------------------------------------------------------

class _LineLoader(yaml.SafeLoader):
    """Records the line of every mapping key, so errors can name it."""


def _construct_mapping(loader, node, deep=False):
    mapping = yaml.SafeLoader.construct_mapping(loader, node, deep=deep)
    lines = {}
    for key_node, _ in node.value:
        lines[loader.construct_object(key_node, deep=deep)] = key_node.start_mark.line + 1
    mapping_with_lines = _Mapping(mapping)
    mapping_with_lines.lines = lines
    return mapping_with_lines


class _Mapping(dict):
    lines: dict


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _line(doc, key) -> str:
    line = getattr(doc, "lines", {}).get(key)
    return f":{line}" if line else ""


def load(path: str | Path, overrides: list[str] = ()) -> list[dict]:
    """Read a job file, apply --set overrides and expand it; the atomic jobs as JSON dicts."""
    return [job.to_dict() for job in load_atomic(path, overrides)]


def load_atomic(path: str | Path, overrides: list[str] = ()) -> list[AtomicJob]:
    """Read a job file, apply --set overrides and expand it; the atomic jobs, validated."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise JobError(f"{path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise JobError(f"{path}: not a text file") from None
    try:
        doc = yaml.load(text, Loader=_LineLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise JobError(f"{where}: not valid YAML: {getattr(e, 'problem', None) or e}") from None
    if not isinstance(doc, dict):
        raise JobError(f"{path}: a job file is a mapping of keys (benchmark: ..., runs: ...)")
    return expand_atomic(doc, str(path), overrides)


def _parse_override(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise JobError(f"--set {text!r}: expected KEY=VALUE")
    return key.strip(), parse_scalar(value)


def expand(doc: dict, source: str = "job", overrides: list[str] = ()) -> list[dict]:
    """A job mapping -> its atomic jobs as JSON dicts (see expand_atomic)."""
    return [job.to_dict() for job in expand_atomic(doc, source, overrides)]


def expand_atomic(doc: dict, source: str = "job", overrides: list[str] = ()) -> list[AtomicJob]:
    """A job mapping -> its atomic jobs (the Cartesian product of its list-valued parameters), validated."""
    from perflab import benchmarks

    lines = getattr(doc, "lines", None) or {}
    doc = _Mapping(doc)
    doc.lines = lines
    overridden = dict(_parse_override(text) for text in overrides)
    doc.update({k: v for k, v in overridden.items() if k in NOT_PARAMS})
    name = doc.get("benchmark")
    if not isinstance(name, str):
        raise JobError(f"{source}: key 'benchmark' is missing: name one of {', '.join(benchmarks.FAMILIES)}")
    try:
        family = benchmarks.family(name)
    except UsageProblem as e:
        raise JobError(f"{source}{_line(doc, 'benchmark')}: {e}") from None
    raw = {k: v for k, v in doc.items() if k not in NOT_PARAMS and k != name}
    nested = doc.get(name)
    if nested is not None:
        if not isinstance(nested, dict):
            raise JobError(f"{source}{_line(doc, name)}: key {name!r}: expected a mapping of parameters")
        raw.update(nested)
    raw.update({k: v for k, v in overridden.items() if k not in NOT_PARAMS})   # --set wins over the file
    for key, values in family.default_axes.items():
        raw.setdefault(key, list(values))
    job = {"benchmark": name, "runs": doc.get("runs"), "warmup": doc.get("warmup", 0),
           "timeout": doc.get("timeout"), "tag": doc.get("tag"), "comment": doc.get("comment"),
           "monitors": doc.get("monitors") or {}}
    for key, check in (("runs", lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 1)),
                       ("warmup", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0),
                       ("timeout", lambda v: v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)
                                                            and 0 < v < float("inf")))):
        if not check(job[key]):
            want = {"runs": "an integer >= 1", "warmup": "an integer >= 0", "timeout": "a number of seconds > 0"}[key]
            raise JobError(f"{source}{_line(doc, key)}: key {key!r} = {job[key]!r}: expected {want}")
    for key in ("tag", "comment"):
        if job[key] is not None and not isinstance(job[key], str):
            job[key] = str(job[key])
    from perflab import monitors

    try:
        job["monitors"] = monitors.validate(job["monitors"])
    except monitors.MonitorError as e:
        raise JobError(f"{source}{_line(doc, 'monitors')}: {e}") from None
    if doc.get("kernel") is not None or doc.get("vm"):
        from perflab.jobs import guest

        where = f"{source}{_line(doc, 'kernel' if 'kernel' in doc else 'vm')}"
        kernel, vm = guest.normalize(name, doc.get("kernel"), _plain(doc.get("vm")), where, job["monitors"])
        job.update(kernel=kernel, vm=vm)
    job.update(check_measure({k: doc.get(k) for k in MEASURE_KEYS if k in doc}, bool(job.get("kernel")), source, doc))

    fields = family.Params.model_fields
    axes: list[tuple[str, list]] = []
    for key, value in raw.items():
        if key not in fields:
            nested_lines = getattr(nested, "lines", {}) if isinstance(nested, dict) else {}
            where = f"{source}:{nested_lines[key]}" if key in nested_lines else f"{source}{_line(doc, key)}"
            raise JobError(f"{where}: unknown key {key!r} for {name}; valid: {', '.join([*JOB_KEYS, *fields])}")
        list_typed = _is_list_type(fields[key].annotation)
        if isinstance(value, list) and (not list_typed or (value and all(isinstance(v, list) for v in value))):
            if not value:
                raise JobError(f"{source}{_line(doc, key)}: key {key!r}: an empty list gives no job")
            axes.append((key, value))
        else:
            axes.append((key, [value]))
    points, seen = [], set()
    for combo in itertools.product(*(values for _, values in axes)):
        params = {k: _plain(v) for (k, _), v in zip(axes, combo)}
        label = ", ".join(f"{k}={v}" for k, v in params.items())
        first_key = next(iter(params), None)
        point = resolve(AtomicJob(**job, params=params, key_order=FILE_ORDER, family=family),
                        f"{source}{_line(doc, first_key) if first_key else ''} ({label})")
        # Two points that mean the same here (50% and 100% of 2 CPUs: 1 and 2; 1 and 50%: both 1) run once.
        key = point.parsed.model_dump_json()
        if key in seen:
            continue
        seen.add(key)
        points.append(point)
    return points


def _plain(value):
    """YAML's mapping subclass -> plain JSON-able values."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def file_name(job: dict, varying: list[str]) -> str:
    """A file name for an atomic job from the parameters that vary across the matrix."""
    parts = [job["benchmark"]]
    for key in varying:
        value = job["params"][key]
        text = "-".join(map(str, value)) if isinstance(value, list) else str(value)
        parts.append(text)
    name = "-".join(parts)
    return re.sub(r"[^A-Za-z0-9_.%=+-]+", "_", name)[:200] + ".yaml"


def varying_keys(jobs: list[dict]) -> list[str]:
    keys: list[str] = []
    for job in jobs:
        for k in job["params"]:
            if k not in keys:
                keys.append(k)
    return [k for k in keys if len({repr(j["params"].get(k)) for j in jobs}) > 1]


def to_yaml(job: dict | AtomicJob) -> str:
    """An atomic job as a job file that expands to exactly itself."""
    if isinstance(job, AtomicJob):
        job = job.to_dict()
    doc = {k: v for k, v in job.items() if k != "params" and v not in (None, {}, [])}
    params = {}
    for k, v in job["params"].items():
        # A list-valued parameter is written as a one-element axis so it is not taken for an axis.
        params[k] = [v] if isinstance(v, list) else v
    doc[job["benchmark"]] = params
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)


def shipped() -> list[Path]:
    """The job files shipped in the package."""
    return sorted(SHIPPED_DIR.glob("*.yaml"))

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

import difflib
import itertools
import json
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
from perflab.core.text import brief as shorten, printable
from perflab.core.yamlsafe import StrictLoader
from perflab.jobs.limits import check_matrix

__all__ = ["AtomicJob", "JobError", "JobErrors", "validate_params", "cpu_percent", "atomic", "resolve", "load", "load_atomic",
           "expand", "expand_atomic", "shipped"]

JOB_KEYS = ("benchmark", "runs", "warmup", "timeout", "tag", "comment", "monitors")
# A kernel to boot and run the job in, and its machine (perflab.jobs.guest; docs/vm.md).
GUEST_KEYS = ("kernel", "vm")
# Counting the job's processes under valgrind (docs/instructions.md).
MEASURE_KEYS = ("measure", "measure_children", "measure_function")
MEASURE_MODES = ("instructions", "cache")
SHIPPED_DIR = Path(__file__).parent
# The compiler of the job's C programs and flags added to theirs (core.cbuild.compiling_with);
# a list is a matrix axis (`cc: [gcc, clang]`), so one job file compares compilers. Stored in
# the atomic job only when set.
BUILD_KEYS = ("cc", "cflags")
NOT_PARAMS = (*JOB_KEYS, *GUEST_KEYS, *MEASURE_KEYS, *BUILD_KEYS)


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

    if kernel is None and not vm and not job.in_guest:
        return job
    # A stored guest job (rerun, an imported run) is checked again as a job file's would be:
    # its QEMU arguments above all (docs/lab.md).
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

class _LineLoader(StrictLoader):
    """Records the line of every mapping key, so errors can name it (no aliases, no duplicate keys)."""


def _construct_mapping(loader, node, deep=False):
    mapping = StrictLoader.construct_mapping(loader, node, deep=deep)
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


def load_atomic(path: str | Path, overrides: list[str] = (), values: dict | None = None) -> list[AtomicJob]:
    """Read a job file, apply --set overrides (and option `values`) and expand it; the atomic jobs, validated."""
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
    return expand_atomic(doc, str(path), overrides, values)


def _parse_override(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise JobError(f"--set {text!r}: expected KEY=VALUE")
    return key.strip(), parse_scalar(value)


def expand(doc: dict, source: str = "job", overrides: list[str] = ()) -> list[dict]:
    """A job mapping -> its atomic jobs as JSON dicts (see expand_atomic)."""
    return [job.to_dict() for job in expand_atomic(doc, source, overrides)]


def expand_atomic(doc: dict, source: str = "job", overrides: list[str] = (),
                  values: dict | None = None) -> list[AtomicJob]:
    """A job mapping -> its atomic jobs (the Cartesian product of its list-valued parameters), validated.

    `overrides` are `--set KEY=VALUE` texts, `values` the same already parsed (`perflab run
    JOB.yaml --runs 2 --mode thread`); both win over the file. Every problem found is
    reported at once, each at its line (JobErrors), with a "did you mean" where a near
    name or value exists.
    """
    from perflab import benchmarks

    lines = getattr(doc, "lines", None) or {}
    doc = _Mapping(doc)
    doc.lines = lines
    overridden = dict(_parse_override(text) for text in overrides)
    overridden.update(values or {})
    doc.update({k: v for k, v in overridden.items() if k in NOT_PARAMS})
    name = doc.get("benchmark")
    if not isinstance(name, str):
        raise JobError(f"{source}: key 'benchmark' is missing: name one of {', '.join(benchmarks.FAMILIES)}")
    try:
        family = benchmarks.family(name)
    except UsageProblem:
        raise JobError(f"{source}{_line(doc, 'benchmark')}: unknown benchmark {name!r}"
                       f"{_did_you_mean(name, benchmarks.FAMILIES)}; valid: {', '.join(benchmarks.FAMILIES)}") from None
    problems: list[str] = []
    raw = {k: v for k, v in doc.items() if k not in NOT_PARAMS and k != name}
    nested = doc.get(name)
    if nested is not None:
        if not isinstance(nested, dict):
            raise JobError(f"{source}{_line(doc, name)}: key {name!r}: expected a mapping of parameters")
        raw.update(nested)
    raw.update({k: v for k, v in overridden.items() if k not in NOT_PARAMS})   # --set wins
    for key, default in family.default_axes.items():
        raw.setdefault(key, list(default))
    nested_lines = getattr(nested, "lines", {}) if isinstance(nested, dict) else {}

    def where(key: str) -> str:
        if key in overridden:
            return f"{source} (--{key.replace('_', '-')})" if values and key in values else f"{source} (--set {key})"
        return f"{source}:{nested_lines[key]}" if key in nested_lines else f"{source}{_line(doc, key)}"

    job = _job_keys(doc, name, where, problems, source)
    fields = family.Params.model_fields
    axes: list[tuple[str, list]] = []
    bad: set[str] = set()        # keys already reported: not reported again as missing
    for key, value in raw.items():
        bad.add(key)
        if key not in fields:
            valid = [*JOB_KEYS, *BUILD_KEYS, *fields]
            problems.append(f"{where(key)}: unknown key {key!r} for {name}{_did_you_mean(key, valid)}; "
                            f"valid: {', '.join(valid)}")
            continue
        list_typed = _is_list_type(fields[key].annotation)
        if isinstance(value, list) and (not list_typed or (value and all(isinstance(v, list) for v in value))):
            if not value:
                problems.append(f"{where(key)}: key {key!r}: an empty list gives no job")
                continue
            axes.append((key, value))
        else:
            axes.append((key, [value]))
        bad.discard(key)
    problems += _value_problems(family, axes, where, _guest_cpus(job), bad)
    builds = _build_axes(doc, where, problems)
    if problems:
        raise JobErrors(problems)
    check_matrix([*axes, ("cc, cflags", builds)], source)
    points, seen = [], set()
    for build, combo in itertools.product(builds, itertools.product(*(values for _, values in axes))):
        params = {k: _plain(v) for (k, _), v in zip(axes, combo)}
        label = ", ".join(f"{k}={printable(v, 40)}" for k, v in params.items())
        first_key = next(iter(params), None)
        point = resolve(AtomicJob(**job, params=params, key_order=FILE_ORDER, family=family, extra=build),
                        f"{source}{_line(doc, first_key) if first_key else ''} ({label})")
        # Two points that mean the same here (50% and 100% of 2 CPUs: 1 and 2; 1 and 50%: both 1) run once.
        key = json.dumps(build, sort_keys=True) + point.parsed.model_dump_json()
        if key in seen:
            continue
        seen.add(key)
        points.append(point)
    return points


def _build_axes(doc: dict, where, problems: list[str]) -> list[dict]:
    """The (cc, cflags) points of a job: the product of its `cc:` and `cflags:` values ([{}] without them)."""
    axes = []
    for key in BUILD_KEYS:
        value = doc.get(key)
        if value is None:
            continue
        values = value if isinstance(value, list) else [value]
        if not values:
            problems.append(f"{where(key)}: key {key!r}: an empty list gives no job")
        for v in values:
            if not isinstance(v, str) or (key == "cc" and not v.strip()):
                want = "a compiler command (gcc, clang, gcc-13 -m32)" if key == "cc" else "compiler flags (-O1 -g)"
                problems.append(f"{where(key)}: key {key!r} = {shorten(v)}: expected {want}")
        axes.append([(key, v) for v in values])
    return [dict(combo) for combo in itertools.product(*axes)]


def check_compilers(jobs: list[AtomicJob], where: str = "") -> None:
    """Every compiler the jobs name (`cc:`) is installed: one line naming its package otherwise.

    Checked where the jobs are to run here, before anything is built or stored; a job file
    itself may name a compiler this machine lacks (split it, or send it to a lab box)."""
    from perflab.core import cbuild

    at = f"{where}: " if where else ""
    for cc in dict.fromkeys(job.extra.get("cc") for job in jobs if job.extra.get("cc")):
        try:
            cbuild.compiler(cc)
        except cbuild.BuildError as e:
            raise JobError(f"{at}key 'cc' = {cc!r}: {e.detail}") from None
    for cflags in dict.fromkeys(job.extra.get("cflags") for job in jobs if job.extra.get("cflags")):
        try:
            cbuild.split_flags(cflags)
        except cbuild.BuildError as e:
            raise JobError(f"{at}key 'cflags': {e.detail}") from None


class JobErrors(JobError):
    """Every problem of one job, each a one-line message naming its file, line, key and value."""

    def __init__(self, problems: list[str]):
        # In the order of the file's lines (a problem without a line, e.g. from --set, first).
        def line_of(problem: str) -> int:
            found = re.match(r"[^ ]*?:(\d+): ", problem)
            return int(found.group(1)) if found else 0

        self.problems = sorted(problems, key=line_of)
        super().__init__("\n".join(self.problems))


def _did_you_mean(word, candidates) -> str:
    """` (did you mean 'x'?)` when a candidate is close to `word` (difflib), else nothing."""
    near = difflib.get_close_matches(str(word), [str(c) for c in candidates], n=1, cutoff=0.6)
    return f" (did you mean {near[0]!r}?)" if near else ""


def _job_keys(doc: dict, name: str, where, problems: list[str], source: str) -> dict:
    """The job's own keys (runs, warmup, timeout, tag, comment, monitors, kernel, vm), checked."""
    job = {"benchmark": name, "runs": doc.get("runs"), "warmup": doc.get("warmup", 0),
           "timeout": doc.get("timeout"), "tag": doc.get("tag"), "comment": doc.get("comment"),
           "monitors": doc.get("monitors") or {}}
    for key, check in (("runs", lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 1)),
                       ("warmup", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0),
                       ("timeout", lambda v: v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)
                                                            and 0 < v < float("inf")))):
        if not check(job[key]):
            want = {"runs": "an integer >= 1", "warmup": "an integer >= 0", "timeout": "a number of seconds > 0"}[key]
            problems.append(f"{where(key)}: key {key!r} = {shorten(job[key])}: expected {want}")
    for key in ("tag", "comment"):
        if isinstance(job[key], (list, dict, bool)):    # a number is fine as text (tag: 2024)
            problems.append(f"{where(key)}: key {key!r} = {shorten(job[key])}: expected a string")
            job[key] = None
        if job[key] is not None and not isinstance(job[key], str):
            job[key] = str(job[key])
    from perflab import monitors

    try:
        job["monitors"] = monitors.validate(job["monitors"])
    except monitors.MonitorError as e:
        problems.append(f"{where('monitors')}: key 'monitors': {e}")
        job["monitors"] = {}
    if doc.get("kernel") is not None or doc.get("vm"):
        from perflab.jobs import guest

        try:
            kernel, vm = guest.normalize(name, doc.get("kernel"), _plain(doc.get("vm")),
                                         where("kernel" if "kernel" in doc else "vm"), job["monitors"])
            job.update(kernel=kernel, vm=vm)
        except JobError as e:
            problems.append(str(e))
    try:
        job.update(check_measure({k: doc.get(k) for k in MEASURE_KEYS if k in doc}, bool(job.get("kernel")),
                                 source, doc))
    except JobError as e:
        problems.append(str(e))
    return job


def _guest_cpus(job: dict) -> int | None:
    if not job.get("kernel"):
        return None
    from perflab.jobs import guest

    return guest.cpus_of(AtomicJob(**job))


def _choices(annotation) -> list:
    """The values a Literal-typed parameter allows (also inside Optional), else none."""
    if typing.get_origin(annotation) is typing.Literal:
        return list(typing.get_args(annotation))
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [c for a in typing.get_args(annotation) for c in _choices(a)]
    return []


def _value_problems(family, axes: list[tuple[str, list]], where, cpus: int | None, bad: set[str]) -> list[str]:
    """Every bad parameter value, each at its key's line: each value of each axis is tried
    with the first value of the others (not the whole product, which may be large)."""
    from pydantic import ValidationError

    from perflab.core.errors import PerflabError

    fields = family.Params.model_fields
    base = {k: _plain(values[0]) for k, values in axes}
    found: dict[str, None] = {}       # ordered, without repeats

    def attempt(key: str | None, value) -> None:
        params = dict(base) if key is None else {**base, key: _plain(value)}
        try:
            with job_cpus(cpus):
                family.Params(**params)
        except ValidationError as e:
            for err in e.errors():
                at = str(err["loc"][0]) if err["loc"] else None
                if key is None and (at in base or at in bad):
                    continue          # reported when its own axis is tried, or already
                if key is not None and at != key:
                    continue
                message = err["msg"].removeprefix("Value error, ")
                if at is None:
                    found[f"{where('benchmark')}: {family.name} parameters: {message}"] = None
                elif key is None:
                    found[f"{where('benchmark')}: {family.name} parameter {at}: {message}"] = None
                else:
                    hint = _did_you_mean(value, _choices(fields[key].annotation)) if isinstance(value, str) else ""
                    found[f"{where(key)}: {family.name} parameter {key} = {shorten(value)}: {message}{hint}"] = None
        except PerflabError as e:
            found[f"{where(key) if key else where('benchmark')}: {e}"] = None

    attempt(None, None)
    for key, values in axes:
        for value in values:
            attempt(key, value)
    return list(found)


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

"""A job mapping expanded into its atomic jobs: the Cartesian product of its list-valued
parameters (and of its compilers and flags), every problem reported at once at its line."""

from __future__ import annotations

import itertools
import json
import re
import types
import typing

from perflab.benchmarks.base import JobError
from perflab.core.errors import UsageProblem
from perflab.core.params import job_cpus
from perflab.core.text import brief as shorten, printable
from perflab.jobs.job import FILE_ORDER, OPTIONAL_KEYS, AtomicJob, instruments_of, target_of
from perflab.jobs.keys import (BUILD_KEYS, JOB_KEYS, NOT_PARAMS, JobErrors, _build_axes, _did_you_mean, _guest_cpus,
                               _job_keys, _line, _Mapping, _parse_override, _plain, resolve)
from perflab.jobs.limits import check_matrix

def _is_list_type(annotation) -> bool:
    """Whether a pydantic field's type takes a list as one value."""
    origin = typing.get_origin(annotation)
    if origin in (list, tuple, set, frozenset):
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_is_list_type(a) for a in typing.get_args(annotation))
    return annotation in (list, tuple)

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
    # `kernel:` may list several (images, debian:RELEASE, with a command line each): an axis.
    kernels = job["kernel"] if isinstance(job.get("kernel"), list) else [job.get("kernel")]
    if isinstance(job.get("kernel"), list):
        job = {**job, "kernel": kernels[0]}
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
    for kernel, build, combo in itertools.product(kernels, builds, itertools.product(*(values for _, values in axes))):
        params = {k: _plain(v) for (k, _), v in zip(axes, combo)}
        label = ", ".join(f"{k}={printable(v, 40)}" for k, v in params.items())
        first_key = next(iter(params), None)
        point = resolve(_atomic_of({**job, "kernel": kernel} if len(kernels) > 1 else job, params, build, family),
                        f"{source}{_line(doc, first_key) if first_key else ''} ({label})")
        # Two points that mean the same here (50% and 100% of 2 CPUs: 1 and 2; 1 and 50%: both 1) run once.
        key = json.dumps([kernel, build], sort_keys=True) + point.parsed.model_dump_json()
        if key in seen:
            continue
        seen.add(key)
        points.append(point)
    return points

def _atomic_of(job: dict, params: dict, build: dict, family) -> AtomicJob:
    """One point of a job file: its own keys, its target's and instruments' (kernel, vm, measure,
    cc, cflags) typed."""
    own = {k: v for k, v in job.items() if k not in OPTIONAL_KEYS}
    keyed = {**{k: v for k, v in job.items() if k in OPTIONAL_KEYS}, **build}
    return AtomicJob(**own, params=params, key_order=FILE_ORDER, family=family, target=target_of(keyed)[0],
                     instruments=instruments_of(keyed))

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

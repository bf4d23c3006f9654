"""An atomic job reduced to what a reader must type: the keys that differ from the defaults.

A stored job carries every key (`tag: null`, `prepare: null`, `metrics: []`, `shell:
false`); written out whole it hides the three parameters that matter. `minimal(job)`
keeps the benchmark, every parameter whose value is not its family's default (required
ones always, and those the family would otherwise expand into an axis), `runs`/`warmup`/`timeout` when they are not the family's, the monitors
with only their non-default options, and the targets' keys (a guest's, an SSH machine's `on:`)
and valgrind's when set. It drops
the tag (the command line's `--tag` names the runs), the comment (a note, not part of
what runs) and keys a job file cannot hold (a lab job's source). Written with
perflab.jobs.to_yaml, the result expands to the stored job (less tag and comment).
"""

from __future__ import annotations

from perflab.execution.targets import registered_keys
from perflab.jobs.job import MEASURE_KEYS


def _same(value, default) -> bool:
    """Equal, and not True == 1 or False == 0 across a bool and a number."""
    return value == default and isinstance(value, bool) == isinstance(default, bool)


def _family(name: str):
    from perflab import benchmarks

    try:
        return benchmarks.family(name) if name in benchmarks.FAMILIES else None
    except Exception:   # a family whose module cannot load here: keep every key
        return None


def param_defaults(benchmark: str) -> dict:
    """{parameter: default} of a family's parameters that have one ({} for other benchmarks)."""
    fam = _family(benchmark)
    if fam is None:
        return {}
    return {k: f.get_default(call_default_factory=True) for k, f in fam.Params.model_fields.items()
            if not f.is_required()}


def default_runs(benchmark: str, params: dict) -> int | None:
    """The repetitions a job of these parameters gets when it does not say (None: unknown)."""
    fam = _family(benchmark)
    if fam is None:
        return None
    try:
        return fam.runs_for(fam.parse_params(params))
    except Exception:   # parameters this machine refuses (a CPU list it lacks): the plain default
        return fam.default_runs


def differing_params(benchmark: str, params: dict) -> dict:
    """The parameters whose value is not the family's default, in their order; a parameter the
    family makes an axis of when it is not named (kernbench's load) is always kept."""
    defaults = param_defaults(benchmark)
    fam = _family(benchmark)
    axes = fam.default_axes if fam is not None else {}
    return {k: v for k, v in params.items() if k in axes or not (k in defaults and _same(v, defaults[k]))}


def _monitors(monitors) -> dict | list:
    """Each monitor with its non-default options; a plain list of names when none has any."""
    from perflab import monitors as registry

    out = {}
    for name, options in (monitors or {}).items():
        try:
            defaults = registry.parse_options(name, {}).model_dump(mode="json")
        except Exception:   # a monitor unknown here: keep its options as stored
            defaults = {}
        out[name] = {k: v for k, v in (options or {}).items() if not (k in defaults and _same(v, defaults[k]))}
    return list(out) if not any(out.values()) else out


def minimal(job: dict, runs: int | None = None) -> dict:
    """The stored job dict reduced to the keys that differ from the defaults (see the module).

    `runs`: the repetitions to ask for instead of the stored job's."""
    benchmark = job["benchmark"]
    params = job.get("params") or {}
    out: dict = {"benchmark": benchmark}
    runs = runs or job.get("runs")
    if runs is not None and runs != default_runs(benchmark, params):
        out["runs"] = runs
    if job.get("warmup"):
        out["warmup"] = job["warmup"]
    if job.get("timeout") is not None:
        out["timeout"] = job["timeout"]
    if job.get("monitors"):
        out["monitors"] = _monitors(job["monitors"])
    # Where it ran too (a target's keys: an SSH machine's `on:`), or the reproduction runs elsewhere.
    for key in dict.fromkeys(("kernel", "vm", *registered_keys(), *MEASURE_KEYS)):
        if job.get(key) not in (None, {}, [], False):
            out[key] = job[key]
    out["params"] = differing_params(benchmark, params)
    return out


def to_yaml(job: dict) -> str:
    """A (minimal) job as a job file that expands to it: mappings as blocks, a list of scalars on one line."""
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    def represent_list(dumper, items):
        flat = all(not isinstance(v, (list, dict)) for v in items)
        return dumper.represent_sequence("tag:yaml.org,2002:seq", items, flow_style=flat)

    Dumper.add_representer(list, represent_list)
    doc = {k: v for k, v in job.items() if k != "params" and v not in (None, {}, [])}
    # A list-valued parameter is written as a one-element axis so it is not taken for an axis.
    doc[job["benchmark"]] = {k: [v] if isinstance(v, list) else v for k, v in job["params"].items()}
    return yaml.dump(doc, Dumper=Dumper, sort_keys=False, default_flow_style=False, width=200)

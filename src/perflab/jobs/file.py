"""Job files: YAML read with the line of every key (so errors name it), the shipped ones, and
an atomic job written back as a file that expands to exactly itself."""

from __future__ import annotations

from pathlib import Path

from functools import cache

from perflab.benchmarks.base import JobError
from perflab.jobs.job import AtomicJob
from perflab.jobs.keys import _Mapping
from perflab.jobs.matrix import expand_atomic

SHIPPED_DIR = Path(__file__).parent

@cache
def _line_loader():
    """The YAML loader that records the line of every mapping key, so errors can name it (no
    aliases, no duplicate keys). Made on first use: a command that reads no job file (`run cmd`,
    the most frequent process of the test suite) imports no YAML (issue 47)."""
    import yaml

    from perflab.core.yamlsafe import StrictLoader

    class _LineLoader(StrictLoader):
        pass

    def construct_mapping(loader, node, deep=False):
        mapping = StrictLoader.construct_mapping(loader, node, deep=deep)
        lines = {}
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            if key is True and key_node.value == "on" and True in mapping:
                # YAML 1.1 reads a plain `on` as true: as a key it is the job's `on:` (an SSH machine).
                key = "on"
                mapping = {("on" if k is True else k): v for k, v in mapping.items()}
            lines[key] = key_node.start_mark.line + 1
        mapping_with_lines = _Mapping(mapping)
        mapping_with_lines.lines = lines
        return mapping_with_lines

    _LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    return _LineLoader

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
    import yaml

    loader = _line_loader()
    try:
        doc = yaml.load(text, Loader=loader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise JobError(f"{where}: not valid YAML: {getattr(e, 'problem', None) or e}") from None
    if not isinstance(doc, dict):
        raise JobError(f"{path}: a job file is a mapping of keys (benchmark: ..., runs: ...)")
    return expand_atomic(doc, str(path), overrides, values)

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
    import yaml

    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)

def shipped() -> list[Path]:
    """The job files shipped in the package."""
    return sorted(SHIPPED_DIR.glob("*.yaml"))

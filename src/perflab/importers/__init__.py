"""Import the files people already have: one module per format, one small interface.

Each format module has NAME, LABEL (how messages name it), KIND ("json" or
"text"), sniff(doc or text) -> score (0: not this format) and
parse(doc or text, Context) -> run dictionaries in perflab's export shape.
`read` finds the format by content (never by file name), parses the whole
file, and checks every run before anything is written: a file with an error
imports nothing. The mapping of each format is in docs/importers.md.
"""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from perflab import transfer
from perflab.errors import PerflabError
from perflab.importers import gbench, gotest, hyperfine, pyperf, pytest_benchmark
from perflab.importers.base import Context, ImportFailed, Problem

MODULES = {m.NAME: m for m in (hyperfine, pyperf, gotest, gbench, pytest_benchmark)}
# --format choices, "auto" first; perflab's own export is handled by perflab.transfer.
FORMATS = ("auto", "perflab", *MODULES)
LABELS = {"perflab": "a perflab export", **{name: m.LABEL for name, m in MODULES.items()}}
TRIED = "tried: " + ", ".join(FORMATS[1:])


@dataclass
class Imported:
    path: str
    fmt: str
    runs: list[dict]
    warnings: list[str] = field(default_factory=list)

    @property
    def samples(self) -> int:
        return sum(len(r["samples"]) for r in self.runs)


def _load(path: str) -> tuple[bytes, str]:
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise PerflabError(f"{path}: {e.strerror}") from None
    data = raw
    if raw[:2] == b"\x1f\x8b":  # pyperf writes FILE.json.gz compressed
        try:
            data = gzip.decompress(raw)
        except (OSError, EOFError) as e:
            raise PerflabError(f"{path}: a gzip file that cannot be decompressed ({e})") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise PerflabError(f"{path}: not a text file (nor gzip-compressed text); {TRIED}") from None
    return raw, text


# Keys whose presence in a file that is not valid JSON still tells what it was meant to be.
_JSON_HINTS = (
    ("perflab", re.compile(r'"format"\s*:\s*"perflab')),
    ("pytest-benchmark", re.compile(r'"(machine_info|commit_info)"\s*:')),
    ("gbench", re.compile(r'"(context|run_type|time_unit)"\s*:')),
    ("pyperf", re.compile(r'"(perf_version|warmups)"\s*:')),
    ("hyperfine", re.compile(r'"results"\s*:')),
)


def _detect_json(doc) -> tuple[str | None, list[str]]:
    """(format, []) when one format wins, (None, [tied formats]) otherwise."""
    if transfer.is_export(doc):
        return "perflab", []
    scores = {name: m.sniff(doc) for name, m in MODULES.items() if m.KIND == "json"}
    best = max(scores.values())
    if best == 0:
        return None, []
    top = [name for name, score in scores.items() if score == best]
    return (top[0], []) if len(top) == 1 else (None, top)


def _unrecognised_json(path: str, doc, tied: list[str]) -> PerflabError:
    if tied:
        keys = sorted(doc) if isinstance(doc, dict) else []
        return ImportFailed(
            f"{path}: not a recognised benchmark file ({TRIED}): not a perflab export, and its keys "
            f"({', '.join(repr(k) for k in keys)}) could be {', '.join(tied[:-1])} or {tied[-1]}, "
            f"with none of the keys that tell them apart; name the format with --format")
    kind = "object" if isinstance(doc, dict) else "list" if isinstance(doc, list) else "value"
    return ImportFailed(
        f"{path}: not a recognised benchmark file ({TRIED}): a JSON {kind} that is not a perflab export "
        "(no \"format\": \"perflab-export\") and has none of the keys the other tools write "
        "('results', 'benchmarks', 'context', 'machine_info')")


def _problem(path: str, label: str, e: Problem, explicit: str | None, looks: str | None) -> ImportFailed:
    where = f"{path}:{e.line}" if e.line else path
    if explicit:
        hint = f" (the file looks like {LABELS[looks]})" if looks and looks != explicit else ""
        return ImportFailed(f"{where}: --format {explicit}: {e}{hint}")
    return ImportFailed(f"{where}: looks like {label} but {e}")


def _override(runs: list[dict], tag: str | None, box: str | None) -> list[dict]:
    for run in runs:
        if tag:
            run["tag"] = tag
        if box:
            run["testbox"] = box
            run["environment"] = {**run["environment"], "testbox": box}
    return runs


def read(path: str, fmt: str = "auto", tag: str | None = None, box: str | None = None) -> Imported:
    """Parse and check one file; raises PerflabError (one line) on any fault."""
    if fmt not in FORMATS:
        raise PerflabError(f"unknown format {fmt!r}: expected one of {', '.join(FORMATS)}")
    raw, text = _load(path)
    explicit = None if fmt == "auto" else fmt
    stripped = text.lstrip()

    doc, json_error = None, None
    if stripped.startswith(("{", "[")):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            json_error = e
        except RecursionError:
            json_error = json.JSONDecodeError("nested too deeply", text, 0)

    looks, tied = None, []
    if doc is not None:
        looks, tied = _detect_json(doc)
    elif json_error is not None:
        looks = next((name for name, rx in _JSON_HINTS if rx.search(text)), None)
    elif stripped.startswith("uuid,"):
        looks = "perflab"
    elif gotest.sniff(text):
        looks = "gotest"
    chosen = explicit or looks

    if json_error is not None and (chosen is None or chosen == "perflab" or MODULES[chosen].KIND == "json"):
        what = f"looks like {LABELS[chosen]} but is" if chosen and not explicit else (f"--format {explicit}: it is" if explicit else "it is")
        raise ImportFailed(f"{path}:{json_error.lineno}: {what} not valid JSON ({json_error.msg})")
    if chosen is None:
        if doc is not None:
            raise _unrecognised_json(path, doc, tied)
        raise ImportFailed(
            f"{path}: not a recognised benchmark file ({TRIED}): neither JSON, nor a perflab CSV export, "
            "nor Go benchmark output (no 'BenchmarkName N value unit' line)")

    if chosen == "perflab":
        if doc is None and not stripped.startswith("uuid,"):
            raise ImportFailed(f"{path}: --format perflab: neither a perflab JSON export nor a perflab CSV export"
                               + (f" (the file looks like {LABELS[looks]})" if looks else ""))
        if doc is not None and not transfer.is_export(doc):
            hint = f" (the file looks like {LABELS[looks]})" if looks else ""
            raise ImportFailed(f"{path}: --format perflab: not a perflab export (no \"format\": \"perflab-export\" key){hint}")
        runs = transfer.read_text(path, text, doc)
        return Imported(path, "perflab", _override(runs, tag, box))

    module = MODULES[chosen]
    if module.KIND == "json" and doc is None:
        raise ImportFailed(f"{path}: --format {chosen}: {LABELS[chosen]} is JSON, and this file is not"
                           + (f" (it looks like {LABELS[looks]})" if looks else ""))
    if module.KIND == "text" and doc is not None:
        raise ImportFailed(f"{path}: --format {chosen}: {LABELS[chosen]} is text, and this file is JSON"
                           + (f" (it looks like {LABELS[looks]})" if looks else ""))

    try:
        mtime = dt.datetime.fromtimestamp(Path(path).stat().st_mtime, dt.UTC).replace(tzinfo=None)
    except OSError:
        mtime = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    ctx = Context(path=path, digest=hashlib.sha256(raw).hexdigest(), mtime=mtime, fmt=chosen, tag=tag, box=box)
    try:
        runs = module.parse(doc if module.KIND == "json" else text, ctx)
    except Problem as e:
        raise _problem(path, LABELS[chosen], e, explicit, looks) from None
    checked = [transfer.check_run(r, f"{path}: run {i}") for i, r in enumerate(runs)]
    return Imported(path, chosen, checked, ctx.warnings)

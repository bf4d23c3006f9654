"""Export and import of runs, with their environments and samples, without loss.

JSON: {"format": "perflab-export", "version": 3, "runs": [...]}, one object per
run (with the atomic job it ran) and its samples as [metric, value, unit,
direction, repetition, process] rows; version 3 adds the monitors that ran
(`monitors`) and their time series (`monitor_series`: [monitor, repetition,
process, t, {field: value}] rows), so that a run moved between stores (a lab
worker's spool, an export) keeps its evidence. Versions 1 (no job, samples
without the process) and 2 (no monitors) are still read. CSV carries no
monitor series (one line per sample).
CSV: one line per sample, the run's fields repeated (environment, params and
failures as JSON text), so that spreadsheet users get a flat table.
Import is all or nothing: the whole file is checked before one row is written.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from perflab.core.errors import PerflabError
from perflab.core.spreadsheet import guard, unguard
# The store's column lengths without its SQLAlchemy tables: `perflab import` writes through
# sqlite3 where it can (perflab.store.recording), and the tables cost it 0.1-0.3 s to import.
from perflab.store.basics import LENGTHS

if TYPE_CHECKING:
    from perflab.store import Store

FORMAT = "perflab-export"
VERSION = 3
READABLE_VERSIONS = (1, 2, 3)
RUN_FIELDS = ("uuid", "testbox", "benchmark", "name", "params", "tag", "commit", "dirty",
              "started", "finished", "status", "comment", "error", "environment", "failures", "job")
SAMPLE_FIELDS = ("metric", "value", "unit", "direction", "repetition", "process")
# The CSV header of version 1 exports (still read).
V1_HEADER = RUN_FIELDS[:-1] + SAMPLE_FIELDS[:-1]
STATUSES = {"running", "finished", "partial", "failed", "interrupted"}


def _iso(value: dt.datetime | None) -> str | None:
    return value.isoformat() if value else None


def collect(store: Store, runs) -> list[dict]:
    ids = [r.id for r in runs]
    samples: dict[int, list] = {}
    for smp in store.samples(ids):
        samples.setdefault(smp.run_id, []).append([smp.metric, smp.value, smp.unit, smp.direction, smp.repetition,
                                                   smp.process])
    failures: dict[int, list] = {}
    for f in store.failures(ids):
        failures.setdefault(f.run_id, []).append([f.item, f.message])
    series: dict[int, list] = {}
    # Unpacked, not read by attribute: Row.t is SQLAlchemy's own (deprecated) attribute.
    for run_id, monitor, repetition, process, t, values in store.monitor_series(ids):
        series.setdefault(run_id, []).append([monitor, repetition, process, t, values])
    return [
        {
            "uuid": r.uuid, "testbox": r.box, "benchmark": r.benchmark, "name": r.name,
            "params": r.params, "tag": r.tag, "commit": r.commit, "dirty": r.dirty,
            "started": _iso(r.started), "finished": _iso(r.finished), "status": r.status,
            "comment": r.comment, "error": r.error, "environment": r.environment,
            "failures": failures.get(r.id, []), "job": r.job, "samples": samples.get(r.id, []),
            "monitors": r.monitors, "monitor_series": series.get(r.id, []),
        }
        for r in runs
    ]


def to_json(runs: list[dict]) -> str:
    return json.dumps({"format": FORMAT, "version": VERSION, "runs": runs}, indent=1) + "\n"


# Control characters that move a terminal (ESC, BEL, CR ...) are written as \xNN in a CSV export,
# as `compare --style csv` writes them (issue 31, L7); tab and newline stay (CSV quotes them).
# The JSON export keeps every character exactly: it is the format to move runs with.
_TERMINAL_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _visible(cell: object) -> object:
    if not isinstance(cell, str):
        return cell
    return _TERMINAL_CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}", cell)


def to_csv(runs: list[dict]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(RUN_FIELDS + SAMPLE_FIELDS)
    for run in runs:
        head = [json.dumps(run[k]) if k in ("params", "environment", "failures", "job") else
                ("" if run[k] is None else run[k]) for k in RUN_FIELDS]
        head[RUN_FIELDS.index("dirty")] = "" if run["dirty"] is None else str(bool(run["dirty"])).lower()
        head = [guard(_visible(cell)) for cell in head]  # no cell may run as a spreadsheet formula
        if not run["samples"]:
            w.writerow(head + [""] * len(SAMPLE_FIELDS))
        for metric, value, unit, direction, rep, process in run["samples"]:
            w.writerow(head + [guard(_visible(metric)), repr(float(value)), guard(_visible(unit)), direction, rep,
                               "" if process is None else process])
    return buf.getvalue()


# -- reading -----------------------------------------------------------------

def _check_run(run: dict, where: str) -> dict:
    """A run of an export checked whole: its fields, then its samples (as rows)."""
    run = check_run_fields(run, where)
    if run.get("samples") in (None, ""):
        raise PerflabError(f"{where}: missing key 'samples'")
    run["samples"] = check_samples(run["samples"], where)
    return run


# Columns whose length the store enforces on PostgreSQL and not on SQLite:
# checked here so that both stores refuse the same files.
_LENGTHS = {"testbox": LENGTHS["testbox.name"], "benchmark": LENGTHS["run.benchmark"], "name": LENGTHS["run.name"],
            "tag": LENGTHS["run.tag"], "commit": LENGTHS["run.commit"]}


def check_run_fields(run: dict, where: str) -> dict:
    """The fields of one run (not its samples); dates become datetimes."""
    if not isinstance(run, dict):
        raise PerflabError(f"{where}: expected an object")
    for key in ("uuid", "testbox", "benchmark", "name", "started", "status", "environment"):
        if run.get(key) in (None, ""):
            raise PerflabError(f"{where}: missing key {key!r}")
    if run["status"] not in STATUSES:
        raise PerflabError(f"{where}: status {run['status']!r} is not one of {', '.join(sorted(STATUSES))}")
    for key in ("started", "finished"):
        if run.get(key) is not None and not isinstance(run[key], dt.datetime):
            try:
                run[key] = dt.datetime.fromisoformat(run[key])
            except (TypeError, ValueError):
                raise PerflabError(f"{where}: {key} {run[key]!r} is not an ISO date") from None
    for key, limit in _LENGTHS.items():
        value = run.get(key)
        if value is not None and not isinstance(value, str):
            raise PerflabError(f"{where}: {key} must be a string")
        if value is not None and len(value) > limit:
            raise PerflabError(f"{where}: {key} is {len(value)} characters long ({value[:40]!r}...); "
                               f"the store keeps at most {limit}")
    if run.get("dirty") not in (None, True, False) or isinstance(run.get("dirty"), float):
        raise PerflabError(f"{where}: dirty {run['dirty']!r} is not true, false or null")
    if not isinstance(run["environment"], dict):
        raise PerflabError(f"{where}: environment must be an object")
    if not isinstance(run.get("params") or {}, dict):
        raise PerflabError(f"{where}: params must be an object")
    run["params"] = run.get("params") or {}
    run["failures"] = [(str(a), str(b)) for a, b in (run.get("failures") or [])]
    job = run.get("job")
    if job is not None and not isinstance(job, dict):
        raise PerflabError(f"{where}: key 'job' must be an object (the atomic job) or null")
    if run.get("monitors") is not None and not isinstance(run["monitors"], dict):
        raise PerflabError(f"{where}: key 'monitors' must be an object (the monitors that ran) or null")
    run["monitor_series"] = check_monitor_series(run.get("monitor_series") or [], where)
    return run


def check_monitor_series(rows, where: str) -> list[tuple]:
    """[monitor, repetition, process, t, {field: value}] items as rows, every number finite."""
    if not isinstance(rows, list):
        raise PerflabError(f"{where}: monitor_series must be a list")
    out = []
    limit = LENGTHS["monitor_series.monitor"]
    for i, row in enumerate(rows):
        if not isinstance(row, (list, tuple)) or len(row) != 5 or not isinstance(row[4], dict):
            raise PerflabError(f"{where}, monitor_series {i}: expected [monitor, repetition, process, t, {{field: value}}]")
        monitor, rep, process, t, values = row
        try:
            item = (str(monitor), int(rep), None if process in (None, "") else int(process), float(t),
                    {str(k): float(v) for k, v in values.items()})
        except (TypeError, ValueError, OverflowError):
            raise PerflabError(f"{where}, monitor_series {i}: repetition, process, t and values must be numbers") from None
        if len(item[0]) > limit or not math.isfinite(item[3]) or not all(map(math.isfinite, item[4].values())):
            raise PerflabError(f"{where}, monitor_series {i}: monitor name longer than {limit} characters "
                               f"or a value that is not finite")
        out.append(item)
    return out


def check_samples(samples, where: str) -> list[tuple]:
    """[metric, value, unit, direction, repetition(, process)] items as rows, each value finite,
    and perflab's own figures of a command within what they can be (a wall time
    above 0, CPU times, sizes not below 0, an integer exit status). Other
    metrics keep their sign: some are differences of two measurements."""
    from perflab.exchange.rules import METRIC_RULES

    if not isinstance(samples, list):
        raise PerflabError(f"{where}: samples must be a list")
    rows = []
    for i, smp in enumerate(samples):
        if not isinstance(smp, (list, tuple)) or len(smp) not in (5, 6):
            raise PerflabError(f"{where}, sample {i}: expected [metric, value, unit, direction, repetition, process]")
        metric, value, unit, direction, rep, process = (*smp, None) if len(smp) == 5 else smp
        try:
            row = (str(metric), float(value), str(unit), int(direction), int(rep),
                   None if process in (None, "") else int(process))
        except (TypeError, ValueError, OverflowError):
            raise PerflabError(f"{where}, sample {i}: value {value!r}, direction {direction!r} or repetition {rep!r} is not a number") from None
        rule = METRIC_RULES.get(row[0])
        if rule is None:
            if not math.isfinite(row[1]):
                raise PerflabError(f"{where}, sample {i} ({row[0][:60]}): {row[1]!r} is not a finite number")
        elif not rule.accepts(row[1]):
            raise PerflabError(f"{where}, sample {i} ({row[0]}): {rule.why_not(row[1])}")
        if len(row[0]) > _METRIC_LENGTH or len(row[2]) > _UNIT_LENGTH:
            raise PerflabError(f"{where}, sample {i}: metric name or unit too long "
                               f"(at most {_METRIC_LENGTH} and {_UNIT_LENGTH} characters)")
        rows.append(row)
    return rows


_METRIC_LENGTH = LENGTHS["sample.metric"]
_UNIT_LENGTH = LENGTHS["sample.unit"]


def _check_header(path, doc) -> None:
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise PerflabError(f"{path}: not a perflab export (no \"format\": \"{FORMAT}\" key; for other tools' files see `perflab import --help`)")
    if doc.get("version") not in READABLE_VERSIONS:
        raise PerflabError(f"{path}: export version {doc.get('version')!r} is not supported "
                           f"(expected one of {', '.join(map(str, READABLE_VERSIONS))})")
    if not isinstance(doc.get("runs"), list):
        raise PerflabError(f"{path}: key 'runs' must be a list")


def _read_json(path: Path, text: str, doc=None) -> list[dict]:
    if doc is None:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise PerflabError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
    _check_header(path, doc)
    return [_check_run(r, f"{path}: run {i}") for i, r in enumerate(doc["runs"])]


def stream_json(path, document) -> Iterator[dict]:
    """The runs of a perflab JSON export (a perflab.exchange.importers.source.Document),
    checked and handed over one at a time."""
    _check_header(path, document.header)
    for i, node in enumerate(document.items("runs")):
        yield _check_run(node.value, f"{path}: run {i}")


def _read_csv(path: Path, text: str) -> list[dict]:
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None or tuple(header) not in (RUN_FIELDS + SAMPLE_FIELDS, V1_HEADER):
        raise PerflabError(f"{path}:1: not a perflab CSV export (expected header {','.join(RUN_FIELDS + SAMPLE_FIELDS)})")
    v1 = tuple(header) == V1_HEADER
    runs: dict[str, dict] = {}
    for line_no, row in enumerate(reader, start=2):
        if len(row) != len(header):
            raise PerflabError(f"{path}:{line_no}: expected {len(header)} fields, found {len(row)}")
        rec = dict(zip(header, map(unguard, row)))  # undo to_csv's formula guard
        run = runs.get(rec["uuid"])
        if run is None:
            run = {k: (rec.get(k) if rec.get(k, "") != "" else None) for k in RUN_FIELDS}
            for k in ("params", "environment", "failures") + (() if v1 else ("job",)):
                try:
                    run[k] = None if k == "job" and rec[k] == "" else json.loads(rec[k])
                except json.JSONDecodeError:
                    raise PerflabError(f"{path}:{line_no}: column {k} is not valid JSON") from None
            run["dirty"] = {"true": True, "false": False, "": None}.get(rec["dirty"], "?")
            if run["dirty"] == "?":
                raise PerflabError(f"{path}:{line_no}: dirty {rec['dirty']!r} is not true, false or empty")
            run["samples"] = []
            run["_line"] = line_no
            runs[rec["uuid"]] = run
        if rec["metric"]:
            run["samples"].append([rec["metric"], rec["value"], rec["unit"], rec["direction"], rec["repetition"],
                                   rec.get("process", "")])
    return [_check_run(r, f"{path}:{r.pop('_line')}") for r in runs.values()]


check_run = _check_run


def is_export(doc) -> bool:
    """Whether a parsed JSON document declares itself a perflab export."""
    return isinstance(doc, dict) and isinstance(doc.get("format"), str) and doc["format"].startswith("perflab")


def read_text(path: str | Path, text: str, doc=None) -> list[dict]:
    """The runs of a perflab export (JSON or CSV) already read into `text`
    (and, for JSON, perhaps already parsed into `doc`)."""
    p = Path(path)
    stripped = text.lstrip()
    if doc is not None or stripped.startswith("{"):
        return _read_json(p, text, doc)
    if stripped.startswith("uuid,"):
        return _read_csv(p, text)
    raise PerflabError(f"{path}: neither a perflab JSON export nor a perflab CSV export")


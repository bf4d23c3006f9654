"""pyperf JSON (`-o FILE`, also gzip-compressed): one run per benchmark.

Layout (pyperf's format version 1.0): {"version": "1.0", "metadata": {...
common to all benchmarks}, "benchmarks": [{"metadata": {... common to its
runs}, "runs": [{"metadata": {...}, "warmups": [[loops, value], ...],
"values": [...]}]}]}. Values are per loop iteration already (pyperf divides
by loops and inner_loops). Warmups are left out; a run without values is
pyperf's calibration run and is skipped. The benchmark's name and unit are
in its metadata or, when the file holds one benchmark, in the suite's.
"""

from __future__ import annotations

import datetime as dt
from itertools import chain, count, repeat

from perflab.exchange.importers.base import DURATION, FINITE, SIZE, Context, Problem, check_values, parse_time, scalar_facts
from perflab.exchange.importers.source import Document
from perflab.core.model import LOWER_IS_BETTER

NAME = "pyperf"
LABEL = "pyperf JSON"
KIND = "json"

# pyperf's units, and what perflab calls them. pyperf's own compare_to treats
# every unit as smaller-is-better ("slower" when bigger); so does perflab.
# A value in seconds is a duration (> 0); bytes are a size (>= 0); an integer
# (a count the benchmark chose) only has to be finite.
UNITS = {"second": ("pyperf.time", "s", DURATION), "byte": ("pyperf.memory", "B", SIZE),
         "integer": ("pyperf.value", "", FINITE)}

# Suite metadata perflab already has a name for (environment.capture's keys).
_CANONICAL = {"hostname": "hostname", "cpu_model_name": "cpu_model", "cpu_count": "cpu_threads"}


def sniff(doc) -> int:
    if not isinstance(doc, dict) or "benchmarks" not in doc:
        return 0
    score = 1
    if str(doc.get("version", "")).startswith("1."):
        score += 1
    if isinstance(doc.get("metadata"), dict):
        score += 1
        score += "perf_version" in doc["metadata"]
    benches = doc["benchmarks"]
    if isinstance(benches, list) and benches and isinstance(benches[0], dict) and "runs" in benches[0]:
        score += 2
    return score


def parse(doc: Document, ctx: Context) -> None:
    root = doc.root
    version = root.get("version", default=None).value
    if version is not None and not str(version).startswith("1."):
        raise Problem(f"its format version {version!r} is not one perflab reads (1.x)")
    suite = root.get("metadata", "object", default={}).value
    if doc.count("benchmarks") == 0:
        root.get("benchmarks", "list")
        raise Problem("key 'benchmarks' is an empty list: there is nothing to import")
    for bench in doc.items("benchmarks"):
        meta = {**suite, **bench.get("metadata", "object", default={}).value}
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise Problem(f"key '{bench.path}.metadata.name' is missing (nor is there a name in the suite's metadata)")
        unit = meta.get("unit", "second")
        if unit not in UNITS:
            raise Problem(f"key '{bench.path}.metadata.unit' is {unit!r}, not one of {', '.join(UNITS)}")
        metric, perflab_unit, rule = UNITS[unit]
        samples, dates, total = [], [], 0
        for run in bench.get("runs", "list").items():
            run_meta = run.get("metadata", "object", default={})
            if run_meta.has("date"):
                start = parse_time(run_meta.value["date"], f"{run.path}.metadata.date", naive_is_local=True)
                end = start
                if isinstance(run_meta.value.get("duration"), (int, float)):
                    end = start + dt.timedelta(seconds=run_meta.number("duration", DURATION))
                dates.append((start, end))
            if not run.has("values"):
                continue  # calibration run: warmups only
            values = run.get("values", "list")
            check_values(values.value, values.path, rule)
            # Rows made as the store takes them (no list of a million tuples);
            # repetitions count across the worker runs.
            samples.append(zip(repeat(metric), values.value, repeat(perflab_unit), repeat(LOWER_IS_BETTER),
                               count(total)))
            total += len(values.value)
        if not total:
            raise Problem(f"benchmark {name!r} ({bench.path}) has no run with values, only warmups")
        facts = {canon: meta[key] for key, canon in _CANONICAL.items() if key in meta}
        if isinstance(meta.get("python_version"), str):
            facts["python"] = meta["python_version"].split()[0]
        facts.update(scalar_facts("pyperf", meta, skip=("name",)))
        ctx.run(
            benchmark="pyperf", name=name, params={"name": name}, samples=chain.from_iterable(samples), facts=facts,
            hostname=meta.get("hostname") if isinstance(meta.get("hostname"), str) else None,
            started=min(d[0] for d in dates) if dates else None,
            finished=max(d[1] for d in dates) if dates else None,
        )

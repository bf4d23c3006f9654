"""pytest-benchmark JSON (`--benchmark-json=FILE`, or a file under .benchmarks/
written by `--benchmark-save`/`--benchmark-autosave`).

{"machine_info": {...}, "commit_info": {id, dirty, branch, ...},
"benchmarks": [{group, name, fullname, params, stats: {min, max, mean,
stddev, rounds, median, ..., data?}}], "datetime": ..., "version": ...}

One run per benchmark (its fullname); with stats.data (the raw per-round
timings, each already divided by the round's iterations) one sample per value.
Without stats.data (files saved without --benchmark-save-data) only a summary
exists: perflab stores the mean as the one sample of the run and says so
(a warning at import and the run's comment keep rounds, stddev, min, median
and max): a comparison then has n=1 per side and cannot call anything
significant, which is the truth about such a file.
"""

from __future__ import annotations

from itertools import count, repeat

from perflab.exchange.importers.base import COUNT, DURATION, Context, Problem, Rule, check_values, parse_time, scalar_facts
from perflab.exchange.importers.source import Document
from perflab.core.model import LOWER_IS_BETTER

NAME = "pytest-benchmark"
LABEL = "pytest-benchmark JSON"
KIND = "json"
METRIC = "pytest-benchmark.time"
# The summary's figures (kept in the run's comment): times are durations, the
# spread can be 0, rounds are a count.
SUMMARY_RULES = {"rounds": COUNT, "mean": DURATION, "stddev": Rule("a standard deviation (>= 0)", 0.0, False),
                 "min": DURATION, "median": DURATION, "max": DURATION}


def sniff(doc) -> int:
    if not isinstance(doc, dict):
        return 0
    score = 2 * sum(k in doc for k in ("machine_info", "commit_info"))
    if score:
        score += "datetime" in doc
    if "benchmarks" in doc:
        score += 1
        benches = doc["benchmarks"]
        if isinstance(benches, list) and benches and isinstance(benches[0], dict):
            score += 2 * sum(k in benches[0] for k in ("stats", "fullname"))
    return score


def parse(doc: Document, ctx: Context) -> None:
    root = doc.root
    machine = root.get("machine_info", "object", default={}).value
    commit_info = root.get("commit_info", "object", default={}).value
    total = doc.count("benchmarks")
    if total == 0:
        root.get("benchmarks", "list")
        raise Problem("key 'benchmarks' is an empty list: there is nothing to import")
    started = parse_time(root.value["datetime"], "datetime") if root.has("datetime") else None

    facts = {}
    host = machine.get("node") if isinstance(machine.get("node"), str) and machine.get("node") else None
    if host:
        facts["hostname"] = host
    cpu = machine.get("cpu") if isinstance(machine.get("cpu"), dict) else {}
    for canon, value in (("cpu_model", cpu.get("brand_raw")), ("cpu_threads", cpu.get("count")),
                         ("arch", machine.get("machine")), ("kernel_release", machine.get("release")),
                         ("python", machine.get("python_version"))):
        if value not in (None, ""):
            facts[canon] = value
    facts.update(scalar_facts("pytest-benchmark", machine))
    facts.update(scalar_facts("pytest-benchmark.commit_info", commit_info, skip=("id", "dirty")))
    commit = commit_info.get("id") if isinstance(commit_info.get("id"), str) and commit_info.get("id") else None
    dirty = commit_info.get("dirty") if isinstance(commit_info.get("dirty"), bool) else None

    summarised = []
    for b in doc.items("benchmarks"):
        fullname = b.text("fullname", default=None) or b.text("name")
        stats = b.get("stats", "object")
        comment = None
        if stats.has("data"):
            data = stats.get("data", "list")
            if not data.value:
                raise Problem(f"key '{stats.path}.data' is an empty list")
            # Each value is one round's time divided by its iterations: a duration.
            check_values(data.value, data.path, DURATION)
            values = data.value
        else:
            mean = stats.number("mean", DURATION)
            values = [mean]
            summarised.append(fullname)
            shown = []
            for key in ("rounds", "mean", "stddev", "min", "median", "max"):
                if stats.has(key):
                    shown.append(f"{key}={stats.number(key, SUMMARY_RULES[key]):.6g}")
            comment = ("pytest-benchmark summary only (no stats.data): " + " ".join(shown)
                       + "; the mean is stored as the run's one sample (n=1)")
        samples = zip(repeat(METRIC), values, repeat("s"), repeat(LOWER_IS_BETTER), count())
        # The test's parametrize values, so that `perflab compare n=100 ...` can select them.
        params = {"test": fullname}
        for key, value in b.get("params", "object", default={}).value.items():
            params[f"param.{key}" if key == "test" else key] = value
        ctx.run(
            benchmark="pytest-benchmark", name=fullname, params=params, samples=samples,
            facts=facts, hostname=host, started=started, commit=commit, dirty=dirty, comment=comment,
        )
    if summarised:
        ctx.warn(f"{len(summarised)} of {total} benchmarks have no raw timings (stats.data): each is stored "
                 "as one sample, its mean (n=1), so comparisons of them cannot reach significance; "
                 "save with --benchmark-json or --benchmark-save-data to keep every round")

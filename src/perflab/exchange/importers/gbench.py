"""Google Benchmark `--benchmark_format=json` (or `--benchmark_out=FILE`).

{"context": {date, host_name, executable, num_cpus, mhz_per_cpu,
cpu_scaling_enabled, caches, load_avg, library_build_type},
"benchmarks": [{name, run_name, run_type: iteration|aggregate, repetitions,
repetition_index, threads, iterations, real_time, cpu_time, time_unit,
bytes_per_second?, items_per_second?, <user counters>..., error_occurred?,
error_message?}]}

One run per run_name; each iteration entry is one repetition. Aggregates
(mean, median, stddev, cv, BigO, RMS) are derived from the iterations and
are left out; a benchmark present only as aggregates
(--benchmark_report_aggregates_only) cannot be imported, and the message
says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from perflab.exchange.importers.base import (CPU_TIME, DURATION, RATE, Context, Problem, Rule, parse_time,
                                    scalar_facts)
from perflab.exchange.importers.source import Document
from perflab.core.model import HIGHER_IS_BETTER, INFORMATIONAL, LOWER_IS_BETTER

NAME = "gbench"
LABEL = "Google Benchmark JSON"
KIND = "json"

TIME_UNITS = ("ns", "us", "ms", "s")
# Keys of a benchmark entry that are not user counters.
_KNOWN = {
    "name", "family_index", "per_family_instance_index", "run_name", "run_type", "repetitions",
    "repetition_index", "threads", "iterations", "real_time", "cpu_time", "time_unit",
    "bytes_per_second", "items_per_second", "aggregate_name", "aggregate_unit", "label",
    "error_occurred", "error_message", "big_o", "rms", "complexity", "skipped", "skip_message",
}
RATES = {"bytes_per_second": "B/s", "items_per_second": "items/s"}
REPETITION = Rule("a repetition index (an integer >= 0)", 0.0, False, integral=True)


def sniff(doc) -> int:
    if not isinstance(doc, dict):
        return 0
    score = 2 if isinstance(doc.get("context"), dict) else 0
    if isinstance(doc.get("context"), dict):
        score += sum(k in doc["context"] for k in ("host_name", "num_cpus", "library_build_type", "executable"))
    if "benchmarks" in doc:
        score += 1
        benches = doc["benchmarks"]
        if isinstance(benches, list) and benches and isinstance(benches[0], dict):
            score += 2 * sum(k in benches[0] for k in ("run_type", "real_time", "time_unit"))
    return score


def parse(doc: Document, ctx: Context) -> None:
    root = doc.root
    context = root.get("context", "object")
    if doc.count("benchmarks") == 0:
        root.get("benchmarks", "list")
        raise Problem("key 'benchmarks' is an empty list: there is nothing to import")
    started = parse_time(context.value["date"], "context.date") if context.has("date") else None
    host = context.value.get("host_name") if isinstance(context.value.get("host_name"), str) else None
    facts = {}
    if host:
        facts["hostname"] = host
    if isinstance(context.value.get("num_cpus"), int):
        facts["cpu_threads"] = context.value["num_cpus"]
    facts.update(scalar_facts("gbench", context.value, skip=("date",)))

    # Entries are read one at a time; each keeps only its sample rows. The runs
    # are written at the end: an entry of a run may come after other runs'.
    runs = _Runs()
    for b in doc.items("benchmarks"):
        runs.read(b)
    _refuse_only_aggregates(runs, ctx)
    _write(runs, ctx, facts=facts, hostname=host, started=started)


@dataclass
class _Runs:
    """The entries read so far, by run name, in the order the runs first appear."""

    order: list[str] = field(default_factory=list)
    samples: dict[str, list[tuple]] = field(default_factory=dict)
    iterations: dict[str, int] = field(default_factory=dict)
    aggregates: dict[str, set] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    def read(self, b) -> None:
        """One entry of 'benchmarks': an error, an aggregate (only noted) or an iteration's samples."""
        name = b.text("name")
        run_name = b.text("run_name", default=name)
        run_type = b.text("run_type", default="iteration")
        if run_name not in self.samples:
            self.order.append(run_name)
            self.samples[run_name] = []
            self.iterations[run_name] = 0
        if b.value.get("error_occurred") or b.value.get("skipped") not in (None, False, 0, "NotSkipped"):
            self.errors[run_name] = str(b.value.get("error_message") or b.value.get("skip_message") or "error_occurred")
            return
        if run_type == "aggregate":
            self.aggregates.setdefault(run_name, set()).add(str(b.value.get("aggregate_name", "?")))
            return
        if run_type != "iteration":
            raise Problem(f"key '{b.path}.run_type' is {run_type!r}, expected 'iteration' or 'aggregate'")
        rep = self.iterations[run_name]
        self.iterations[run_name] += 1
        if b.has("repetition_index"):
            rep = int(b.number("repetition_index", REPETITION))
        self.samples[run_name].extend(_rows(b, rep))

    def only_aggregates(self) -> list[str]:
        return [n for n in self.order if not self.iterations[n] and n not in self.errors]


def _rows(b, rep: int) -> list[tuple]:
    """The sample rows of one iteration entry."""
    unit = b.text("time_unit", default="ns")
    if unit not in TIME_UNITS:
        raise Problem(f"key '{b.path}.time_unit' is {unit!r}, not one of {', '.join(TIME_UNITS)}")
    rows = [("gbench.real_time", b.number("real_time", DURATION), unit, LOWER_IS_BETTER, rep),
            # CPU time of the benchmark's thread: 0 for one that only waits.
            ("gbench.cpu_time", b.number("cpu_time", CPU_TIME), unit, LOWER_IS_BETTER, rep)]
    for key, rate_unit in RATES.items():
        if b.has(key):
            rows.append((f"gbench.{key}", b.number(key, RATE), rate_unit, HIGHER_IS_BETTER, rep))
    for key, value in b.value.items():
        if key in _KNOWN or key in RATES:
            continue
        # A user counter: the JSON carries no flags (rate, inverse ...), so no direction, and any sign.
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            rows.append((f"gbench.{key}", b.number(key), "", INFORMATIONAL, rep))
    return rows


def _refuse_only_aggregates(runs: _Runs, ctx: Context) -> None:
    """A file of aggregates only has no samples: refused; some runs so: a warning."""
    only_aggregates = runs.only_aggregates()
    if only_aggregates and len(only_aggregates) == len([n for n in runs.order if n not in runs.errors]):
        kinds = sorted(set().union(*(runs.aggregates.get(n, set()) for n in only_aggregates)))
        raise Problem(f"it holds only aggregates ({', '.join(kinds)}) and no iterations: the samples are not in the file; "
                      "rerun without --benchmark_report_aggregates_only "
                      "(--benchmark_display_aggregates_only keeps the repetitions in the JSON)")
    if only_aggregates:
        ctx.warn(f"only aggregates, no iterations, for {', '.join(only_aggregates[:5])}"
                 + (f" and {len(only_aggregates) - 5} more" if len(only_aggregates) > 5 else "") + ": not imported")


def _write(runs: _Runs, ctx: Context, **common) -> None:
    """Each run to the context: failed runs with their error, and a warning about runs of one iteration."""
    single, count = [], 0
    for run_name in runs.order:
        if run_name in runs.errors and not runs.iterations[run_name]:
            ctx.run(benchmark="gbench", name=run_name, params={"name": run_name}, samples=(), **common,
                    status="failed", error=f"Google Benchmark reported an error: {runs.errors[run_name]}")
            count += 1
            continue
        if not runs.iterations[run_name]:
            continue
        if runs.iterations[run_name] == 1:
            single.append(run_name)
        ctx.run(benchmark="gbench", name=run_name, params={"name": run_name}, samples=runs.samples.pop(run_name),
                **common)
        count += 1
    if single:
        shown = ", ".join(single[:5]) + (f" and {len(single) - 5} more" if len(single) > 5 else "")
        ctx.warn(f"{len(single)} of {count} benchmarks have one iteration only (n=1): {shown}; run with "
                 "--benchmark_repetitions=10 for comparisons that can reach significance")

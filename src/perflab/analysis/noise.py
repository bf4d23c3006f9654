"""The machine's noise as stored: A/A measurements (`perflab noise`) read back per metric.

`perflab noise` runs a job twice as sides A and B of one interleaved batch and stores
them like any run, tagged `noise-ID`, each run's job carrying `"noise": {"id", "side",
"rounds"}`. This module turns such a pair into figures (stats.noise) and finds the
latest pair for a job, so that `check`, `robot` and `bisect` can say before they start
which metrics can see the change asked about, and how many runs that takes.
"""

from __future__ import annotations

import socket
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from perflab.analysis.selection import EXECUTION_PARAMS, duration_params, select
from perflab.core.errors import PerflabError
from perflab.jobs.job import AtomicJob
from perflab.core.model import INFORMATIONAL
from perflab.stats.noise import MOST_RUNS, RUNS_PER_SIDE, MetricNoise, measure

if TYPE_CHECKING:   # annotations only: importing the Store loads SQLAlchemy (0.1-0.3 s)
    from perflab.store import Store

NOISE_KEY = "noise"       # the key of a noise run's job JSON: {"id", "side", "rounds"}
TAG_PREFIX = "noise-"
USABLE = ("finished", "partial")
DEFAULT_CHANGE = 0.02     # `perflab noise --change`: 2%, a change kernel developers report
# CPU time is a candidate metric of its own: user + system, added up per repetition where a
# run records both (cmd's time.user_time and time.system_time); it is derived here, not stored.
USER_SUFFIX, SYSTEM_SUFFIX, CPU_SUFFIX = "user_time", "system_time", "cpu_time"
# Shown first, in this order (by the metric name's ending); the rest by name.
FIRST = ("elapsed_time", CPU_SUFFIX, "instructions")


@dataclass
class NoiseReport:
    """One A/A measurement: its runs and each metric's figures."""

    noise_id: str
    name: str
    box: str | None
    rounds: int
    run_a: int
    run_b: int
    started: datetime | None
    change: float = 0.02          # the change asked about (a fraction)
    metrics: list[MetricNoise] = field(default_factory=list)
    needs: dict[str, int | None] = field(default_factory=dict)   # metric -> runs per side for `change`; None: > MOST_RUNS

    @property
    def tag(self) -> str:
        return TAG_PREFIX + self.noise_id

    def metric(self, name: str) -> MetricNoise | None:
        return next((m for m in self.metrics if m.metric == name), None)


def noise_job(job: AtomicJob, noise_id: str, side: str, rounds: int) -> AtomicJob:
    """Side A or B of an A/A of `job`: `rounds` runs, tagged and marked so it can be found."""
    return job.with_(runs=rounds, tag=TAG_PREFIX + noise_id, comment=f"noise A/A {noise_id}, side {side}",
                     **{NOISE_KEY: {"id": noise_id, "side": side, "rounds": rounds}})


def from_runs(store: Store, run_a, run_b, change: float = DEFAULT_CHANGE) -> NoiseReport:
    """The figures of an A/A from its two stored runs (rows or ids), and the runs each
    metric needs to see a relative `change`."""
    a = run_a if hasattr(run_a, "id") else store.get_run(run_a)
    b = run_b if hasattr(run_b, "id") else store.get_run(run_b)
    per_side = [_per_repetition(store, a.id), _per_repetition(store, b.id)]
    marker = (a.job or {}).get(NOISE_KEY) or {}
    report = NoiseReport(str(marker.get("id", "")), a.name, a.box, int(marker.get("rounds") or 0), a.id, b.id,
                         a.started, change)
    for metric in _ordered(set(per_side[0]) & set(per_side[1])):
        unit, series_a = per_side[0][metric]
        _, series_b = per_side[1][metric]
        m = measure(metric, unit, series_a, series_b)
        report.metrics.append(m)
        report.needs[metric] = m.runs_needed(change)
    return report


def _per_repetition(store: Store, run_id: int) -> dict[str, tuple[str, list[float]]]:
    """metric -> (unit, one value per repetition in order: the mean of that repetition's samples)."""
    sums: dict[str, dict[int, list[float]]] = defaultdict(dict)
    units = {}
    for row in store.samples([run_id]):
        if row.direction == INFORMATIONAL:
            continue     # exit status and the like: not a measure of speed
        units[row.metric] = row.unit
        sums[row.metric].setdefault(row.repetition, []).append(row.value)
    out = {m: (units[m], [sum(v) / len(v) for _, v in sorted(reps.items())]) for m, reps in sums.items()}
    for metric in list(out):
        if metric.endswith(USER_SUFFIX):
            prefix = metric[: -len(USER_SUFFIX)]
            system = out.get(prefix + SYSTEM_SUFFIX)
            user_unit, user = out[metric]
            if system is not None and system[0] == user_unit and len(system[1]) == len(user):
                out[prefix + CPU_SUFFIX] = (user_unit, [u + s for u, s in zip(user, system[1])])
    return out


def _ordered(metrics: set[str]) -> list[str]:
    def rank(name: str) -> tuple:
        ends = [i for i, suffix in enumerate(FIRST) if name.endswith(suffix)]
        return (ends[0] if ends else len(FIRST), name)

    return sorted(metrics, key=rank)


def is_noise_run(run) -> bool:
    return isinstance(run.job, dict) and isinstance(run.job.get(NOISE_KEY), dict)


def _measured(job: dict) -> tuple:
    """What a job measures, for matching a noise measurement to it: the family, the parameters
    that are not about duration, and the guest it runs in."""
    benchmark = job.get("benchmark")
    ignored = EXECUTION_PARAMS | duration_params(benchmark)
    defaults = _defaults(benchmark)
    # A parameter left at its default is the same job as one that spells the default out
    # (`perflab noise -- ./prog` stores shell: false; `perflab bisect -- ./prog` leaves it out).
    params = {k: v for k, v in (job.get("params") or {}).items()
              if k not in ignored and not (k in defaults and defaults[k] == v)}
    return benchmark, params, job.get("kernel"), job.get("vm") or {}


def _defaults(benchmark) -> dict:
    """The family's parameters that have a default, and their defaults ({} for an unknown family)."""
    from perflab import benchmarks

    if benchmark not in benchmarks.FAMILIES:
        return {}
    model = getattr(benchmarks.family(benchmark), "Params", None)
    found = getattr(model, "model_fields", {}) or {}
    return {name: f.default for name, f in found.items() if not f.is_required() and f.default_factory is None}


def latest(store: Store, job: AtomicJob | dict, box: str | None = None,
           change: float = DEFAULT_CHANGE) -> NoiseReport | None:
    """The latest complete A/A of this job on `box` (default: this machine), or None."""
    doc = job.to_dict() if isinstance(job, AtomicJob) else dict(job)
    want = _measured(doc)
    runs = store.find_runs(benchmark=doc.get("benchmark"), box=box or socket.gethostname())
    pairs: dict[str, dict[str, object]] = defaultdict(dict)
    for run in runs:
        if run.status in USABLE and is_noise_run(run) and run.benchmark == doc.get("benchmark") \
                and _measured(run.job) == want:
            marker = run.job[NOISE_KEY]
            pairs[str(marker.get("id"))][str(marker.get("side"))] = run
    complete = [p for p in pairs.values() if "A" in p and "B" in p]
    if not complete:
        return None
    newest = max(complete, key=lambda p: (p["B"].started, p["B"].id))
    return from_runs(store, newest["A"], newest["B"], change)


def job_of(store: Store, job_or_selection) -> dict:
    """A job (AtomicJob or its JSON form) as JSON, or the job of the latest run an operand selects."""
    if isinstance(job_or_selection, AtomicJob):
        return job_or_selection.to_dict()
    if isinstance(job_or_selection, dict):
        return job_or_selection
    chosen = [r for r in select(store, str(job_or_selection)).runs if isinstance(r.job, dict)]
    if not chosen:
        raise PerflabError(f"{job_or_selection}: its runs record no job to match a noise measurement with")
    return max(chosen, key=lambda r: (r.started, r.id)).job


def stored_noise(store: Store, job_or_selection, metric: str, box: str | None = None) -> MetricNoise | None:
    """The latest stored noise figures of `metric` for a job (or the job of a selection), or None."""
    report = latest(store, job_of(store, job_or_selection), box)
    return report.metric(metric) if report is not None else None


def _runs_of(job) -> int:
    """The runs a job will take: its own, else its family's default for its parameters."""
    if isinstance(job, AtomicJob):
        if job.runs:
            return int(job.runs)
        if job.resolved:
            return int(job.family.runs_for(job.parsed))
        return 10
    return int((job or {}).get("runs") or 10)


# The run counts the stored figures are offered for (stats.noise.RUNS_PER_SIDE): the choice is the
# fewest of them that sees the change. An exact metric needs 2: one run sees any change, the second
# shows the count is deterministic (as bisect's ends).
OFFERED = RUNS_PER_SIDE
EXACT_RUNS = 2
WALL_SUFFIX = "elapsed_time"


@dataclass
class RunsPlan:
    """What the stored noise says before work starts: the lines to print, and the runs per side chosen."""

    lines: list[str]
    runs: int | None = None          # runs per side to take; None: keep the job's own (no A/A, or none sees it)
    report: NoiseReport | None = None
    explicit: bool = False           # the caller's --runs decided


def fewest_runs(m: MetricNoise, change: float) -> int | None:
    """The fewest of the offered runs per side at which `m` sees a relative `change` (stored figures); None if none."""
    if m.exact:
        return EXACT_RUNS
    return next((n for n, smallest in m.detectable if smallest <= change), None)


def _considered(report: NoiseReport, doc: dict, metrics) -> list[MetricNoise]:
    """The metrics the verdict rests on: those the caller names (a callable deciding by name), else the
    job's primary ones (comparison.fdr: what `check` gates on); CPU time derived here only when named."""
    from perflab.analysis.comparison.fdr import is_primary
    from perflab.monitors import monitor_of

    if metrics is not None:
        return [m for m in report.metrics if metrics(m.metric)]
    return [m for m in report.metrics if not m.metric.endswith(CPU_SUFFIX) and not monitor_of(m.metric)
            and is_primary(m.metric, None, doc.get("benchmark") or "")]


def plan_runs(store: Store, job, change: float, *, metrics=None, runs: int | None = None,
              box: str | None = None, who: str = "check", how: str = "perflab noise JOB",
              default_runs: int | None = None) -> RunsPlan:
    """Before `check`, `robot` or `bisect` starts: the latest stored A/A of `job` on `box`, which metrics
    see a relative `change`, and the runs per side that takes: the fewest of OFFERED at which every
    considered metric that can see it does (`metrics`: a callable choosing metrics by name; default the
    job's primary ones). `runs` (the caller's explicit option) wins. Without an A/A, one line saying
    how to measure it (`how`). `default_runs`: what the caller takes when the noise picks nothing
    (default: the job's runs)."""
    doc = job_of(store, job)
    report = latest(store, doc, box, change)
    if report is None:
        return RunsPlan([f"no noise measurement of this job on {box or 'this machine'}: `{how}` would measure "
                         f"which metrics can see a {change * 100:g}% change, and how many runs that takes"])
    chosen = _considered(report, doc, metrics)
    fewest = {m.metric: fewest_runs(m, change) for m in chosen}
    seeing = [n for n in fewest.values() if n is not None]
    pick = max(seeing) if seeing else None
    n = runs or pick or default_runs or _runs_of(job)
    lines = [_seen_line(report, n, change)]
    names = ", ".join(m.metric for m in chosen) or "none of its metrics"
    if runs:
        lines.append(f"{runs} runs per side (--runs); the stored noise would take {pick or 'more than ' + str(OFFERED[-1])}")
    elif pick is not None:
        lines.append(f"{pick} runs per side, chosen from the stored noise: the fewest of "
                     f"{'/'.join(map(str, OFFERED))} at which {names} see{'s' if len(chosen) == 1 else ''} "
                     f"{change * 100:g}% (--runs N to choose)")
    blind = [m for m in chosen if fewest[m.metric] is None]
    if blind:
        lines.append(_blind_line(report, blind, change, who))
    return RunsPlan(lines, None if runs else pick, report, bool(runs))


def _seen_line(report: NoiseReport, n: int, change: float) -> str:
    seen, blind = [], []
    for m in report.metrics:
        need = report.needs[m.metric]
        needs = f">{MOST_RUNS}" if need is None else str(need)
        smallest = "exact" if m.exact else f"{m.detectable_with(n) * 100:.1f}%"
        entry = f"{m.metric} (smallest seen {smallest}; needs {needs} runs per side)"
        (seen if m.detectable_with(n) <= change else blind).append(entry)
    when = f", measured {report.started:%Y-%m-%d %H:%M}" if report.started else ""
    return (f"noise of {report.name[:60]} ({report.tag}{when}): with {n} runs per side a "
            f"{change * 100:g}% change is seen by: {', '.join(seen) or 'none'}; "
            f"not seen by: {', '.join(blind) or 'none'}")


def _blind_line(report: NoiseReport, blind: list[MetricNoise], change: float, who: str) -> str:
    """The metrics that no offered run count lets see the change, and (for wall time) what can."""
    most = OFFERED[-1]
    said = ", ".join(f"{m.metric} (smallest {m.detectable_with(most) * 100:.1f}% with {most})" for m in blind)
    line = f"no run count of {'/'.join(map(str, OFFERED))} per side lets {said} see {change * 100:g}%"
    if any(m.metric.endswith(WALL_SUFFIX) for m in blind):
        able = [(m.metric, fewest_runs(m, change)) for m in report.metrics
                if not m.metric.endswith(WALL_SUFFIX) and fewest_runs(m, change) is not None
                and (m.metric.endswith(CPU_SUFFIX) or m.exact)]
        if able:
            line += "; " + ", ".join(f"{name} does with {k}" for name, k in able)
            if who == "bisect":
                line += " (--metric)"
        if not any(m.exact for m in report.metrics):
            line += "; instruction counts see any change with one run (`measure: instructions`, docs/instructions.md)"
    return line


def before_start(store: Store, jobs: list, change: float, runs: int | None = None,
                 box: str | None = None) -> list[str]:
    """What `check`, `robot` and `bisect` say before they start, per job that has a stored A/A:
    which metrics see a `change` (a fraction) with the runs they will take, and how many each needs."""
    lines = []
    for job in jobs:
        report = latest(store, job, box, change)
        if report is not None:
            lines.append(_seen_line(report, runs or _runs_of(job), change))
    return lines

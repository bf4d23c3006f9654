"""The run service: what `perflab run`, `rerun` and `check --job` were asked for -> atomic jobs,
built one way, run through the one loop, and summed up in the figures the command line prints.

A request names where its jobs come from — a family with its parameters (`perflab run FAMILY`,
`run cmd`, `run lmbench`), a job file with `--set` overrides, or the job a stored run ran
(`rerun`) — and the options every job takes (runs, warm-up, tag, monitors, measure, kernel
and VM, compiler ...). Jobs are built by perflab.jobs, which validates them; the options go on
in one place each (`_source_jobs` for what decides the matrix's points, `_watched` for what
watches the processes); what cannot run is refused in one line before any store is opened;
the jobs run through runner.loop.run_jobs. What the command line prints of the outcomes —
the headline figure of a job, hyperfine's mean ± σ and "times faster", the LMbench suite's
line — is computed here, from perflab.stats, so that the CLI only formats it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from perflab import jobs
from perflab.jobs import AtomicJob
from perflab.runner.loop import JobOutcome, check_jobs, run_jobs
from perflab.runner.recorder import RunFailed
from perflab.stats.relative import Spread, relative_to_fastest, spread

if TYPE_CHECKING:
    from perflab.store import Store   # or a Recorder (perflab.store.recording): the same writes


@dataclass(frozen=True)
class JobOptions:
    """The options every source of jobs takes; None (or empty) when not given."""

    runs: int | None = None
    warmup: int | None = None
    timeout: float | None = None
    tag: str | None = None
    comment: str | None = None
    monitor_specs: tuple[str, ...] = ()     # --monitor NAME[:opt=val,...], over a job's own monitors
    measure: str | None = None              # --measure instructions|cache
    # The targets' options as the job keys they set (perflab.execution.targets.option_keys):
    # {"on": "ssh://box"} (--on), {"kernel": IMAGE, "vm": {"mode": "icount"}} (--kernel, --vm).
    target_keys: dict = field(default_factory=dict)


@dataclass(frozen=True)
class RunRequest:
    """What was asked: one source of jobs (a family, a job file or a stored job) and the options.

    `points` are the family's parameters, one mapping per point given apart (`run cmd --cmd A
    --cmd B`: those run interleaved, in a random order each round); within a mapping a list
    value is a matrix axis, as in a job file. For a job file, its one mapping holds the
    parameter and build-key options (`--mode thread`, `--cc clang`) that win over the file.
    """

    where: str                                       # how errors name the request ("perflab run will-it-scale")
    benchmark: str | None = None
    points: tuple[dict, ...] = ({},)
    job_file: str | None = None
    overrides: tuple[str, ...] = ()                  # --set KEY=VALUE over the job file
    stored_job: dict | None = None                   # the JSON form of the job a run ran
    options: JobOptions = JobOptions()
    box: str | None = None
    repo: str | None = None

    @property
    def together(self) -> bool:
        """Whether the jobs run interleaved: points given apart are compared side by side (RMIT);
        a matrix runs one atomic job after the other, so a kill leaves every completed one stored."""
        return len(self.points) > 1


# -- building ---------------------------------------------------------------------

def build_jobs(request: RunRequest) -> list[AtomicJob]:
    """The request's atomic jobs, validated, with every option on; JobError (one line) otherwise."""
    return [_watched(job, request.options, request.where) for job in _source_jobs(request)]


def _source_jobs(request: RunRequest) -> list[AtomicJob]:
    """The jobs of the request's source with the options that decide its points: the job keys,
    and the targets' options (--on, --kernel, --vm) before expansion, since the machine's CPUs are
    what `nr_task: 50%` means. Those go on one way, whatever the source: `targets.placed`, the
    named target's keys over the job's, every other target's left out."""
    from perflab.execution import targets

    options, where = request.options, request.where
    placed = options.target_keys
    keys = {k: v for k, v in (("runs", options.runs), ("warmup", options.warmup), ("timeout", options.timeout),
                              ("tag", options.tag), ("comment", options.comment)) if v is not None}
    if request.stored_job is not None:
        from perflab.execution.targets import check_registered, registered_keys

        # The machine a stored job ran on is asked for its CPUs again, as a job file's would be.
        check_registered({k: v for k in registered_keys() if (v := request.stored_job.get(k)) and k not in placed},
                         lambda key, flag: f"{where}: key {key!r}")
        job = AtomicJob.from_dict(request.stored_job)
        if "tag" in keys or "comment" in keys:
            job = job.with_(**{k: keys[k] for k in ("tag", "comment") if k in keys})
        # Where the stored job ran is replaced (its compiler stays); a guest job is checked again as a
        # job file's would be (its QEMU arguments above all).
        return [jobs.resolve(jobs.retarget(job, targets.placed(job.target.keys(), placed), where), where)]
    if request.job_file is not None:
        from perflab.jobs.guest import file_overrides

        # Before expansion: a share of the CPUs (`nr_task: 50%`) is the machine's.
        overrides = file_overrides(request.job_file, list(request.overrides), placed)
        return jobs.load_atomic(request.job_file, overrides, {**keys, **request.points[0]})
    if request.benchmark is None:
        raise ValueError("a run request names a family, a job file or a stored job")
    built = []
    for point in request.points:
        built += jobs.expand_atomic(targets.placed({"benchmark": request.benchmark, **keys, **point}, placed), where)
    if request.benchmark == "cmd":
        from perflab.benchmarks.cmd import FAMILY

        # A command typed on the command line that is not there is refused, not recorded as a failed run.
        for job in built:
            FAMILY.command(job.parsed)
    return built


def _watched(job: AtomicJob, options: JobOptions, where: str) -> AtomicJob:
    """The job with what watches its processes: --monitor over its own monitors, --measure over its own.

    The one place these options go on, whatever the source; whether they can watch the job
    where it runs is checked here, naming the request (`perflab run cmd: monitors watch ...`)."""
    if options.monitor_specs:
        from perflab import monitors

        merged = dict(job.monitors)
        for spec in options.monitor_specs:
            merged.update(monitors.parse_spec(spec))
        job = job.with_(monitors=monitors.validate(merged))
    return jobs.measured(job, options.measure, where)


def refuse_what_cannot_run(built: list[AtomicJob], request: RunRequest) -> None:
    """Before any store is opened: a job that cannot run in its target or be watched there, a
    compiler that is not installed (named in one line); a job file's keys are named by the file."""
    check_jobs(built)
    jobs.check_compilers(built, request.job_file or request.where)


# -- running ----------------------------------------------------------------------

def perform(request: RunRequest, open_store: Callable[[], Store], *,
            on_done: Callable[[JobOutcome], str | None] | None = None) -> list[JobOutcome]:
    """Build the request's jobs, refuse what cannot run, then open the store and run them all.

    `on_done(outcome)`: the line printed as each atomic job ends (runner.loop.run_jobs)."""
    built = build_jobs(request)
    refuse_what_cannot_run(built, request)
    return run_built(open_store(), built, request, on_done=on_done)


def run_built(store: Store, built: list[AtomicJob], request: RunRequest, *,
              on_done: Callable[[JobOutcome], str | None] | None = None) -> list[JobOutcome]:
    """Run jobs already built for `request` (by build_jobs; `check` plans their runs in between)."""
    return run_jobs(store, built, interleave=request.together, randomise=request.together, box=request.box,
                    repo=request.repo, on_done=on_done, checked=True)


def raise_first_failure(outcomes: list[JobOutcome]) -> None:
    """A failed job fails the command, after the others ran: RunFailed naming the first."""
    failed = [o for o in outcomes if o.error is not None]
    if failed:
        more = f" (and {len(failed) - 1} more failed jobs)" if len(failed) > 1 else ""
        raise RunFailed(failed[0].error + more)


# -- what the command line prints ---------------------------------------------------

@dataclass(frozen=True)
class Headline:
    """A job's first catalog metric that has samples: its mean, and its CoV when there is one."""

    metric: str
    unit: str
    mean: float
    cov: float | None         # None: a single sample, or a mean of 0


@dataclass(frozen=True)
class JobSummary:
    """One atomic job's result line: what differs from the invocation's other jobs, its name,
    its headline, samples, time and status."""

    run_id: int
    varying: str
    name: str
    headline: Headline | None
    samples: int
    seconds: float
    status: str               # "ok", "N items failed" or "failed: <why>"
    # Where its files were read and written, when its family works in a directory (fio,
    # kernbench): the host's default and a guest's differ (docs/fio.md, "Host and guest").
    workdir: str = ""


def _workdir(facts: dict) -> str:
    """`ext4 at /tmp/perflab-fio-x`, `tmpfs: the guest's /tmp (tmpfs in the guest's memory)`."""
    fs = facts.get("workdir_fs")
    if not fs:
        return ""
    backing = facts.get("workdir_backing")
    if backing and not backing.startswith("existing directory"):
        return f"{fs}: {backing}"
    return f"{fs} at {facts.get('workdir', '?')}"


def job_summary(outcome: JobOutcome) -> JobSummary:
    headline = None
    for metric in outcome.job.family.metrics(outcome.job.parsed).values():
        values = outcome.values.get(metric.name)
        if values:
            s = spread(values)
            headline = Headline(metric.name, metric.unit, s.mean, s.cov if s.n > 1 and s.cov == s.cov else None)
            break
    if outcome.error:
        status = "failed: " + outcome.error
    else:
        status = f"{len(outcome.failures)} items failed" if outcome.failures else "ok"
    facts = getattr(outcome.session, "facts", None) or {}
    return JobSummary(outcome.run_id, outcome.varying, outcome.session.name, headline, outcome.samples,
                      outcome.seconds, status, _workdir(facts))


@dataclass(frozen=True)
class CommandTiming:
    """One command's wall times, as hyperfine sums them up."""

    run_id: int
    title: str                # as people named it: --name (the command line), else the command line
    spread: Spread


@dataclass(frozen=True)
class CommandTimings:
    timings: list[CommandTiming]
    fastest: int | None = None                         # index into timings, when every command was measured
    ratios: list[float] = field(default_factory=list)  # each mean over the fastest's


def command_timings(outcomes: list[JobOutcome]) -> CommandTimings:
    """The commands that were measured, and which was fastest when all of them (and more than one) were."""
    timings = []
    for o in outcomes:
        walls = o.walls.get(o.session.processes(0)[-1].item) if o.session is not None else None
        if walls:
            display = o.session.command.display
            title = display if o.session.name == display else f"{o.session.name} ({display})"
            timings.append(CommandTiming(o.run_id, title, spread(walls)))
    if len(timings) > 1 and len(timings) == len(outcomes):
        fastest, ratios = relative_to_fastest([t.spread.mean for t in timings])
        return CommandTimings(timings, fastest, ratios)
    return CommandTimings(timings)


@dataclass(frozen=True)
class SuiteSummary:
    """The LMbench suite as one run: its mode, samples, figures, time and the programs that failed."""

    run_id: int
    mode: str
    samples: int
    figures: int
    seconds: float
    failures: dict[str, str]


def suite_summary(outcome: JobOutcome) -> SuiteSummary:
    from perflab.benchmarks.lmbench.catalog import metrics_of_program

    session = outcome.session
    figures = len({m for p in session.programs for m in metrics_of_program(p)})
    return SuiteSummary(outcome.run_id, session.mode.name, outcome.samples, figures, outcome.seconds,
                        dict(outcome.failures))

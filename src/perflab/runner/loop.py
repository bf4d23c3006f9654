"""The one loop: warm-up, repetitions, interleaving, failures, interruption, progress.

Every family's atomic jobs run here. A repetition means the same in every
family: one execution of each of the job's processes; every sample records
its repetition and the process (index within the repetition) it came from,
and is committed as soon as it exists.

Jobs given together with `interleave=True` (the commands of one `perflab run
cmd --cmd A --cmd B`) run round by round, so slow drift of the machine hits
every variant alike; with `randomise=True` the order within each round is
shuffled (RMIT: randomised multiple interleaved trials), so that a variant
that always runs second (after the other warmed the caches, or in the same
phase of a periodic disturbance) is not favoured either. Otherwise (a job
file's matrix) each job runs to its end before the next starts, so that a
kill mid-matrix leaves every completed job stored.

The loop starts processes through an executor (`execute` by default): tests
pass a fake that returns scripted ProcessResults, so warm-up, interleaving,
failure policy, interruption and after-jobs figures are checked without
starting anything.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field

from typing import TYPE_CHECKING

from perflab.benchmarks.base import STOP, ItemFailed, Session
from perflab.benchmarks.measured import measuring
from perflab.core import cbuild
from perflab.core.errors import PerflabError
from perflab.core.job import AtomicJob
from perflab.jobs import resolve
from perflab.monitors import MonitorSet
from perflab.execution import interrupt
from perflab.core.process import running_in
from perflab.execution.executor import ProcessResult, ProcessSpec, execute
from perflab.execution.vm import VmError
from perflab.execution.targets import BootFailure
from perflab.runner import guest
from perflab.runner.progress import Bar, declared_seconds, label
from perflab.runner.recorder import RunRecorder, recording, start_run
from perflab.store import Store
from perflab.core.text import printable

if TYPE_CHECKING:
    from rich.console import Console

# What starts one benchmark process: perflab.execution.executor.execute, or a test's fake.
Executor = Callable[..., ProcessResult]


@dataclass
class JobOutcome:
    """What one atomic job gave: its run and what the CLI prints about it."""

    job: AtomicJob                                               # resolved: it carries its family and parameters
    session: Session | None = None
    recorder: RunRecorder | None = None
    walls: dict[str, list[float]] = field(default_factory=dict)   # item -> wall times of its processes
    failures: dict[str, str] = field(default_factory=dict)        # item -> message
    values: dict[str, list[float]] = field(default_factory=dict)  # metric -> its samples, for the summary line
    error: str | None = None                                     # why the run failed, if it did
    monitors: MonitorSet | None = None                           # the run's monitors, when the job names any
    seconds: float = 0.0
    executor: Executor | None = None                             # a guest's, when the job runs in a VM
    boot_failure: BootFailure | None = None                      # the job's target never came up
    varying: str = ""                                            # `k=v` of what differs across the invocation

    @property
    def run_id(self) -> int | None:
        return self.recorder.run_id if self.recorder else None

    @property
    def samples(self) -> int:
        return self.recorder.samples if self.recorder else 0


def run_jobs(
    store: Store,
    jobs: list[AtomicJob | dict],
    *,
    interleave: bool = False,
    box: str | None = None,
    repo: str | None = None,
    cwd: str | None = None,
    console: Console | None = None,
    executor: Executor = execute,
    randomise: bool = False,
    seed: int | None = None,
    on_done: Callable[[JobOutcome], str | None] | None = None,
) -> list[JobOutcome]:
    """Run atomic jobs (see perflab.jobs) and record every sample; their outcomes.

    Jobs given as JSON dicts (bisect, robot, the lab worker) are converted and
    validated here; AtomicJobs built by perflab.jobs arrive validated.
    A job that fails is recorded failed and the others go on; the caller
    decides what a failure means for the exit status. Bad input found before
    anything was measured (PerflabError) removes the runs that hold nothing
    and is raised. Ctrl-C and SIGTERM end everything, runs marked interrupted. `cwd`: the
    directory the jobs run in (a commit's worktree, where `./prog` is the program built at
    that commit; the families' processes start there unless they name their own).
    `randomise`: interleaved jobs run in a fresh random order in every round (RMIT), from
    `seed` when given (tests; a repeatable order), else from the system's entropy. The order
    that was run can be read back from the store: samples are committed, and numbered, as
    they exist. `on_done(outcome)`: called as each atomic job finishes (an interleaved batch:
    as the batch does); the line it returns is printed there and then, above the progress bar.
    """
    order = random.Random(seed) if randomise else None
    with running_in(cwd):
        return _run_jobs(store, jobs, interleave=interleave, box=box, repo=repo, console=console,
                         executor=executor, order=order, on_done=on_done)


def _run_jobs(store: Store, jobs: list, *, interleave: bool, box, repo, console, executor,
              order: random.Random | None, on_done=None) -> list[JobOutcome]:
    outcomes = []
    for job in jobs:
        job = resolve(job)
        if job.runs is None:
            job = job.with_(runs=job.family.runs_for(job.parsed))
        outcomes.append(JobOutcome(job))
    guest.check([o.job for o in outcomes])    # a guest job that cannot run: refused before anything boots
    batches = [outcomes] if interleave else [[o] for o in outcomes]
    total = sum(int(o.job.warmup or 0) + int(o.job.runs or 1) for o in outcomes)
    loop = _Loop(store, Bar(console, total), executor, box, repo, order, _varying(outcomes))
    try:
        with interrupt.stop_requests_as_flag():
            for batch in batches:
                loop.run_batch(batch)
                for o in batch:
                    line = on_done(o) if on_done is not None and o.recorder is not None else None
                    if line is not None:
                        loop.bar.echo(line)
    finally:
        loop.bar.close()
    _after_jobs(store, outcomes)
    return outcomes


def _varying(outcomes: list[JobOutcome]) -> dict[int, str]:
    """Each job's `key=value` of the parameters that differ across the invocation (the label's head)."""
    def settings(o: JobOutcome) -> dict:
        # The compiler and its flags (`cc:`, `cflags:`) vary as parameters do.
        return {**{k: o.job.extra[k] for k in ("cc", "cflags") if o.job.extra.get(k)}, **o.job.params}

    keys: list[str] = []
    for o in outcomes:
        keys += [k for k in settings(o) if k not in keys]
    differ = [k for k in keys if len({repr(settings(o).get(k)) for o in outcomes}) > 1]

    def shown(value) -> str:
        return " ".join(map(str, value)) if isinstance(value, list) else str(value)

    for o in outcomes:
        o.varying = " ".join(f"{k}={printable(shown(settings(o).get(k)), None)}" for k in differ)
    return {id(o): o.varying for o in outcomes}


def _after_jobs(store: Store, outcomes: list[JobOutcome]) -> None:
    """Let each family add figures that span its jobs (will-it-scale's scalability over nr_task)."""
    def add(outcome: JobOutcome, repetition: int, samples) -> None:
        samples = guest.mark(outcome.job, list(samples))
        store.add_samples(outcome.run_id, repetition, samples)
        for smp in samples:
            outcome.values.setdefault(smp.metric, []).append(smp.value)

    by_family: dict[str, list[JobOutcome]] = {}
    for o in outcomes:
        by_family.setdefault(o.job.benchmark, []).append(o)
    for same in by_family.values():
        done = [o for o in same if o.recorder is not None and o.error is None]
        if done:
            done[0].job.family.after_jobs(done, add)


@dataclass
class _Loop:
    """One invocation's loop: where it records, its progress bar and how it starts processes."""

    store: Store
    bar: Bar
    executor: Executor
    box: str | None
    repo: str | None
    order: random.Random | None = None    # shuffles each round of an interleaved batch (RMIT)
    varying: dict[int, str] = field(default_factory=dict)   # id(outcome) -> its label's head

    def run_batch(self, batch: list[JobOutcome]) -> None:
        store, bar = self.store, self.bar
        with ExitStack() as stack:
            for o in batch:
                # A guest job's programs are built static, and its CPUs are the guest's (runner.guest.preparing).
                # The job's compiler and flags (`cc:`, `cflags:`) build its programs (core.cbuild);
                # under valgrind when the job says `measure` (benchmarks.measured).
                with guest.preparing(o.job), cbuild.compiling_with(o.job.extra.get("cc"), o.job.extra.get("cflags")):
                    o.session = stack.enter_context(measuring(o.job, o.job.family.session(o.job.parsed, o.job.to_dict())))
                # Placement and address randomisation are recorded for every run of every family.
                o.session.facts.setdefault("placement", "the scheduler's choice")
                o.session.facts.setdefault("benchmark_aslr", "the system setting (aslr)")
                if o.job.monitors:
                    o.monitors = MonitorSet(o.job.monitors, warn=bar.warn)
                    stack.callback(o.monitors.close)
                interrupt.check()
            for o in batch:
                facts = o.session.facts
                if o.job.in_guest:
                    # Booted once per atomic job; the loop below runs in it through its executor.
                    try:
                        guest_facts, o.executor = stack.enter_context(
                            guest.booted(o.job, o.session, int(o.job.warmup or 0) + int(o.job.runs)))
                        facts = {**facts, **guest_facts}
                    except VmError as e:
                        o.error = str(e)     # the run is recorded failed, with the console's tail
                        o.boot_failure = BootFailure(e.summary, e.console_tail)
                        facts = {**facts, **guest.unbooted_facts(o.job)}
                if o.job.extra.get("cflags"):
                    facts = {**facts, "cflags": o.job.extra["cflags"]}
                o.recorder = start_run(store, benchmark=o.job.family.name, name=o.session.name,
                                       params=guest.params_of(o.job, o.session.params), box=self.box,
                                       tag=o.job.tag, repo=self.repo, comment=o.job.comment, extra_facts=facts,
                                       job=o.job.to_dict(), cc=o.job.extra.get("cc"))
                if o.monitors is not None:
                    store.set_run_monitors(o.recorder.run_id, o.monitors.record)
                    # What failed or was unsupported along the way is recorded however the run ends.
                    stack.callback(lambda o=o: store.set_run_monitors(o.recorder.run_id, o.monitors.record))
            began = time.monotonic()
            with recording([o.recorder for o in batch]):
                for o in batch:
                    for item, message in o.session.build_failures.items():
                        _fail_item(o, item, message, bar)
                rounds = max(int(o.job.warmup or 0) + int(o.job.runs) for o in batch)
                try:
                    for round_no in range(rounds):
                        for o in self.round_order(batch):
                            self.one_round(o, round_no)
                except PerflabError:
                    # Bad input (e.g. a --metric that matches nothing) before anything was
                    # measured: nothing of those runs is kept.
                    for o in batch:
                        if o.recorder.samples == 0:
                            store.delete_run(o.recorder.run_id)
                    raise
                for o in batch:
                    o.seconds = time.monotonic() - began
                    if o.error is None and o.recorder.samples == 0 and o.failures:
                        o.error = _nothing_measured(o)
                    if o.error is not None:
                        o.recorder.fail(o.error)

    def round_order(self, batch: list[JobOutcome]) -> list[JobOutcome]:
        """The jobs of one round in the order they run: as given, or shuffled (RMIT)."""
        if self.order is None or len(batch) < 2:
            return batch
        return self.order.sample(batch, len(batch))

    def run_process(self, spec: ProcessSpec, monitors: MonitorSet | None, process: int,
                    executor: Executor | None = None) -> ProcessResult:
        interrupt.check()
        # Monitors watch only the timed part: they start just before the process and stop just after it.
        result = (executor or self.executor)(spec, hooks=monitors.hooks(process) if monitors else None)
        if result.interrupted:
            interrupt.check()
        return result

    def one_round(self, o: JobOutcome, round_no: int) -> None:
        warmups = int(o.job.warmup or 0)
        if o.error is not None or round_no >= warmups + int(o.job.runs):
            return
        policy = o.job.family.failure_policy
        warmup = round_no < warmups
        repetition = round_no - warmups
        where = f"{'warm-up ' + str(round_no + 1) if warmup else repetition + 1}/{warmups if warmup else o.job.runs}"
        self.bar.begin(id(o), label(self.varying.get(id(o), ""), o.session.name, where), declared_seconds(o.job.parsed))
        for index, spec in enumerate(o.session.processes(round_no if warmup else repetition)):
            if spec.item in o.failures:
                continue
            timed = not warmup and spec.record
            try:
                result = self.run_process(spec, o.monitors if timed else None, index, o.executor)
            except VmError as e:
                # The guest died or stopped answering: this job's run fails (console tail kept), others go on.
                o.error = str(e)
                break
            why = o.session.judge(spec, result)
            if not warmup and spec.record:
                try:
                    samples = o.session.parse(spec, result) if why is None or policy == STOP else []
                    samples = guest.mark(o.job, samples)
                except ItemFailed as e:
                    samples, why = [], str(e)
                if samples:
                    o.recorder.add_samples(repetition, samples, process=index)
                    for smp in samples:
                        o.values.setdefault(smp.metric, []).append(smp.value)
                o.walls.setdefault(spec.item, []).append(result.wall)
            if why is not None:
                # A failing warm-up is a failure of the command, as a failing timed run is.
                _fail_item(o, spec.item, ("warm-up: " if warmup else "") + why, self.bar)
                if o.error is not None:
                    break
            interrupt.check()
        if o.monitors and not warmup:
            _store_monitors(self.store, o, repetition)
        self.bar.step()
        interrupt.check()


def _nothing_measured(o: JobOutcome) -> str:
    first = next(iter(o.failures.values()))
    if len(o.failures) == 1:
        return first
    return f"{o.session.name}: nothing was measured ({len(o.failures)} items failed; first: {first})"


def _fail_item(o: JobOutcome, item: str, message: str, bar: Bar) -> None:
    o.failures[item] = message
    if o.job.family.failure_policy == STOP:
        o.error = message
        return
    o.recorder.add_failure(item, message)
    bar.warn(message)


def _store_monitors(store: Store, o: JobOutcome, repetition: int) -> None:
    """The monitors' figures of one repetition: per-run metrics as samples, the time series in its table."""
    for name, collected in o.monitors.collect().items():
        if collected.samples:
            o.recorder.add_samples(repetition, collected.samples)
        if collected.series:
            store.add_monitor_series(o.recorder.run_id, name, repetition, collected.series)

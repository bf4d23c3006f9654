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

Where a job's processes run is its target (perflab.execution.targets: this machine, or a
kernel booted in QEMU) and what watches them its instruments (perflab.execution.instruments:
valgrind, the monitors): the loop asks each the same questions and knows none by name.

The loop starts processes through an executor (`execute` by default), which the job's target
opens a place around (a guest's executor runs them inside it): tests pass a fake that returns
scripted ProcessResults, so warm-up, interleaving, failure policy, interruption and after-jobs
figures are checked without starting anything.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from concurrent.futures import Future, wait
from contextlib import ExitStack
from dataclasses import dataclass, field

from typing import TYPE_CHECKING

from perflab.benchmarks.base import STOP, ItemFailed, Session
from perflab.core.errors import PerflabError, TargetDown
from perflab.jobs.job import AtomicJob
from perflab.jobs import resolve
from perflab.execution import instruments, interrupt, machine_lock
from perflab.execution.instruments import Watch
from perflab.core.process import running_in
from perflab.execution.executor import Hooks, ProcessResult, ProcessSpec, execute
# Executor: what starts one benchmark process (execute, a target's place, or a test's fake).
from perflab.execution.targets import BootFailure, Executor, Opening
from perflab.runner.progress import Bar, declared_seconds, label
from perflab.runner.recorder import RunRecorder, recording, start_run
from perflab.core.text import printable

if TYPE_CHECKING:
    from rich.console import Console

    from perflab.store import Store   # or a Recorder (perflab.store.recording): the same writes


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
    watches: list[Watch] = field(default_factory=list)           # its instruments, attached to its run
    seconds: float = 0.0
    executor: Executor | None = None                             # where its processes start: its target's place
    boot_failure: BootFailure | None = None                      # the job's target never came up
    prepared: object = None                                      # what its target kept from entering the session
    varying: str = ""                                            # `k=v` of what differs across the invocation
    target_down: bool = False                                    # its place went down while it ran
    together: Callable | None = None                             # its place's RunIn.together (machines side by side)
    # Rounds started before their turn (repetitions side by side): round -> (its processes, their results to come).
    ahead: dict[int, tuple[list[ProcessSpec], dict[int, Future]]] = field(default_factory=dict)

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
    checked: bool = False,
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
    `checked`: the caller ran check_jobs on these jobs already (the run service, before it opened
    the store); otherwise they are checked here, before anything is built.
    """
    order = random.Random(seed) if randomise else None
    with running_in(cwd):
        return _run_jobs(store, jobs, interleave=interleave, box=box, repo=repo, console=console,
                         executor=executor, order=order, on_done=on_done, checked=checked)


def _run_jobs(store: Store, jobs: list, *, interleave: bool, box, repo, console, executor,
              order: random.Random | None, on_done=None, checked: bool = False) -> list[JobOutcome]:
    outcomes = []
    for job in jobs:
        job = resolve(job)
        if job.runs is None:
            job = job.with_(runs=job.family.runs_for(job.parsed))
        outcomes.append(JobOutcome(job))
    if not checked:
        check_jobs([o.job for o in outcomes])    # a job that cannot run where it runs: refused before anything starts
    batches = [outcomes] if interleave else [[o] for o in outcomes]
    total = sum(int(o.job.warmup or 0) + int(o.job.runs or 1) for o in outcomes)
    loop = _Loop(store, Bar(console, total), executor, box, repo, order, _varying(outcomes))
    try:
        with interrupt.stop_requests_as_flag():
            for group in _sharing_groups(batches):
                loop.run_group(group, on_done)
    finally:
        loop.bar.close()
    _after_jobs(store, outcomes)
    return outcomes


def _share_key(o: JobOutcome):
    return o.job.target.share_key(o.job.needs, o.job.params)


def _sharing_groups(batches: list[list[JobOutcome]]) -> list[list[list[JobOutcome]]]:
    """Consecutive batches whose every job's target may share a place (a key that is not None):
    their sessions are all entered before the first place opens, so that a guest is booted once
    with the programs of every job that runs in it. Any other batch is a group of its own."""
    groups: list[list[list[JobOutcome]]] = []
    shared_before = False
    for batch in batches:
        shares = all(_share_key(o) is not None for o in batch)
        if shares and shared_before:
            groups[-1].append(batch)
        else:
            groups.append([batch])
        shared_before = shares
    return groups


def check_jobs(jobs: list[AtomicJob]) -> None:
    """Refuse, before anything is built, booted or stored, a job that cannot run in its target or
    be watched there by its instruments (one line)."""
    for job in jobs:
        job = resolve(job)
        job.target.check(job.needs, job.benchmark, job.params)
        instruments.check(job.watching, job.target, job.benchmark)


def _varying(outcomes: list[JobOutcome]) -> dict[int, str]:
    """Each job's `key=value` of the parameters that differ across the invocation (the label's head)."""
    def settings(o: JobOutcome) -> dict:
        # The compiler and its flags (`cc:`, `cflags:`) vary as parameters do.
        return {**o.job.target.toolchain.keys(), **o.job.params}

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
        samples = outcome.job.target.mark(list(samples))
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

    def run_group(self, group: list[list[JobOutcome]], on_done=None) -> None:
        """Batches that share their targets' places: every session entered, then each batch run
        in turn, a place opened when a batch first needs it and closed when the next does not."""
        with ExitStack() as sessions:
            for batch in group:
                for o in batch:
                    for instrument in o.job.watching:
                        instrument.ready()    # a missing tool is one line, before the family builds anything
            for batch in group:
                for o in batch:
                    job = o.job
                    # The family's session is entered as its target needs (a guest's programs static, its
                    # CPUs the guest's; the job's compiler and flags: core.cbuild).
                    with job.target.preparing(job.needs, job.benchmark) as prepared:
                        o.session = sessions.enter_context(job.family.session(job.parsed, job.to_dict()))
                    o.prepared = prepared
                    interrupt.check()
            places = _Places(group, self.executor)
            with places:
                for index, batch in enumerate(group):
                    places.before(index)
                    self.run_batch(batch, places)
                    for o in batch:
                        line = on_done(o) if on_done is not None and o.recorder is not None else None
                        if line is not None:
                            self.bar.echo(line)

    def attach(self, o: JobOutcome, stack: ExitStack) -> None:
        job = o.job
        for instrument in job.watching:
            o.watches.append(instrument.attach(job.benchmark, warn=self.bar.warn, target=job.target))
            stack.callback(o.watches[-1].close)
        # Placement and address randomisation are recorded for every run of every family.
        for watch in o.watches:
            o.session.facts.update(watch.facts)
        o.session.facts.setdefault("placement", "the scheduler's choice")
        o.session.facts.setdefault("benchmark_aslr", "the system setting (aslr)")
        interrupt.check()

    def run_batch(self, batch: list[JobOutcome], places: _Places) -> None:
        store, bar = self.store, self.bar
        with ExitStack() as stack:
            for o in batch:
                target = o.job.target
                run_in = None
                try:
                    # A place brought up once for the jobs that share it (a guest booted); the loop runs
                    # in it through the executor it admits this job with.
                    run_in = places.admit(o, stack)
                except TargetDown as e:
                    o.error = str(e)     # the run is recorded failed, with the console's tail
                    o.boot_failure = BootFailure(e.summary, e.console_tail)
                # Attached once the place is up: what they ask of it is asked where the processes run
                # (an SSH machine's perf on the kernel under test kexec'ed there, not on its default one).
                self.attach(o, stack)
                facts = o.session.facts
                if run_in is not None:
                    facts, o.executor, o.together = {**facts, **run_in.facts}, run_in.execute, run_in.together
                else:
                    facts = {**facts, **target.unopened_facts()}
                facts = {**facts, **target.facts()}
                params = dict(o.session.params)
                for watch in o.watches:
                    params.update(watch.params)
                o.recorder = start_run(store, benchmark=o.job.family.name, name=o.session.name,
                                       params=target.params(params), box=self.box,
                                       tag=o.job.tag, repo=self.repo, comment=o.job.comment, extra_facts=facts,
                                       job=o.job.to_dict(), cc=target.toolchain.cc, elsewhere=target.fulfils_far)
                for watch in o.watches:
                    watch.stored(store, o.recorder.run_id)
                    # What failed or was unsupported along the way is recorded however the run ends.
                    stack.callback(watch.stored, store, o.recorder.run_id)
            began = time.monotonic()
            with recording([o.recorder for o in batch]):
                for o in batch:
                    for item, message in o.session.build_failures.items():
                        _fail_item(o, item, message, bar)
                rounds = max(int(o.job.warmup or 0) + int(o.job.runs) for o in batch)
                try:
                    with ExitStack() as started:
                        if len(batch) == 1:
                            self.start_rounds_ahead(batch[0], started)
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
                    if o.target_down:
                        places.lost(o)      # the next job that would have shared it gets a fresh one

    def round_order(self, batch: list[JobOutcome]) -> list[JobOutcome]:
        """The jobs of one round in the order they run: as given, or shuffled (RMIT)."""
        if self.order is None or len(batch) < 2:
            return batch
        return self.order.sample(batch, len(batch))

    def run_process(self, o: JobOutcome, spec: ProcessSpec, index: int,
                    timed: bool) -> tuple[ProcessSpec, ProcessResult]:
        """One process, where the job's target runs it, wrapped and hooked by its instruments: the
        spec as it ran (an instrument's environment), and its result."""
        interrupt.check()
        wrapper: list[str] = []
        hooks = None
        for watch in o.watches:
            spec, words = watch.wrap(spec)
            wrapper = [*wrapper, *words]
            if timed:
                # Hooks watch only the timed part: they run just before the process and just after it.
                more = watch.hooks(index)
                if more is not None:
                    hooks = more if hooks is None else Hooks(hooks.start + more.start, more.stop + hooks.stop,
                                                               hooks.inside + more.inside)
        result = (o.executor or self.executor)(spec, hooks=hooks, **({"wrapper": wrapper} if wrapper else {}))
        if result.interrupted:
            interrupt.check()
        return spec, result

    def one_round(self, o: JobOutcome, round_no: int) -> None:
        warmups = int(o.job.warmup or 0)
        if o.error is not None or round_no >= warmups + int(o.job.runs):
            return
        policy = o.job.family.failure_policy
        warmup = round_no < warmups
        repetition = round_no - warmups
        where = f"{'warm-up ' + str(round_no + 1) if warmup else repetition + 1}/{warmups if warmup else o.job.runs}"
        self.bar.begin(id(o), label(self.varying.get(id(o), ""), o.session.name, where), declared_seconds(o.job.parsed))
        if round_no in o.ahead:
            specs, ahead = o.ahead.pop(round_no)        # started with the job's other rounds
        else:
            specs, ahead = o.session.processes(round_no if warmup else repetition), {}
        for watch in o.watches:
            watch.begin(specs)
        with ExitStack() as started:
            if not ahead:
                ahead = self.start_ahead(o, specs, started)
            self.run_specs(o, specs, ahead, warmup, repetition, policy)
        if not warmup:
            for watch in o.watches:
                figures = watch.repetition(repetition)
                if figures.samples:
                    o.recorder.add_samples(repetition, figures.samples)
                for name, series in figures.series.items():
                    self.store.add_monitor_series(o.recorder.run_id, name, repetition, series)
        self.bar.step()
        interrupt.check()

    @staticmethod
    def start_ahead(o: JobOutcome, specs: list[ProcessSpec], started: ExitStack) -> dict[int, Future]:
        """A round's processes started together when the job's place runs several at once (guests
        side by side, RunIn.together), its family's processes are independent and no instrument
        watches them (their hooks and readings are one process's at a time): index -> its result
        to come. Empty: one process at a time. The results are taken in the round's order
        (run_specs), so what is recorded, and in which order, is as if they had run one after
        another; leaving the round (a failure that stops the job, an interruption) cancels what
        has not started and waits for what has."""
        todo = [(i, s) for i, s in enumerate(specs) if s.item not in o.failures]
        if o.together is None or not o.job.family.independent_processes or o.watches or len(todo) < 2:
            return {}
        interrupt.check()
        futures = o.together([s for _, s in todo])
        started.callback(_finish, futures)
        return {i: f for (i, _), f in zip(todo, futures)}

    @staticmethod
    def start_rounds_ahead(o: JobOutcome, started: ExitStack) -> None:
        """A job's repetitions started together in its place's machines (guests side by side), when
        they may be (`_rounds_together`) and the place runs several at once: every round's processes,
        in the rounds' order, each machine taking the next when it is idle (o.ahead). Each round
        then takes its results in its order (one_round, run_specs): what is recorded, and in which
        order, is as if the rounds had run one after another. A round the loop does not reach (a
        failure that stops the job, an interruption) is cancelled if it has not started; the
        batch's end waits for what has."""
        if o.together is None or o.error is not None or not _rounds_together(o.job):
            return
        rounds = [(r, [(i, s) for i, s in enumerate(specs) if s.item not in o.failures], specs)
                  for r, specs in ((r, o.session.processes(r)) for r in range(int(o.job.runs)))]
        todo = [(r, i, s) for r, pending, _ in rounds for i, s in pending]
        if len(todo) < 2:
            return
        interrupt.check()
        futures = o.together([s for _, _, s in todo])
        started.callback(_finish, futures)
        started.callback(o.ahead.clear)
        for r, _, specs in rounds:
            o.ahead[r] = (specs, {i: f for (rr, i, _), f in zip(todo, futures) if rr == r})

    def run_specs(self, o: JobOutcome, specs: list[ProcessSpec], ahead: dict[int, Future], warmup: bool,
                  repetition: int, policy: str) -> None:
        for index, spec in enumerate(specs):
            if spec.item in o.failures:
                continue
            try:
                if index in ahead:
                    ran, result = spec, ahead[index].result()
                    if result.interrupted:
                        interrupt.check()
                else:
                    ran, result = self.run_process(o, spec, index, timed=not warmup and spec.record)
            except TargetDown as e:
                # The guest died or stopped answering: this job's run fails (console tail kept), others go on.
                o.error = str(e)
                o.target_down = True
                break
            # An instrument that could not watch the process says why first (valgrind did not start it).
            why = next((w for w in (watch.judge(ran, result) for watch in o.watches) if w), None)
            why = why or o.session.judge(spec, result)
            if why is not None:
                for watch in o.watches:
                    watch.failed(spec)
            if not warmup and spec.record:
                try:
                    samples = []
                    if why is None or policy == STOP:
                        samples = o.session.parse(spec, result)
                        for watch in o.watches:
                            samples = [*samples, *watch.samples(ran, result)]
                    samples = o.job.target.mark(samples)
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


class _Places:
    """The places a group of batches runs in. A job whose target shares (a key) runs in the place
    opened for its key, which is opened for every job of the consecutive batches that use it and
    closed before the first batch that does not (an idle guest under icount spins a host CPU, so
    none is kept waiting); a job whose target does not share opens one of its own. A place that
    never came up is not tried again for the jobs that would have shared it: they fail alike."""

    def __init__(self, group: list[list[JobOutcome]], execute: Executor):
        self.group, self.execute = group, execute
        self.keys = [[_share_key(o) for o in batch] for batch in group]
        self.open: dict = {}          # key -> (its ExitStack, its Place, the outcomes it was opened for)
        self.failed: dict = {}        # key -> the TargetDown it raised, for the stretch that wanted it
        self.index = 0

    def __enter__(self) -> _Places:
        return self

    def __exit__(self, *exc) -> None:
        for key in reversed(list(self.open)):      # last opened, first closed
            self._close(key)

    def _close(self, key) -> None:
        stack, _place, _for = self.open.pop(key)
        stack.close()

    def before(self, index: int) -> None:
        """Batch `index` is next: close what it does not use, forget failures it does not repeat."""
        self.index = index
        wanted = set(self.keys[index])
        for key in [k for k in self.open if k not in wanted]:
            self._close(key)
        for key in [k for k in self.failed if k not in wanted]:
            del self.failed[key]

    def admit(self, o: JobOutcome, stack: ExitStack):
        """Where `o` runs (a RunIn); TargetDown when its place does not come up."""
        target = o.job.target
        key = _share_key(o)
        if key is None:
            stack.enter_context(machine_lock.holding(target, o.session.name))
            place = stack.enter_context(target.open([self._opening(o, len(self.group[self.index]) == 1)],
                                                    self.execute))
            return place.admit(0)
        if key in self.failed:
            raise self.failed[key]
        if key not in self.open:
            # Every job of this and the following batches that use the key, in the order they run.
            users = []
            for batch, keys in zip(self.group[self.index:], self.keys[self.index:]):
                if key not in keys:
                    break
                users += [(u, len(batch) == 1) for u, k in zip(batch, keys) if k == key and u.error is None]
            own = ExitStack()
            try:
                # A machine runs one job at a time: a worker driving it and a `run --on` from here wait for each other.
                own.enter_context(machine_lock.holding(target, o.session.name))
                place = own.enter_context(target.open([self._opening(u, alone) for u, alone in users], self.execute))
            except TargetDown as e:
                own.close()
                self.failed[key] = e
                raise
            except BaseException:
                own.close()       # a refusal on opening (perf on a kernel under test): the machine's lock let go
                raise
            self.open[key] = (own, place, [u for u, _ in users])
        _stack, place, users = self.open[key]
        return place.admit(next(i for i, u in enumerate(users) if u is o))

    def lost(self, o: JobOutcome) -> None:
        """`o`'s place went down under it: it is closed, and the next job that uses its key opens
        a fresh one."""
        key = _share_key(o)
        if key is not None and key in self.open:
            self._close(key)

    @staticmethod
    def _opening(o: JobOutcome, alone: bool) -> Opening:
        # Side by side: independent processes that no instrument watches (_Loop.start_ahead), or the
        # job's independent repetitions, alone in its batch (_Loop.start_rounds_ahead).
        rounds = alone and _rounds_together(o.job)
        side = rounds or (o.job.family.independent_processes and not o.job.watching)
        widest = len(o.session.processes(0)) * (int(o.job.runs) if rounds else 1) if side else 1
        return Opening(o.prepared, o.session, int(o.job.warmup or 0) + int(o.job.runs), o.job.needs,
                       side_by_side=side, widest=widest)


def _rounds_together(job: AtomicJob) -> bool:
    """Whether a job's repetitions may run side by side: its family's are independent, a fixed
    count of them (more than one), no warm-up round (a warm-up readies the machine it runs in for
    the next process; in another machine it would ready nothing) and no instrument (its hooks and
    readings are one process's at a time)."""
    return (job.family.independent_repetitions and int(job.runs or 1) > 1 and not int(job.warmup or 0)
            and not job.watching)


def _finish(futures: list[Future]) -> None:
    """Processes started together, at the end of their round: what has not started is cancelled,
    what has is waited for (its guest is then free for the next round or job)."""
    for future in futures:
        future.cancel()
    wait(futures)


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

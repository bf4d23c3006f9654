"""The `will-it-scale` family: one operation in a loop, in N processes or N threads.

Each testcase is a C program (c/<test>.c with the harness c/wis.h) that
counts its operation per task in a cache line of its own and prints the
per-task counts of every interval as metric lines (the runtime's protocol,
with an "event" key: start, interval, end); one execution is one
repetition. ASLR is off for the benchmark (the launcher's personality), task
i is bound to the i-th CPU it may use unless `bind: false`, and THP is set as
the job asks: system-wide when /sys/kernel/mm/transparent_hugepage/enabled
can be written (and restored afterwards), else per process (prctl for
`never`, madvise(MADV_HUGEPAGE) on the testcase's mappings for `always`).
What was in effect is recorded with the run.

Under icount (a guest whose clock counts instructions: core.params.time_is_exact) a sample is
sized in work, not seconds: a warm-up of ICOUNT_WARMUP seconds of instruction-time (at most
`warmup_time`) measures the rate, which fits one timed interval to about ICOUNT_OPS
operations of all tasks and at least ICOUNT_LEAST of instruction-time (10^8 instructions;
at most `duration`), timed to the nanosecond. The figure is exact once that much work is in
it, and a guest second (10^9 instructions, ~25 s of TCG on the host) is no longer paid per
sample (docs/vm.md). A testcase whose loop is a cycle (map an area, an operation per page,
unmap: testcases.CYCLES) is measured over its second whole cycle instead, timed by each task. `duration`, `warmup_time` and
`interval` keep their meaning on the host and in tcg and kvm guests.

Metrics, with LKP's names: will-it-scale.per_process_ops or .per_thread_ops
(ops/s of one task: the workload divided by nr_task, as LKP computes it),
will-it-scale.workload (ops/s of all tasks), and will-it-scale.scalability
(the workload against nr_task times the 1-task workload) when a job file
sweeps nr_task.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from pydantic import Field, field_validator

from perflab.core import cbuild
from perflab.benchmarks import protocol
from perflab.benchmarks.base import Family, ItemFailed, Metric, Params, Session, job_timeout, task_count
from perflab.benchmarks.will_it_scale import WORKLOAD
from perflab.benchmarks.will_it_scale import testcases as tc
from perflab.core.model import HIGHER_IS_BETTER, Sample
from perflab.core.params import cpu_ids, far_machine, time_is_exact
from perflab.core.process import ProcessResult, ProcessSpec
from perflab.execution.workdir import Workdir, WorkdirParams, workdir

THP_SYSFS = "/sys/kernel/mm/transparent_hugepage/enabled"
PER_PROCESS = "will-it-scale.per_process_ops"
PER_THREAD = "will-it-scale.per_thread_ops"
SCALABILITY = "will-it-scale.scalability"
# What the harness prints: one line per event (start, each interval, end), with the event's details.
RAW = {"wis.tasks": "tasks", "wis.ops": "ops", "wis.intervals": "intervals"}
# Under icount: operations (of all tasks) in a sample, its least instruction-time, and the
# warm-up that fits its window. 20,000 operations put a count's quantisation at 0.005%; the
# timer ticks (4 ms apart) that fall in a window moved getppid1's 6.6 ms window by 0.13%
# between two samples. With 100 ms windows getppid1 and signal1 read within 0.01% of
# 1-second windows (6.1.0-47). The warm-up is 100 ms: after 10 ms brk1's first process in
# a fresh guest read 1.2% below its second (tools/bench/kernel_seconds.py, docs/vm.md).
ICOUNT_OPS = 20000
ICOUNT_LEAST = 0.1
ICOUNT_WARMUP = 0.1

Testcase = Literal[tuple(tc.TESTCASES)]  # type: ignore[valid-type]


class WillItScaleParams(Params, WorkdirParams):
    test: Testcase = Field(description=f"the testcase: {', '.join(tc.TESTCASES)}")
    mode: Literal["process", "thread"] = Field("process", description="tasks are processes or threads")
    nr_task: int = Field(1, description="tasks: a number or N% of the online CPUs")
    duration: float = Field(5.0, description="timed seconds per repetition")
    warmup_time: float = Field(1.0, description="untimed seconds before the timed part")
    interval: float = Field(1.0, description="seconds between the harness's counts")
    bind: bool = Field(True, description="task i bound to the i-th online CPU (false: the scheduler places them)")
    thp: Literal["always", "never", "madvise", "system"] = Field(
        "system", description="transparent huge pages for the run (system: leave the setting alone)")

    @field_validator("nr_task", mode="before")
    @classmethod
    def _tasks(cls, v):
        return task_count(v, "nr_task", "tasks", tc.MIN_TASKS, tc.MAX_TASKS)

    @field_validator("duration", "interval")
    @classmethod
    def _positive(cls, v: float) -> float:
        if not (v > 0 and math.isfinite(v)):
            raise ValueError("must be a positive number of seconds")
        return v

    @field_validator("warmup_time")
    @classmethod
    def _non_negative(cls, v: float) -> float:
        if not (v >= 0 and math.isfinite(v)):
            raise ValueError("must be zero or a positive number of seconds")
        return v


def per_task_metric(mode: str) -> str:
    return PER_PROCESS if mode == "process" else PER_THREAD


def _apply_system_thp(wanted: str) -> str | None:
    """Set the system THP mode; the previous mode when it took effect (to restore), else None."""
    from perflab.core.environment import _bracketed

    before = _bracketed(THP_SYSFS)
    if before == wanted:
        return before
    try:
        with open(THP_SYSFS, "w") as f:
            f.write(wanted)
    except OSError:
        return None
    if _bracketed(THP_SYSFS) != wanted:     # some kernels (this VM's) accept the write and ignore it
        return None
    return before


def _per_process(thp: str) -> str:
    """How the harness puts its tasks in THP mode `thp` itself (the system setting left as it is)."""
    return ("prctl(PR_SET_THP_DISABLE)" if thp == "never" else
            "madvise(MADV_HUGEPAGE) on the testcase's mappings" if thp == "always" else
            "the system setting's madvise behaviour")


class WillItScaleSession(Session):
    def __init__(self, params: WillItScaleParams, job: dict, binary, workdir: Workdir, thp_fact: str, harness_thp: str):
        self.p = params
        self.binary = str(binary)
        self.workdir = workdir.path
        self.harness_thp = harness_thp
        self.timeout = job_timeout(job, params.duration + params.warmup_time + 60)
        cpus = cpu_ids()
        placement = (f"task i bound to CPU cpus[i mod {len(cpus)}] of {cpus}" if params.bind
                     else "the scheduler's choice")
        # Under icount a sample is a number of operations (see the module's docstring).
        self.sized_in_ops = time_is_exact()
        name = f"will-it-scale {params.test} {params.mode} x{params.nr_task}"
        stored = params.model_dump()
        stored.pop("dir")     # where the files go, not what is measured
        if stored["fs"] is None:
            stored.pop("fs")
            stored.pop("fs_size")
        super().__init__(name=name, params=stored, facts={
            "placement": placement, "benchmark_aslr": "off (personality ADDR_NO_RANDOMIZE)",
            "thp_in_effect": thp_fact, **workdir.facts,
            **({"wis_sample": "the second whole cycle of every task (map, an operation per page, unmap), timed "
                              "by the task from its start to its end; the first is the warm-up (instruction-time)"}
               if self.sized_in_ops and params.test in tc.CYCLES else
               {"wis_sample": f"about {ICOUNT_OPS} operations of all tasks, at least "
                              f"{min(ICOUNT_LEAST, params.duration):g} s, in one interval fitted by a "
                              f"{self.warmup_seconds():g} s warm-up (instruction-time; duration {params.duration:g} s "
                              "at most)"} if self.sized_in_ops else {})})

    def warmup_seconds(self) -> float:
        """Under icount: the warm-up that measures the rate (the harness needs one to fit the window)."""
        return min(self.p.warmup_time, ICOUNT_WARMUP) if self.p.warmup_time > 0 else ICOUNT_WARMUP

    def processes(self, repetition: int) -> list[ProcessSpec]:
        p = self.p
        warmup = self.warmup_seconds() if self.sized_in_ops else p.warmup_time
        argv = [self.binary, "-m", p.mode, "-n", str(p.nr_task), "-d", repr(p.duration), "-w", repr(warmup),
                "-i", repr(p.interval), "-H", self.harness_thp, "-D", self.workdir]
        if self.sized_in_ops:
            argv += ["-N", str(ICOUNT_OPS), "-L", repr(min(ICOUNT_LEAST, p.duration))]
        if not p.bind:
            argv.append("-B")
        return [ProcessSpec(argv, item=p.test, cwd=self.workdir, timeout=self.timeout, no_aslr=True)]

    def parse(self, spec: ProcessSpec, result: ProcessResult) -> list[Sample]:
        return parse_output(spec.item, self.p.mode, self.p.nr_task, result.stdout)


def parse_output(test: str, mode: str, tasks: int, text: str) -> list[Sample]:
    """The harness's metric lines -> per-task ops/s and workload; ItemFailed on anything else."""
    total_ops = 0.0
    total_time = 0.0
    started = ended = False
    for line in protocol.read(test, text, RAW):
        where = f"{test}: {line.metric} line"
        event = line.extra.get("event")
        if event == "start" and line.metric == "wis.tasks":
            started = True
            if line.value != tasks:
                raise ItemFailed(f"{where}: started {line.value} tasks, asked for {tasks}")
        elif event == "interval" and line.metric == "wis.ops":
            ops, elapsed = line.extra.get("ops"), line.extra.get("elapsed")
            if (not isinstance(ops, list) or len(ops) != tasks or not all(isinstance(o, int) and o >= 0 for o in ops)
                    or not isinstance(elapsed, (int, float)) or not elapsed > 0):
                raise ItemFailed(f"{where}: not an interval of {tasks} task counts")
            if not line.extra.get("warmup"):
                total_ops += sum(ops)
                total_time += elapsed
        elif event == "end" and line.metric == "wis.intervals":
            ended = True
        else:
            raise ItemFailed(f"{where}: unknown event {event!r}")
    if not (started and ended) or total_time <= 0:
        raise ItemFailed(f"{test}: the harness printed no complete run (start, timed intervals, end)")
    workload = total_ops / total_time
    return [Sample(per_task_metric(mode), workload / tasks, "ops/s", HIGHER_IS_BETTER),
            Sample(WORKLOAD, workload, "ops/s", HIGHER_IS_BETTER)]


class WillItScaleFamily(Family):
    name = "will-it-scale"
    summary = "scalability testcases: one operation in a loop in N processes or threads"
    Params = WillItScaleParams
    # duration_params: perflab.benchmarks.DURATION_PARAMS
    default_runs = 3
    # Every repetition runs the same process, which kills and reaps its tasks before it ends and
    # writes only in its own directory (a guest's own tmpfs): a job's repetitions may run in
    # guests side by side (docs/vm.md).
    independent_repetitions = True

    def metrics(self, params: WillItScaleParams) -> dict[str, Metric]:
        per_task = per_task_metric(params.mode)
        return {
            per_task: Metric(per_task, "ops/s", HIGHER_IS_BETTER, "operations per second of one task"),
            WORKLOAD: Metric(WORKLOAD, "ops/s", HIGHER_IS_BETTER, "operations per second of all tasks"),
            SCALABILITY: Metric(SCALABILITY, "", HIGHER_IS_BETTER,
                                "workload / (nr_task x the 1-task workload), when nr_task is swept"),
        }

    def after_jobs(self, outcomes: list, add_samples) -> None:
        """will-it-scale.scalability for each run of a job that swept nr_task and has its 1-task point."""
        def point(o):
            p = dict(o.session.params)
            return tuple(sorted((k, json.dumps(v)) for k, v in p.items() if k != "nr_task"))

        sweeps: dict[tuple, list] = {}
        for o in outcomes:
            sweeps.setdefault(point(o), []).append(o)
        for runs in sweeps.values():
            one = [o for o in runs if o.session.params["nr_task"] == 1]
            if len(runs) < 2 or not one or not one[0].values.get(WORKLOAD):
                continue
            # Imported only for a sweep: it brings numpy, 0.1-0.3 s of CPU at the end of every
            # run of testcases without one (four of them in a guest: on the command's critical path).
            from perflab.stats.scaling import scalability

            base = one[0].values[WORKLOAD]
            for o in runs:
                figures = scalability(o.values.get(WORKLOAD, []), o.session.params["nr_task"], base)
                for repetition, figure in enumerate(figures):
                    add_samples(o, repetition, [Sample(SCALABILITY, figure, "", HIGHER_IS_BETTER)])

    @contextmanager
    def session(self, params: WillItScaleParams, job: dict) -> Iterator[WillItScaleSession]:
        binary = cbuild.build(params.test, tc.SOURCE_DIR, flags=tc.BUILD_FLAGS, libs=tc.BUILD_LIBS)
        restore = None
        with workdir(params, "wis") as directory:
            try:
                if far_machine() is not None:
                    # Another machine's setting is its own (its run's fact thp_enabled, read there):
                    # this machine's is neither read nor changed; a mode asked for is the harness's.
                    if params.thp == "system":
                        thp_fact, harness_thp = (f"system setting of {far_machine()} (the run's fact thp_enabled, "
                                                 "read there)"), "system"
                    else:
                        thp_fact, harness_thp = f"per process: {params.thp} via {_per_process(params.thp)}", params.thp
                elif params.thp == "system":
                    from perflab.core.environment import _bracketed

                    thp_fact, harness_thp = f"system setting: {_bracketed(THP_SYSFS)}", "system"
                else:
                    restore = _apply_system_thp(params.thp)
                    if restore is not None:
                        thp_fact, harness_thp = f"system setting: {params.thp} (set for the run)", "system"
                    else:
                        thp_fact, harness_thp = (f"per process: {params.thp} via {_per_process(params.thp)} "
                                                 "(system setting read-only)"), params.thp
                yield WillItScaleSession(params, job, binary, directory, thp_fact, harness_thp)
            finally:
                if restore is not None and restore != params.thp:
                    try:
                        with open(THP_SYSFS, "w") as f:
                            f.write(restore)
                    except OSError:
                        pass


FAMILY = WillItScaleFamily()

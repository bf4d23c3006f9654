"""The `hackbench` family: groups of senders and receivers passing messages over pipes or sockets.

The workload is hackbench's (written here in c/hackbench.c, no code taken from
hackbench): `groups` groups of `fds` senders and `fds` receivers (20 and 20, as
hackbench); each receiver has one channel (an AF_UNIX stream socketpair, or a
pipe with `ipc: pipe`) and each sender of its group writes `loops` rounds of
one `datasize`-byte message to every receiver of the group. Tasks are
processes or threads (`mode`). The program starts every task, waits until all
are ready, releases them at once and stops its clock when the last one has
finished. One repetition is one execution of the program.

Metrics: hackbench.time (the seconds the program measures for the message
passing, as hackbench's "Time:"), hackbench.throughput (messages per second:
groups x fds x fds x loops / time) and hackbench.time.user / .sys (the CPU
time of every task, from wait4).
"""

from __future__ import annotations

import math
import os
import resource
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from perflab.benchmarks import protocol
from perflab.benchmarks.base import Family, ItemFailed, Metric, Params, Session, catalog_of, cpu_time_metrics, job_timeout
from perflab.core.model import HIGHER_IS_BETTER, LOWER_IS_BETTER, Sample
from perflab.core.params import cpu_ids
from perflab.core.process import ProcessResult, ProcessSpec

SOURCE_DIR = Path(__file__).resolve().parent / "c"
BUILD_FLAGS: tuple[str, ...] = ("-O2",)
BUILD_LIBS: tuple[str, ...] = ("-lpthread",)
MAX_GROUPS = 10000
MAX_FDS = 1000
MAX_LOOPS = 100_000_000
MAX_DATASIZE = 1 << 24
SPARE_FDS = 16          # stdio, the ready and go pipes, the launcher's
LIMITS = {"groups": MAX_GROUPS, "fds": MAX_FDS, "loops": MAX_LOOPS, "datasize": MAX_DATASIZE}

TIME = Metric("hackbench.time", "s", LOWER_IS_BETTER, "seconds from releasing every task until the last has finished")
THROUGHPUT = Metric("hackbench.throughput", "messages/s", HIGHER_IS_BETTER,
                    "messages (one sender to one receiver) per second")
TIME_USER, TIME_SYS = cpu_time_metrics("hackbench.time.user", "hackbench.time.sys", "of every task")
METRICS = catalog_of(TIME, THROUGHPUT, TIME_USER, TIME_SYS)
# What the program prints (the runtime's metric lines).
RAW = {TIME.name: "s", "hackbench.messages": "messages", "hackbench.tasks": "tasks"}


def _whole(v, low: int, high: int):
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, str) and v.strip().isdigit():
            v = int(v)
        else:
            raise ValueError(f"{v!r} is not a whole number; valid: {low} to {high}")
    if not low <= v <= high:
        raise ValueError(f"must be between {low} and {high}")
    return v


class HackbenchParams(Params):
    groups: int = Field(10, description="groups of senders and receivers (hackbench -g)")
    fds: int = Field(20, description="senders, and receivers, per group (hackbench -f)")
    loops: int = Field(100, description="messages each sender writes to each receiver of its group (hackbench -l)")
    datasize: int = Field(100, description="bytes per message (hackbench -s)")
    mode: Literal["process", "thread"] = Field("process", description="tasks are processes or threads (hackbench -P/-T)")
    ipc: Literal["socket", "pipe"] = Field("socket", description="AF_UNIX socketpairs or pipes (hackbench -p)")
    placement: Literal["scheduler", "one-cpu"] = Field(
        "scheduler", description="scheduler: tasks on any CPU perflab may use; one-cpu: all on the first of them")

    @field_validator(*LIMITS, mode="before")
    @classmethod
    def _counts(cls, v, info):
        return _whole(v, 1, LIMITS[info.field_name])

    @model_validator(mode="after")
    def _limits(self) -> "HackbenchParams":
        check_limits(self)
        return self


def tasks_of(p: HackbenchParams) -> int:
    return p.groups * p.fds * 2


def messages_of(p: HackbenchParams) -> int:
    return p.groups * p.fds * p.fds * p.loops


def check_limits(p: HackbenchParams) -> None:
    """ValueError for a job this process's limits cannot start (checked with the parameters, before anything runs)."""
    if p.mode == "thread":
        needed = p.groups * p.fds * 2 + SPARE_FDS
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        limit = hard if hard != resource.RLIM_INFINITY else needed
        if needed > limit:
            raise ValueError(f"groups = {p.groups} in thread mode keeps {needed} descriptors open, more than the "
                             f"limit of {limit} (ulimit -n); valid: groups up to "
                             f"{max(0, (limit - SPARE_FDS) // (2 * p.fds))} with fds = {p.fds}")
    else:
        soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
        if soft != resource.RLIM_INFINITY and os.geteuid() != 0 and tasks_of(p) + 64 > soft:
            raise ValueError(f"groups = {p.groups} in process mode starts {tasks_of(p)} processes, near the "
                             f"limit of {soft} (ulimit -u); use fewer groups or mode: thread")


class HackbenchSession(Session):
    def __init__(self, params: HackbenchParams, job: dict, binary: Path):
        self.p = params
        self.binary = str(binary)
        self.timeout = job_timeout(job, 600)
        allowed = cpu_ids()
        self.cpus = str(allowed[0]) if params.placement == "one-cpu" else None
        placement = (f"every task on CPU {allowed[0]}" if self.cpus is not None
                     else f"the scheduler's choice among CPUs {allowed}")
        name = f"hackbench {params.mode} {params.ipc} -g {params.groups} -l {params.loops}"
        super().__init__(name=name, params=params.model_dump(), facts={
            "placement": placement, "benchmark_aslr": "on (the system's setting)",
            "hackbench_tasks": tasks_of(params)})

    def processes(self, repetition: int) -> list[ProcessSpec]:
        p = self.p
        argv = [self.binary, "-g", str(p.groups), "-f", str(p.fds), "-l", str(p.loops), "-s", str(p.datasize),
                "-m", p.mode, "-i", p.ipc]
        return [ProcessSpec(argv, item="hackbench", timeout=self.timeout, cpus=self.cpus)]

    def parse(self, spec: ProcessSpec, result: ProcessResult) -> list[Sample]:
        return parse_output(result.stdout, self.p) + [TIME_USER.sample(result.user), TIME_SYS.sample(result.sys)]


def parse_output(text: str, p: HackbenchParams) -> list[Sample]:
    """The program's metric lines -> time and throughput; ItemFailed on anything else."""
    figures = protocol.Figures("hackbench", text, RAW)
    seconds, messages, tasks = figures.one(TIME.name), figures.one("hackbench.messages"), figures.one("hackbench.tasks")
    if not (seconds > 0 and math.isfinite(seconds)):
        raise ItemFailed(f"hackbench: printed time {seconds}, not a positive number of seconds")
    if messages != messages_of(p) or tasks != tasks_of(p):
        raise ItemFailed(f"hackbench: passed {messages} messages with {tasks} tasks, "
                         f"expected {messages_of(p)} with {tasks_of(p)}")
    return [TIME.sample(float(seconds)), THROUGHPUT.sample(messages / seconds)]


class HackbenchFamily(Family):
    name = "hackbench"
    summary = "hackbench's workload: groups of 20 senders and 20 receivers over sockets or pipes"
    Params = HackbenchParams
    # The tasks' CPU times from the launcher (wait4), not the workload's result.
    # secondary_metrics: perflab.benchmarks.SECONDARY_METRICS
    default_runs = 5
    catalog = METRICS
    program, source_dir, build_flags, build_libs = "hackbench", SOURCE_DIR, BUILD_FLAGS, BUILD_LIBS
    session_class = HackbenchSession


FAMILY = HackbenchFamily()

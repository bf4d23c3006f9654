"""The `aim7` family: AIM7's multi-user model, written here.

`load` simulated users (processes) each run the tasks of a workfile (`test`: one
task, as LKP's aim7 jobs use it, or a named mix) in an order of their own, all
at once, in the run's directory (`fs`/`dir`). One repetition is one execution
of the C program c/aim7.c at one load point: it forks the users, releases them
together, waits for the last, and prints the real seconds of that and the jobs
(task invocations) completed. Jobs per minute are computed here from those
figures, as reaim does: jobs x 60 / real seconds. A list of loads in a job file
sweeps the load as LKP's aim7 job does.

Metrics, with LKP's names: aim7.jobs-per-min, aim7.time.elapsed_time (the real
seconds of the timed part), aim7.time.user_time and aim7.time.system_time (the
rusage of the whole process tree: the launcher's wait4 includes every waited
child, and the program waits for its users, who wait for theirs).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

from pydantic import Field, field_validator, model_validator

from perflab.core import units
from perflab.core import cbuild
from perflab.benchmarks.aim7 import tasks as tk
from perflab.benchmarks import protocol
from perflab.benchmarks.base import (Family, ItemFailed, Metric, Params, Session, catalog_of, cpu_time_metrics,
                                     job_timeout, task_count)
from perflab.core.errors import UsageProblem
from perflab.core.params import in_range
from perflab.core.model import HIGHER_IS_BETTER, LOWER_IS_BETTER, Sample
from perflab.core.process import ProcessResult, ProcessSpec
from perflab.execution.vm.disk import free_bytes, workdir     # the host's directory, or a guest's disk
from perflab.execution.workdir import WorkdirParams

JPM = Metric("aim7.jobs-per-min", "jobs/min", HIGHER_IS_BETTER, "task invocations of all users x 60 / real seconds")
ELAPSED = Metric("aim7.time.elapsed_time", "s", LOWER_IS_BETTER,
                 "real seconds from releasing the users to the last one's end")
USER, SYSTEM = cpu_time_metrics("aim7.time.user_time", "aim7.time.system_time", "of the whole process tree")

MAX_USERS = 100000
MAX_JOBS = 1000000
DEFAULT_TIMEOUT = 3600.0
# What the program prints (the runtime's metric lines); aim7.user_real_s once per user.
RAW = {"aim7.users": "users", "aim7.jobs": "jobs", "aim7.real_s": "s", "aim7.blocks": "blocks", "aim7.scale": "",
       "aim7.user_real_s": "s"}
def parse_size(value, key: str) -> int:
    """'1M' -> bytes (K, M, G are powers of 1024; a bare number is bytes)."""
    return units.parse_size(value)


class Aim7Params(Params, WorkdirParams):
    test: str = Field("mixed", description=f"the workfile: one task ({', '.join(tk.TASKS)}) "
                                           f"or a mix ({', '.join((*tk.MIXES, *tk.ALIASES))})")
    load: int = Field(1, description="simulated users: a number or N% of the online CPUs")
    jobs: Annotated[int | None, in_range(1, MAX_JOBS, f"must be between 1 and {MAX_JOBS} task invocations per user")
                    ] = Field(None, description="task invocations per user, shared out by the workfile's weights "
                                                "(default: the workfile once; 10 for one task)")
    file_size: str = Field("1M", description="disk task file size (AIM's FILESIZE; 1 KiB blocks)")
    pool_size: str = Field("10M", description="added to every disk file, divided by the load (AIM's POOLSIZE)")
    scale: Annotated[float, in_range(0, 1000, "must be a positive number up to 1000", above=True)] = Field(
        1.0, description="multiplies the loop counts of the non-disk tasks (small for tests)")
    sync: bool = Field(False, description="call sync() around every disk task, as unmodified AIM does")
    seed: Annotated[int, in_range(0, 2 ** 63 - 1, "must be a whole number from 0")] = Field(
        0, description="seed of each user's task order and random blocks")

    @field_validator("test", mode="before")
    @classmethod
    def _test(cls, v):
        if not isinstance(v, str):
            raise ValueError(f"{v!r} is not a task or mix name")
        return tk.canonical(v)

    @field_validator("load", mode="before")
    @classmethod
    def _load(cls, v):
        return task_count(v, "load", "users", 1, MAX_USERS)

    @field_validator("file_size", "pool_size", mode="before")
    @classmethod
    def _size(cls, v, info):
        parse_size(v, info.field_name)
        return str(v)

    @model_validator(mode="after")
    def _blocks(self):
        if self.blocks() < 1:
            raise ValueError(f"file_size {self.file_size!r} with pool_size {self.pool_size!r} over {self.load} "
                             f"users makes files of no 1 KiB block; give at least 1K")
        return self

    def blocks(self) -> int:
        """Disk file size in 1 KiB blocks: FILESIZE + POOLSIZE / users, as AIM sizes them."""
        return (parse_size(self.file_size, "file_size") // tk.BLOCK
                + parse_size(self.pool_size, "pool_size") // tk.BLOCK // self.load)


class Aim7Session(Session):
    def __init__(self, params: Aim7Params, job: dict, program, helper, path: str, facts: dict):
        self.p = params
        self.program = str(program)
        self.helper = str(helper)
        self.path = path
        self.counts = tk.per_user(params.test, params.jobs)
        self.timeout = job_timeout(job, DEFAULT_TIMEOUT)
        stored = params.model_dump()
        stored.pop("dir")
        name = f"aim7 {params.test} load {params.load}"
        super().__init__(name=name, params=stored, facts={
            **facts, "placement": "the scheduler's choice",
            "aim7_blocks": params.blocks(), "aim7_tasks_per_user": self.counts})

    def processes(self, repetition: int) -> list[ProcessSpec]:
        p = self.p
        spec = ",".join(f"{t}:{n}" for t, n in self.counts.items() if n)
        argv = [self.program, "-u", str(p.load), "-t", spec, "-b", str(p.blocks()), "-S", repr(p.scale),
                "-s", str(p.seed + repetition), "-e", self.helper]
        if p.sync:
            argv.append("-y")
        return [ProcessSpec(argv, item=p.test, cwd=self.path, timeout=self.timeout)]

    def parse(self, spec: ProcessSpec, result: ProcessResult) -> list[Sample]:
        expected = self.p.load * sum(self.counts.values())
        return parse_output(spec.item, self.p.load, expected, result)


def parse_output(test: str, users: int, expected_jobs: int, result: ProcessResult) -> list[Sample]:
    """The program's metric lines -> jobs per minute and times; ItemFailed on anything else."""
    figures = protocol.Figures(test, result.stdout, RAW)
    jobs, real = figures.one("aim7.jobs"), figures.one("aim7.real_s")
    if figures.one("aim7.users") != users:
        raise ItemFailed(f"{test}: aim7 ran {figures.one('aim7.users')!r} users, asked for {users}")
    if jobs != expected_jobs:
        raise ItemFailed(f"{test}: aim7 completed {jobs!r} jobs, expected {expected_jobs}")
    if not (real > 0 and math.isfinite(real)):
        raise ItemFailed(f"{test}: aim7 reported real_s {real!r}")
    return [JPM.sample(jobs * 60.0 / real), ELAPSED.sample(float(real)),
            USER.sample(result.user), SYSTEM.sample(result.sys)]


class Aim7Family(Family):
    name = "aim7"
    summary = "AIM7-class multi-user workload: N users run a workfile of tasks; jobs per minute"
    Params = Aim7Params
    catalog = catalog_of(JPM, ELAPSED, USER, SYSTEM)

    @contextmanager
    def session(self, params: Aim7Params, job: dict) -> Iterator[Aim7Session]:
        program = cbuild.build(tk.PROGRAM, tk.SOURCE_DIR, flags=tk.BUILD_FLAGS)
        helper = cbuild.build(tk.HELPER, tk.SOURCE_DIR, flags=tk.BUILD_FLAGS)
        with workdir(params, "aim7") as wd:
            _check_space(params, wd.path)
            yield Aim7Session(params, job, program, helper, wd.path, wd.facts)


def _check_space(params: Aim7Params, path: str) -> None:
    """Refuse a load whose files cannot fit: every user holds at most one disk file at a time
    (disk_cp: a copy beside the shared source file)."""
    counts = tk.per_user(params.test, params.jobs)
    if not any(counts.get(t) for t in tk.DISK_TASKS):
        return
    need = (params.load + 1) * params.blocks() * tk.BLOCK
    free = free_bytes(path)
    if free is not None and need > free:
        raise UsageProblem(f"aim7 parameters load = {params.load}, file_size = {params.file_size!r}, pool_size = "
                           f"{params.pool_size!r}: the users' files need {need >> 20} MiB, {path} has {free >> 20} MiB free")


FAMILY = Aim7Family()

"""The `fio` family: the real fio (Debian's), on a file in the run's directory.

One repetition is one execution of fio with `--output-format=json
--group_reporting`, started by the runner's executor: `numjobs` jobs, each on its
own file of `size` bytes in the run's directory (a temporary directory, `dir:
PATH`, or a fresh filesystem of the job's choosing with `fs:`, LKP's key, on a
RAM-backed loop device), or all on one file with `shared_file: true`. The samples are fio's own figures, read from its JSON
and only rescaled (bytes/s to MiB/s, nanoseconds to microseconds), under LKP's
names: fio.read_bw_MBps, fio.read_iops, fio.read_clat_mean_us,
fio.read_clat_p99_us (and write_ for the writing modes), fio.usr_cpu and
fio.sys_cpu. See docs/fio.md.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from perflab.benchmarks.base import STOP, Family, ItemFailed, Metric, Params, Session, catalog_of, job_timeout, task_count
from perflab.core.errors import UsageProblem
from perflab.core.params import in_range
from perflab.core.model import HIGHER_IS_BETTER, INFORMATIONAL, LOWER_IS_BETTER, Sample
from perflab.core.process import ProcessResult, ProcessSpec
from perflab.execution.vm.disk import free_bytes, workdir     # the host's directory, or a guest's disk
from perflab.execution.workdir import WorkdirParams

MODES = ("read", "write", "randread", "randwrite", "rw", "randrw")
READING = {"read", "randread", "rw", "randrw"}
WRITING = {"write", "randwrite", "rw", "randrw"}
# Engines that work on a file in a directory; the session also checks that this fio has it.
ENGINES = ("psync", "sync", "pvsync", "pvsync2", "vsync", "libaio", "io_uring", "posixaio", "mmap")
MAX_JOBS = 4096
MIB = 1 << 20


def _metrics_of(direction: str) -> dict[str, Metric]:
    d = direction
    return catalog_of(
        Metric(f"fio.{d}_bw_MBps", "MiB/s", HIGHER_IS_BETTER, f"{d} bandwidth of all jobs (fio's bw_bytes / 2^20)"),
        Metric(f"fio.{d}_iops", "IO/s", HIGHER_IS_BETTER, f"{d} I/Os per second of all jobs"),
        Metric(f"fio.{d}_clat_mean_us", "us", LOWER_IS_BETTER, f"mean {d} completion latency (fio's clat_ns mean / 1000)"),
        Metric(f"fio.{d}_clat_p99_us", "us", LOWER_IS_BETTER, f"99th percentile of {d} completion latency"),
    )


CPU_METRICS = catalog_of(
    Metric("fio.usr_cpu", "%", INFORMATIONAL, "user CPU of the jobs, % of one CPU over the run (fio's usr_cpu)"),
    Metric("fio.sys_cpu", "%", INFORMATIONAL, "system CPU of the jobs, % of one CPU over the run (fio's sys_cpu)"),
)


def _size(value, key: str, minimum: int = 1) -> int:
    from perflab.execution.filesystem import human, parse_size

    n = parse_size(value, key)
    if n < minimum:
        raise ValueError(f"must be at least {human(minimum)}")
    return n


class FioParams(Params, WorkdirParams):
    rw: Literal["read", "write", "randread", "randwrite", "rw", "randrw"] = Field(
        "read", description="I/O pattern: read, write, randread, randwrite, rw, randrw (fio's rw)")
    bs: str = Field("4k", description="block size of each I/O (e.g. 4k, 1M; powers of 1024)")
    iodepth: Annotated[int, in_range(1, 65536)] = Field(1, description="I/Os in flight per job (asynchronous engines)")
    numjobs: int = Field(1, description="jobs (processes), each on its own file: a number or N% of the CPUs")
    size: str = Field("128M", description="file size of each job (e.g. 64M, 1G)")
    direct: bool = Field(False, description="O_DIRECT: bypass the page cache")
    ioengine: Literal[ENGINES] = Field("psync", description=f"fio's I/O engine: {', '.join(ENGINES)}")  # type: ignore[valid-type]
    runtime: Annotated[float, in_range(0.01, message="must be a number of seconds, at least 0.01")] = Field(
        5.0, description="seconds of I/O per repetition (with time_based; else an upper bound)")
    time_based: bool = Field(True, description="run for runtime seconds, going over the file again as needed")
    rwmixread: Annotated[int, in_range(0, 100, "must be a percentage between 0 and 100")] = Field(
        50, description="% of reads in rw and randrw")
    shared_file: bool = Field(False, description="all jobs on one file (fio's filename=) instead of a file each")

    @field_validator("bs", "size", mode="before")
    @classmethod
    def _sizes(cls, v, info):
        _size(v, info.field_name, 512 if info.field_name == "bs" else 1)
        return str(v)

    @field_validator("numjobs", mode="before")
    @classmethod
    def _jobs(cls, v):
        return task_count(v, "numjobs", "jobs (or N% of the CPUs)", 1, MAX_JOBS)

    @model_validator(mode="after")
    def _block_fits(self):
        if _size(self.bs, "bs") > _size(self.size, "size"):
            raise ValueError(f"bs = {self.bs!r} is larger than size = {self.size!r}")
        return self

    def bytes(self, key: str) -> int:
        return _size(getattr(self, key), key)


def fio_binary() -> str:
    """The fio command; a one-line error when it is missing."""
    path = shutil.which("fio")
    if path is None:
        raise UsageProblem("fio is not installed (Debian package fio; tools/test.sh installs it): "
                           "the fio family runs the real fio")
    return path


def fio_engines(binary: str) -> tuple[str, list[str]]:
    """(version, engines) of this fio, from --version and --enghelp."""
    import subprocess

    try:
        version = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
        listing = subprocess.run([binary, "--enghelp"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        raise UsageProblem(f"fio ({binary}) does not run: {e}") from None
    engines = [line.strip() for line in listing.splitlines()[1:] if line.strip()]
    return version or "unknown", engines


class FioSession(Session):
    def __init__(self, params: FioParams, job: dict, binary: str, version: str, directory: str, facts: dict):
        self.p = params
        self.binary = binary
        self.directory = directory
        self.timeout = job_timeout(job, params.runtime + 120)
        stored = params.model_dump()
        stored.pop("dir")
        where = f"on {params.fs}" if params.fs else "in a directory"
        super().__init__(
            name=f"fio {params.rw} bs={params.bs} x{params.numjobs} {where}",
            params=stored,
            facts={**facts, "fio_version": version, "placement": "the scheduler's choice"},
        )

    def argv(self) -> list[str]:
        p = self.p
        argv = [self.binary, "--name=perflab", f"--directory={self.directory}", f"--rw={p.rw}",
                f"--bs={p.bytes('bs')}", f"--size={p.bytes('size')}", f"--numjobs={p.numjobs}",
                f"--iodepth={p.iodepth}", f"--ioengine={p.ioengine}", f"--direct={int(p.direct)}",
                f"--runtime={round(p.runtime * 1000)}ms", "--group_reporting", "--output-format=json"]
        if p.time_based:
            argv.append("--time_based")
        if p.shared_file:
            argv.append("--filename=perflab.shared")
        if p.rw in ("rw", "randrw"):
            argv.append(f"--rwmixread={p.rwmixread}")
        return argv

    def processes(self, repetition: int) -> list[ProcessSpec]:
        return [ProcessSpec(self.argv(), item=f"fio --rw={self.p.rw}", cwd=self.directory, timeout=self.timeout)]

    def parse(self, spec: ProcessSpec, result: ProcessResult) -> list[Sample]:
        return parse_output(spec.item, self.p.rw, result.stdout)


def fio_document(item: str, text: str) -> dict:
    """fio's JSON document (fio may print notes before it)."""
    start = text.find("{")
    if start < 0:
        raise ItemFailed(f"{item}: no JSON in fio's output: {text.strip()[:120]!r}")
    try:
        doc = json.loads(text[start:])
    except ValueError as e:
        raise ItemFailed(f"{item}: fio's output is not JSON ({e})") from None
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    if not isinstance(jobs, list) or not jobs or not isinstance(jobs[0], dict):
        raise ItemFailed(f"{item}: fio's JSON has no jobs")
    return doc


def figures(rw: str, doc: dict, item: str = "fio") -> dict[str, float]:
    """perflab's metrics from fio's JSON document (group_reporting: one job entry holds all jobs)."""
    jobs = doc["jobs"]
    if len(jobs) != 1:
        raise ItemFailed(f"{item}: fio reported {len(jobs)} groups, expected one (group_reporting)")
    job = jobs[0]
    if job.get("error"):
        raise ItemFailed(f"{item}: fio reported error {job['error']} ({os.strerror(job['error'])})")
    out: dict[str, float] = {}
    for d, active in (("read", rw in READING), ("write", rw in WRITING)):
        if not active:
            continue
        part = job.get(d) or {}
        clat = part.get("clat_ns") or {}
        try:
            if not part.get("total_ios"):
                raise ItemFailed(f"{item}: fio completed no {d} I/O")
            out[f"fio.{d}_bw_MBps"] = part["bw_bytes"] / MIB
            out[f"fio.{d}_iops"] = float(part["iops"])
            out[f"fio.{d}_clat_mean_us"] = clat["mean"] / 1000
            out[f"fio.{d}_clat_p99_us"] = clat["percentile"]["99.000000"] / 1000
        except (KeyError, TypeError) as e:
            raise ItemFailed(f"{item}: fio's JSON lacks {d} figure {e}") from None
    try:
        out["fio.usr_cpu"] = float(job["usr_cpu"])
        out["fio.sys_cpu"] = float(job["sys_cpu"])
    except (KeyError, TypeError, ValueError) as e:
        raise ItemFailed(f"{item}: fio's JSON lacks CPU figure {e}") from None
    return out


def parse_output(item: str, rw: str, text: str) -> list[Sample]:
    catalog = {**_metrics_of("read"), **_metrics_of("write"), **CPU_METRICS}
    out = []
    for name, value in figures(rw, fio_document(item, text), item).items():
        if not math.isfinite(value):
            raise ItemFailed(f"{item}: fio reported {name} = {value}")
        m = catalog[name]
        out.append(Sample(name, value, m.unit, m.direction))
    return out


class FioFamily(Family):
    name = "fio"
    summary = "the real fio on a file in the run's directory (optionally a fresh filesystem in RAM)"
    Params = FioParams
    # duration_params: perflab.benchmarks.DURATION_PARAMS
    default_runs = 3
    failure_policy = STOP
    # secondary_metrics: perflab.benchmarks.SECONDARY_METRICS

    def metrics(self, params: FioParams) -> dict[str, Metric]:
        out = {}
        if params.rw in READING:
            out.update(_metrics_of("read"))
        if params.rw in WRITING:
            out.update(_metrics_of("write"))
        return {**out, **CPU_METRICS}

    @contextmanager
    def session(self, params: FioParams, job: dict) -> Iterator[FioSession]:
        from perflab.execution.filesystem import human

        binary = fio_binary()
        version, engines = fio_engines(binary)
        if params.ioengine not in engines:
            usable = [e for e in ENGINES if e in engines]
            raise UsageProblem(f"fio parameter ioengine = {params.ioengine!r}: this fio ({version}) does not have it; "
                               f"valid here: {', '.join(usable)}")
        with workdir(params, "fio") as wd:
            need = (1 if params.shared_file else params.numjobs) * params.bytes("size")
            free = free_bytes(wd.path)
            if free is not None and need > free:
                room = "a larger fs_size" if params.fs else "another dir"
                raise UsageProblem(
                    f"fio parameters numjobs x size = {1 if params.shared_file else params.numjobs} x {params.size} "
                    f"= {human(need)} do not fit "
                    f"in the run's directory ({human(free)} free on {wd.facts.get('workdir_fs', '?')}); "
                    f"choose a smaller size or {room}")
            yield FioSession(params, job, binary, version, wd.path, wd.facts)


FAMILY = FioFamily()

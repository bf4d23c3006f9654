"""The `ebizzy` family: threads that allocate, copy and search chunks of memory for a set time.

The workload is ebizzy 0.3's (written here in c/ebizzy.c, no code taken from
ebizzy): `chunks` chunks of `chunk_size` bytes of sorted records are made once;
then for `duration` seconds each of `nr_threads` threads repeats one record —
allocate a chunk-sized buffer (malloc, or mmap with `mmap: true`), copy a chunk
into it and binary-search a key (or, with `touch: true`, only write one byte
per page of it), free it. The seed's `ebizzy -mTt N` is `mmap: true, touch:
true, nr_threads: N`. One repetition is one execution of the program.

Metrics, with LKP's names (stats/ebizzy): ebizzy.throughput (records/s of all
threads), ebizzy.throughput.per_thread.min / .max (records/s of the slowest and
fastest thread), ebizzy.throughput.per_thread.stddev_percent (the population
standard deviation of the per-thread figures as a percentage of the total
throughput, as LKP defines it), and ebizzy.time.real / .user / .sys (the
timed seconds, and the CPU time of the process from wait4).

Under icount (a guest whose clock counts instructions: core.params.time_is_exact) a sample is
a number of records, not `duration` seconds: the threads stop once they have completed
records_under_icount(chunk_size) between them (ICOUNT_BYTES of chunks copied or touched), and
the figure is those records over the instruction-time they took. `duration` keeps its
meaning on the host and in tcg and kvm guests (docs/vm.md).
"""

from __future__ import annotations

import math
from pathlib import Path

from pydantic import Field, field_validator, model_validator

from perflab.core import environment, units
from perflab.benchmarks import protocol
from perflab.benchmarks.base import (Family, ItemFailed, Metric, Params, Session, catalog_of, cpu_time_metrics,
                                     job_timeout, task_count)
from perflab.core.model import HIGHER_IS_BETTER, INFORMATIONAL, LOWER_IS_BETTER, Sample
from perflab.core.params import time_is_exact
from perflab.core.process import ProcessResult, ProcessSpec

SOURCE_DIR = Path(__file__).resolve().parent / "c"
BUILD_FLAGS: tuple[str, ...] = ("-O2",)
BUILD_LIBS: tuple[str, ...] = ("-lpthread", "-lm")
MAX_THREADS = 65536
MAX_CHUNKS = 1 << 20
RECORD_BYTES = 8

THROUGHPUT = Metric("ebizzy.throughput", "records/s", HIGHER_IS_BETTER, "records per second of all threads")
PER_THREAD_MIN = Metric("ebizzy.throughput.per_thread.min", "records/s", HIGHER_IS_BETTER,
                        "records per second of the slowest thread")
PER_THREAD_MAX = Metric("ebizzy.throughput.per_thread.max", "records/s", HIGHER_IS_BETTER,
                        "records per second of the fastest thread")
PER_THREAD_SPREAD = Metric("ebizzy.throughput.per_thread.stddev_percent", "%", LOWER_IS_BETTER,
                           "standard deviation of the per-thread records/s, % of the throughput (LKP's)")
TIME_REAL = Metric("ebizzy.time.real", "s", INFORMATIONAL, "timed seconds (start to stop of the threads)")
TIME_USER, TIME_SYS = cpu_time_metrics("ebizzy.time.user", "ebizzy.time.sys", "of the process")
METRICS = catalog_of(THROUGHPUT, PER_THREAD_MIN, PER_THREAD_MAX, PER_THREAD_SPREAD, TIME_REAL, TIME_USER, TIME_SYS)
# What the program prints (the runtime's metric lines): the timed seconds, and each thread's records.
RAW = {"ebizzy.elapsed": "s", "ebizzy.records": "records"}
# Under icount: a sample is the records that copy (or touch) this many bytes of chunks, at least
# ICOUNT_MIN_RECORDS (see records_under_icount).
ICOUNT_BYTES = 256 << 20
ICOUNT_MIN_RECORDS = 64


def records_under_icount(chunk_size: int) -> int:
    """Records in an icount sample: 512 of the default 512 KiB chunks (37 ms of instruction-time)."""
    return max(ICOUNT_MIN_RECORDS, ICOUNT_BYTES // max(chunk_size, 1))

def parse_size(value) -> int:
    """512, '512k', '4M', '1G' -> bytes (binary multiples)."""
    return units.parse_size(value)


memory_available = environment.memory_available


class EbizzyParams(Params):
    nr_threads: int = Field("200%", validate_default=True,
                            description="threads: a number or N% of the online CPUs (ebizzy -t; default 2 per CPU)")
    mmap: bool = Field(False, description="allocate with mmap/munmap instead of malloc/free (ebizzy -m)")
    touch: bool = Field(False, description="only touch each page of the buffer instead of copy and search (ebizzy -T)")
    chunks: int = Field(10, description="number of memory chunks (ebizzy -n)")
    chunk_size: int = Field(524288, description="bytes per chunk, a multiple of 8; 512k, 1M accepted (ebizzy -s)")
    duration: float = Field(10.0, description="timed seconds per repetition (ebizzy -S)")
    random: bool = Field(False, description="pick chunk and key at random (ebizzy 0.3 always takes chunk 0 and key 0)")

    @field_validator("nr_threads", mode="before")
    @classmethod
    def _threads(cls, v):
        return task_count(v, "nr_threads", "threads or N% of the CPUs", 1, MAX_THREADS)

    @field_validator("mmap", "touch", "random", mode="before")
    @classmethod
    def _flag(cls, v):
        if isinstance(v, bool):
            return v
        if isinstance(v, str) and v.strip().lower() in ("true", "false", "yes", "no", "on", "off"):
            return v.strip().lower() in ("true", "yes", "on")
        raise ValueError(f"{v!r} is not a flag; valid: true, false")

    @field_validator("chunks", mode="before")
    @classmethod
    def _chunks(cls, v):
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_CHUNKS:
            raise ValueError(f"must be a whole number from 1 to {MAX_CHUNKS}")
        return v

    @field_validator("chunk_size", mode="before")
    @classmethod
    def _chunk_size(cls, v):
        size = parse_size(v)
        if size < RECORD_BYTES or size % RECORD_BYTES:
            raise ValueError(f"must be a multiple of {RECORD_BYTES} bytes (one record), at least {RECORD_BYTES}")
        if size > 1 << 34:
            raise ValueError("must be at most 16G")
        return size

    @field_validator("duration")
    @classmethod
    def _positive(cls, v: float) -> float:
        if not (v > 0 and math.isfinite(v)):
            raise ValueError("must be a positive number of seconds")
        return v

    @model_validator(mode="after")
    def _fits(self) -> "EbizzyParams":
        needed = (self.chunks + self.nr_threads) * self.chunk_size
        available = memory_available()
        if available is not None and needed > available:
            raise ValueError(f"chunks x chunk_size plus a buffer per thread is {needed >> 20} MiB, more than the "
                             f"{available >> 20} MiB of memory available; use fewer or smaller chunks")
        return self


class EbizzySession(Session):
    def __init__(self, params: EbizzyParams, job: dict, binary: Path):
        self.p = params
        self.binary = str(binary)
        self.timeout = job_timeout(job, params.duration + 60)
        # Under icount a sample is a number of records (see the module's docstring).
        self.records = records_under_icount(params.chunk_size) if time_is_exact() else None
        flags = "".join(f for f, on in (("m", params.mmap), ("T", params.touch)) if on)
        name = f"ebizzy -{flags}t {params.nr_threads}" if flags else f"ebizzy -t {params.nr_threads}"
        super().__init__(name=name, params=params.model_dump(), facts={
            "placement": "the scheduler's choice (threads not bound)",
            "benchmark_aslr": "on (the system's setting)",
            "ebizzy_memory_mb": round(params.chunks * params.chunk_size / (1 << 20), 3),
            **({"ebizzy_sample": f"{self.records} records of all threads (instruction-time; not duration)"}
               if self.records else {})})

    def processes(self, repetition: int) -> list[ProcessSpec]:
        p = self.p
        argv = [self.binary, "-t", str(p.nr_threads), "-n", str(p.chunks), "-s", str(p.chunk_size),
                "-S", repr(p.duration), *(["-R", str(self.records)] if self.records else [])]
        argv += [flag for flag, on in (("-m", p.mmap), ("-T", p.touch), ("-r", p.random)) if on]
        return [ProcessSpec(argv, item="ebizzy", timeout=self.timeout)]

    def parse(self, spec: ProcessSpec, result: ProcessResult) -> list[Sample]:
        return parse_output(result.stdout, self.p.nr_threads) + [TIME_USER.sample(result.user), TIME_SYS.sample(result.sys)]


def parse_output(text: str, threads: int) -> list[Sample]:
    """The program's metric lines -> throughput, per-thread spread and timed seconds; ItemFailed otherwise."""
    figures = protocol.Figures("ebizzy", text, RAW)
    records, elapsed = figures.all("ebizzy.records"), figures.one("ebizzy.elapsed")
    if (len(records) != threads or not all(r >= 0 and float(r).is_integer() for r in records)
            or not elapsed > 0):
        raise ItemFailed(f"ebizzy: printed {len(records)} record counts {records[:4]} and elapsed {elapsed}, "
                         f"not {threads} thread counts and a positive elapsed time")
    rates = [r / elapsed for r in records]
    total = sum(rates)
    mean = total / len(rates)
    stddev = math.sqrt(sum((r - mean) ** 2 for r in rates) / len(rates))
    return [
        THROUGHPUT.sample(total),
        PER_THREAD_MIN.sample(min(rates)),
        PER_THREAD_MAX.sample(max(rates)),
        PER_THREAD_SPREAD.sample(100.0 * stddev / total if total > 0 else 0.0),
        TIME_REAL.sample(float(elapsed)),
    ]


class EbizzyFamily(Family):
    name = "ebizzy"
    summary = "ebizzy's workload: threads allocate, copy and search memory chunks for a set time"
    Params = EbizzyParams
    # duration_params: perflab.benchmarks.DURATION_PARAMS
    # The process's view from the launcher (wait4) and the timed seconds, not the workload's result.
    # secondary_metrics: perflab.benchmarks.SECONDARY_METRICS
    default_runs = 3
    catalog = METRICS
    program, source_dir, build_flags, build_libs = "ebizzy", SOURCE_DIR, BUILD_FLAGS, BUILD_LIBS
    session_class = EbizzySession


FAMILY = EbizzyFamily()

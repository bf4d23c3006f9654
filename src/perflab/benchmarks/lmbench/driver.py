"""The `lmbench` family: build each C program, run it in separate processes,
parse its JSON lines into samples.

One `perflab run lmbench` is one run. A repetition is one round: each
selected program runs once, in its own process (a program the mode caps at
fewer processes sits out the later rounds), so that per-process effects
(address layout, page placement, the CPU a process lands on) are part of the
spread and slow drift of the machine hits every program alike. A program that
cannot be built, crashes, exits non-zero, exceeds its timeout or prints
something that is not one of its figures is recorded by the runner as a
failure of that program (named) and skipped from then on; the rest of the
suite goes on and the run ends "partial".
"""

from __future__ import annotations

import fcntl
import os
import shutil
import struct
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from typing import Literal

from pydantic import Field, field_validator

from perflab.execution import scratch
from perflab.core import cbuild
from perflab.benchmarks import protocol
from perflab.benchmarks.base import Family, ItemFailed, Metric, Params, Session
from perflab.benchmarks.lmbench import catalog, sweep
from perflab.core.model import LOWER_IS_BETTER, Sample
from perflab.core.process import ProcessResult, ProcessSpec
from perflab.execution.filesystem import filesystem_of
from perflab.core.params import time_is_exact
from perflab.stats.stopping import StoppingRule

SOURCE_DIR = Path(__file__).parent / "c"
FLAGS = cbuild.DEFAULT_FLAGS
TINY_ENV = "PERFLAB_LMBENCH_TINY"        # tiny sizes and counts: the test suite's knob
TIMEOUT_ENV = "PERFLAB_LMBENCH_TIMEOUT"  # seconds per program execution (overrides the mode's)


@dataclass(frozen=True)
class Mode:
    name: str
    processes: int      # separate executions of every program
    samples: int        # samples per figure per execution
    target_ms: float    # length of one timed sample
    timeout: float      # seconds one execution of one program may take
    extra: tuple[str, ...] = ()
    # programs run in fewer processes than `processes` (never fewer than two)
    process_caps: tuple[tuple[str, int], ...] = ()
    # programs that print fewer samples per process than `samples` (at least one)
    sample_caps: tuple[tuple[str, int], ...] = ()
    # the sample length under icount (None: target_ms / ICOUNT_SHORTER)
    icount_target_ms: float | None = None

    def __post_init__(self) -> None:
        # every figure's samples come from at least two separate processes
        for program, cap in self.process_caps:
            if cap < 2:
                raise ValueError(f"mode {self.name}: {program} capped at {cap} process(es); at least 2")
        for program, cap in self.sample_caps:
            if cap < 1:
                raise ValueError(f"mode {self.name}: {program} capped at {cap} sample(s); at least 1")

    def processes_of(self, program: str) -> int:
        return min(self.processes, dict(self.process_caps).get(program, self.processes))

    def samples_of(self, program: str) -> int:
        return min(self.samples, dict(self.sample_caps).get(program, self.samples))


# Repetitions stop when every figure of a program is known (perflab.stats.stopping):
# the 95% interval of its mean over processes within PRECISION of the mean, after
# at least MIN_RUNS processes; the mode's process count is the ceiling.  5% is
# where a figure that stops early has a standard error under 1% of its mean
# (docs/lmbench.md, "When a figure is known"), below LMbench 3's run-to-run spread.
PRECISION = 0.05
MIN_RUNS = 2

# --quick: three processes, not four, and lat_fs and lat_ctx in two.  lat_fs's
# sample is at least one batch of 1,000 files whatever the target length, and
# creating a file on a slow disk costs up to a millisecond, so four processes
# alone took 40 s of a 75 s run; lat_ctx's 42 figures (each calibrated, then
# sampled, with rings of up to 96 processes to fork) take 3 s a process, a third
# of a round.  The stopping rule rarely ends a program of many figures before its
# ceiling in so few processes (every figure must be known), so the ceiling is the
# time: 3 processes give a mean whose standard error is 1.15x four's.
#
# Issue 47 (the quick run in 15 s): samples of 5 ms, and lat_fs two a process as in
# the full mode.  Most of the run was sample-lengths: a figure is a calibration of
# about 1.6 sample lengths plus its samples, 46 ms a figure at 10 ms, and lat_ctx alone
# is 233 of them a process.  A 5 ms sample still holds thousands of iterations of every
# per-iteration figure (proc.sh four), its expected value is the 10 ms sample's, and
# the spread a run's figure has comes from its processes, not from inside one
# (docs/lmbench.md, "The quick run in 15 s").  lat_fs's sample is a batch of 1,000
# files whatever the length; its process's samples agree within a few percent while
# its processes differ several-fold, so a third batch a size bought nothing.  Under
# icount the samples stay 1 ms (the length chosen there, below).
QUICK = Mode("quick", processes=3, samples=3, target_ms=5, timeout=120,
             process_caps=(("lat_fs", 2), ("lat_ctx", 2)), sample_caps=(("lat_fs", 2),),
             icount_target_ms=1)
# The full mode: more processes and more samples than --quick, samples of the same
# 10 ms.  What a run's mean is uncertain by is the spread between processes (address
# layout, page placement, the machine's state that minute), which only more processes
# shrink; a 10 ms sample already holds thousands of iterations of every figure but the
# process figures (proc.sh: eight), so 50 ms samples bought five times the time for a
# within-process spread that was never the larger part (docs/lmbench.md, "The full
# mode").  lat_ctx (42 figures, 4 s a process) stops at four processes, lat_fs (one
# batch of 1,000 files a sample whatever its length, up to a millisecond a file on a
# slow disk) at three processes of two samples: its file-creation figures differ
# between processes several times more than between one process's samples.
#
# Nine processes, not five (issue 24, fourth pass): on a virtual machine whole processes
# run at a second, slower speed (a busy sibling hyperthread: syscall.null 0.165 or 0.222 us
# by process, for seconds at a time), and the summary's median lands on the usual speed
# only when most of a figure's processes do; nine rounds also spread each program over the
# whole run, which the memory figures need most: other guests' memory traffic moves them
# for a minute at a time.  Most programs take under a second a process; lat_ctx (4 s)
# stops at six.
FULL = Mode("full", processes=9, samples=5, target_ms=10, timeout=900,
            process_caps=(("lat_fs", 3), ("lat_ctx", 6)), sample_caps=(("lat_fs", 2),))
TINY = Mode("tiny", processes=2, samples=1, target_ms=0.5, timeout=120, extra=("-T",))


# Under QEMU's icount a sample's "time" is its instruction count (1 ns each), the same
# in every sample to a fraction of a percent, and a 10 ms sample is 10 million guest
# instructions: 0.1-0.5 s of TCG.  Length buys a timing nothing there but amortizes the
# loop around the operation, which 1/10 of the length still does (a sample of a
# 5,000-instruction system call is 200 of them), so samples are ten times shorter.
ICOUNT_SHORTER = 10


# Under icount one operation of bw_mem and bw_file is a pass over 64 MB (tens of milliseconds
# of instruction-time, far beyond the sample length), and its samples agree to 0.01%: one
# sample a process says what three do. Their sizes stay: at 4 MB glibc's memcpy takes another
# path (bw.bcopy_libc read 17% faster) and an mmap's fixed cost weighs more (bw.mmap_open_close
# 3.4% slower), so a smaller size would be another figure (docs/vm.md).
ICOUNT_SAMPLE_CAPS = (("bw_mem", 1), ("bw_file", 1))
# lat_mem's main-memory points and its curve stop at 8 MB under icount (the tiny mode's
# largest): no cache is modelled, a dependent load is the same instructions at any size
# (mem.main 0.02% and mem.main_random 0.16% from their 64 MB figures, within the spread two
# boots give mem.l1), and building 64 MB of pointer chains was a second of TCG.
ICOUNT_LARGEST = 8 << 20


def icount_mode(mode: Mode) -> Mode:
    """The mode's processes and samples, with samples ICOUNT_SHORTER times shorter (or the mode's
    own icount length) and the caps of ICOUNT_SAMPLE_CAPS."""
    caps = {**dict(mode.sample_caps), **dict(ICOUNT_SAMPLE_CAPS)}
    target = mode.icount_target_ms if mode.icount_target_ms is not None else mode.target_ms / ICOUNT_SHORTER
    return replace(mode, target_ms=target, sample_caps=tuple(caps.items()))


def mode_for(quick: bool) -> Mode:
    """$PERFLAB_LMBENCH_TINY=1: the tiny mode; =N (2-100): the tiny mode with N samples a process
    (lat_fs keeps 1: its sample is a batch of 1,000 files), so that of a loaded machine's 0.5 ms
    samples some run undisturbed (tests/test_lmbench.py)."""
    tiny = os.environ.get(TINY_ENV, "").strip()
    if tiny not in ("", "0"):
        if tiny.isdigit() and 1 < int(tiny) <= 100:
            return replace(TINY, samples=int(tiny), sample_caps=(("lat_fs", 1),))
        return TINY
    return QUICK if quick else FULL


def parse_only(values: Iterable[str]) -> list[str]:
    """`only` values (repeatable and/or comma-separated) -> categories in suite order.

    An unknown category raises ValueError listing the valid ones: inside the parameter model,
    pydantic reports it as any bad value is, at its key (and its line in a job file).
    """
    wanted: list[str] = []
    for value in values:
        for part in value.split(","):
            part = part.strip()
            if not part:
                continue
            if part not in catalog.CATEGORIES:
                raise ValueError(f"unknown category {part!r}; valid categories: {', '.join(catalog.CATEGORIES)}")
            wanted.append(part)
    return [c for c in catalog.CATEGORIES if c in wanted]


class ProgramFailed(ItemFailed):
    """One execution of one program went wrong; the message names the program."""


def parse_output(program: str, text: str) -> list[Sample]:
    """A program's JSON lines -> samples, with the catalog's unit and direction.

    Anything that is not one of the program's own figures in its unit, with a
    finite value, is garbage: ProgramFailed naming the program and the line.
    lat_mem's curve points ("mem.curve" with a "size" in bytes) are stored as
    mem.curve_<size> (sweep.curve_metric).
    """
    expected = {m: catalog.FIGURES[m].unit for m in catalog.metrics_of_program(program)}
    if program == "lat_mem":
        expected[CURVE] = "ns"
    samples = []
    for line in protocol.read(program, text, expected, ProgramFailed):
        if line.metric != CURVE:
            samples.append(Sample(line.metric, float(line.value), line.unit, catalog.FIGURES[line.metric].direction))
            continue
        size = line.extra.get("size")
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise ProgramFailed(f"{program}: a mem.curve line without a size in bytes: {line.extra!r:.80}")
        samples.append(Sample(sweep.curve_metric(size), float(line.value), "ns", LOWER_IS_BETTER))
    return samples


CURVE = "mem.curve"



class LmbenchParams(Params):
    quick: bool = Field(False, description="fewer, shorter samples (15-20 s)")
    only: list[str] | None = Field(None, description=f"categories to run: {', '.join(catalog.CATEGORIES)}")
    precision: float = Field(PRECISION, ge=0, le=1, description="stop a program's processes once each figure's "
                             "95% interval is within this fraction of its mean (0: always `runs` processes)")
    min_runs: int = Field(MIN_RUNS, ge=2, le=1000, description="processes before the first look at the interval")
    mem_curve: Literal["sparse", "full", "none"] = Field(
        "sparse", description="memory-latency curve stored besides the summary: sizes around the caches (sparse), "
                              "every size as lat_mem_rd (full), none")

    @field_validator("only", mode="before")
    @classmethod
    def _only(cls, v):
        if v is None:
            return None
        values = [v] if isinstance(v, str) else list(v)
        return parse_only(values) or None


class LmbenchSession(Session):
    def __init__(self, params: LmbenchParams, job: dict, workdir: str):
        # Under icount a figure is instruction-time, exact by construction: the job's target says so.
        icount = time_is_exact()
        self.exact = icount
        base = mode_for(params.quick)
        self.mode = icount_mode(base) if icount else base
        self.programs = catalog.programs_of(params.only or list(catalog.CATEGORIES))
        env_timeout = os.environ.get(TIMEOUT_ENV)
        self.timeout = float(job.get("timeout") or env_timeout or self.mode.timeout)
        self.workdir = workdir
        self.binaries: dict[str, Path] = {}
        self.ceiling = int(job.get("runs") or self.mode.processes)
        self.precision, self.min_runs = params.precision, params.min_runs
        # program -> metric -> the mean of each of its processes' samples (what the rule looks at)
        self.seen: dict[str, dict[str, list[float]]] = {}
        # program -> metric -> every sample of its processes, pooled (the rule's exactness test)
        self.pooled: dict[str, dict[str, list[float]]] = {}
        stored: dict = {"quick": bool(params.quick)}
        if params.only:
            stored["only"] = list(params.only)
        # stored only when not the defaults, so the params of earlier runs stay the same
        if params.precision != PRECISION:
            stored["precision"] = params.precision
        if params.min_runs != MIN_RUNS:
            stored["min_runs"] = params.min_runs
        if params.mem_curve != "sparse":
            stored["mem_curve"] = params.mem_curve
        self.mem_args, self.curve_args = mem_args(params.mem_curve, base.name == TINY.name or icount)
        if base.name == TINY.name:
            stored["tiny"] = True
        tmp_parent = os.path.dirname(workdir)
        facts = {"cc_flags": " ".join(FLAGS), "lmbench_tmpdir": tmp_parent,
                 **({"lmbench_icount": f"samples {self.mode.target_ms:g} ms; one sample a process for "
                     + ", ".join(p for p, _ in ICOUNT_SAMPLE_CAPS)
                     + f"; lat_mem up to {ICOUNT_LARGEST >> 20} MB"} if icount else {}),
                 "lmbench_mem_points": f"L1 {self.mem_args[1]}, L2 {self.mem_args[3]}",
                 "lmbench_tmpdir_fs": filesystem_of(tmp_parent)[0],
                 # where lat_fs's batches go, tried here: a guest's file system is the guest's
                 **({"lmbench_fs_batches": FS_BATCHES[top_level_placement(workdir)]}
                    if "lat_fs" in self.programs and not job.get("vm") else {}),
                 "placement": "each program pinned to the first CPU it may use"}
        try:
            facts["cc_path"] = cbuild.compiler().path
        except cbuild.BuildError:
            facts["cc_path"] = "n/a"
        super().__init__(name="lmbench", params=stored, facts=facts)

    def build(self) -> None:
        for program in self.programs:
            try:
                self.binaries[program] = cbuild.build(program, SOURCE_DIR, flags=FLAGS)
            except cbuild.BuildError as e:
                self.build_failures[program] = str(e)

    def ceiling_of(self, program: str) -> int:
        """The most processes `program` runs in: the job's runs, or the mode's cap for it."""
        return min(self.ceiling, dict(self.mode.process_caps).get(program, self.ceiling))

    def wanted(self, program: str, repetition: int) -> bool:
        """Whether `program` runs in this repetition: below its ceiling and not all its figures known."""
        ceiling = self.ceiling_of(program)
        if repetition >= ceiling:
            return False
        seen = self.seen.get(program, {})
        if min((len(v) for v in seen.values()), default=0) < 2:
            return True
        top = max(ceiling, 2)
        rule = StoppingRule(self.precision, floor=min(self.min_runs, top), ceiling=top)
        pooled = self.pooled.get(program, {})
        return not all(rule.known(values, assume_exact=self.exact, samples=pooled.get(metric))
                       for metric, values in seen.items())

    def processes(self, repetition: int) -> list[ProcessSpec]:
        return [ProcessSpec([str(binary), *self.args_of(program), *self.own_args(program, repetition)], item=program,
                            cwd=self.workdir, timeout=self.timeout)
                for program, binary in self.binaries.items() if self.wanted(program, repetition)]

    def args_of(self, program: str) -> list[str]:
        """The options every program takes: its samples per process, the sample length, the directory."""
        return ["-n", str(self.mode.samples_of(program)), "-t", f"{self.mode.target_ms:g}", "-d", self.workdir,
                *self.mode.extra]

    def own_args(self, program: str, repetition: int) -> list[str]:
        if program != "lat_mem":
            return []
        # the curve once per run (its points are not summary figures), in the first process
        main = ["-m", f"{ICOUNT_LARGEST >> 20}m"] if self.exact else []
        return self.mem_args + main + (self.curve_args if repetition == 0 else [])

    def parse(self, spec: ProcessSpec, result: ProcessResult) -> list[Sample]:
        samples = parse_output(spec.item, result.stdout)
        missing = [m for m in catalog.metrics_of_program(spec.item) if not any(s.metric == m for s in samples)]
        if missing:
            raise ProgramFailed(f"{spec.item}: printed no value for {', '.join(missing)}")
        self._note(spec.item, samples)
        return samples

    def _note(self, program: str, samples: list[Sample]) -> None:
        by_metric: dict[str, list[float]] = {}
        for smp in samples:
            by_metric.setdefault(smp.metric, []).append(smp.value)
        seen = self.seen.setdefault(program, {})
        pooled = self.pooled.setdefault(program, {})
        for metric, values in by_metric.items():
            if metric in catalog.FIGURES:   # the curve's points are measured once, not repeated
                seen.setdefault(metric, []).append(sum(values) / len(values))
                pooled.setdefault(metric, []).extend(values)


# Where lat_fs puts each batch of files (lat_fs.c, "Where the batches go"): a fresh directory
# tree, which ext2/3/4 place as a top-level directory (FS_TOPDIR_FL on the program's own
# directory), a tree at or just above one lat_fs deleted in the last 400 s (its ledger in the
# cache directory: the previous run's too) given up for another, by inode numbers, never by
# what the tree cost.  A fact of the run: on an ext4 without a journal fs.create_* reads 11 us
# a file with it and up to 60 times that without it, depending on what the minute before deleted.
FS_BATCHES = {True: "fresh tree a batch, placed as a top-level directory; trees near lat_fs's deletions of the "
                    "last 400 s skipped, by inode number",
              False: "fresh tree a batch"}
FS_IOC_GETFLAGS, FS_IOC_SETFLAGS, FS_TOPDIR_FL = 0x80086601, 0x40086602, 0x00020000   # <linux/fs.h>


def top_level_placement(parent: str) -> bool:
    """Whether the file system under `parent` lets a directory's subdirectories be placed as
    top-level ones (chattr +T), as lat_fs asks for its batches: tried on a directory made here."""
    try:
        probe = tempfile.mkdtemp(prefix="perflab-topdir-", dir=parent)
    except OSError:
        return False
    try:
        fd = os.open(probe, os.O_RDONLY | os.O_DIRECTORY)
        try:
            (flags,) = struct.unpack("i", fcntl.ioctl(fd, FS_IOC_GETFLAGS, struct.pack("i", 0)))
            fcntl.ioctl(fd, FS_IOC_SETFLAGS, struct.pack("i", flags | FS_TOPDIR_FL))
            (flags,) = struct.unpack("i", fcntl.ioctl(fd, FS_IOC_GETFLAGS, struct.pack("i", 0)))
            return bool(flags & FS_TOPDIR_FL)
        finally:
            os.close(fd)
    except OSError:
        return False
    finally:
        os.rmdir(probe)


def mem_args(curve: str, tiny: bool, caches: list[tuple[int, int]] | None = None) -> tuple[list[str], list[str]]:
    """lat_mem's options: the summary's L1 and L2 points, and the curve's sizes (sweep)."""
    caches = sweep.cache_sizes() if caches is None else caches
    l1, l2 = sweep.summary_sizes(caches)
    largest = (8 if tiny else 64) << 20
    sizes = sweep.curve_sizes(curve, caches, largest)
    curve_args = ["-z", ",".join(str(s // 1024) for s in sizes)] + (["-B"] if curve == "sparse" else [])
    return ["-1", f"{l1 // 1024}k", "-2", f"{l2 // 1024}k"], curve_args if sizes else []


class LmbenchFamily(Family):
    name = "lmbench"
    summary = "LMbench-class OS microbenchmarks (the LMbench 2.0 summary's figures)"
    Params = LmbenchParams
    # Each program makes and removes its own files (bench.h's tmp_path): a round's programs may
    # run in guests side by side (docs/vm.md).
    independent_processes = True
    # duration_params: perflab.benchmarks.DURATION_PARAMS

    def metrics(self, params: LmbenchParams) -> dict[str, Metric]:
        wanted = set(catalog.programs_of(params.only or list(catalog.CATEGORIES)))
        return {name: Metric(name, f.unit, f.direction) for name, f in catalog.FIGURES.items()
                if any(name in catalog.metrics_of_program(p) for p in wanted)}

    def runs_for(self, params: LmbenchParams) -> int:
        return mode_for(params.quick).processes

    @contextmanager
    def session(self, params: LmbenchParams, job: dict) -> Iterator[LmbenchSession]:
        workdir = tempfile.mkdtemp(prefix="perflab-lmbench-", dir=scratch.directory())   # reaped after a kill -9
        try:
            session = LmbenchSession(params, job, workdir)
            session.build()
            yield session
        finally:
            shutil.rmtree(workdir, ignore_errors=True)


FAMILY = LmbenchFamily()

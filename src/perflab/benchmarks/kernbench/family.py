"""The `kernbench` family: time a parallel build of a C source tree, as kernbench does.

One atomic job is one load: `jobs: half` (make -j CPUs/2, at least 1),
`jobs: optimal` (make -j CPUs x 2) or `jobs: N`; without `jobs` a run sweeps
`jobs: [half, optimal]` to get kernbench's two blocks, one run each. One
repetition is a clean (`make clean`, unrecorded), optionally a dropped page
cache (`drop_caches: true`: sync and 3 into /proc/sys/vm/drop_caches, root
only, unrecorded), then the timed `make -jN [target]`, started by the runner's
executor. Its samples come from the launcher's wait4 of make, which includes
every descendant make waited for (the shells, the compilers, the assembler and
the linker): elapsed, user and system time, percent CPU ((user + sys) /
elapsed, as time's %P), context switches (involuntary, time's %c) and sleeps
(voluntary switches, time's %w) -- the six lines kernbench prints.

The tree is one perflab generates (benchmarks.kernbench.tree: `size:
tiny|small|full`, `seed`) in the run's directory (`dir`, `fs` as every family
that works in a directory), or a real one, `tree: PATH`, built where it is
with its own Makefile (a kernel tree: `target: vmlinux`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from perflab.core import cbuild
from perflab.benchmarks.base import STOP, Family, Metric, Params, Session, catalog_of
from perflab.benchmarks.kernbench import tree as generated
from perflab.core.errors import UsageProblem
from perflab.core.params import in_range
from perflab.core.model import INFORMATIONAL, LOWER_IS_BETTER, Sample
from perflab.core.process import ProcessResult, ProcessSpec, in_run_directory
from perflab.execution.workdir import WorkdirParams, workdir

ELAPSED = Metric("kernbench.elapsed_time", "s", LOWER_IS_BETTER, "wall-clock time of the build (make -jN)")
USER = Metric("kernbench.user_time", "s", LOWER_IS_BETTER, "user CPU time of make and every process it waited for")
SYSTEM = Metric("kernbench.system_time", "s", LOWER_IS_BETTER, "system CPU time of make and every process it waited for")
PERCENT_CPU = Metric("kernbench.percent_cpu", "%", INFORMATIONAL, "(user + system) / elapsed x 100, as time's %P")
CONTEXT_SWITCHES = Metric("kernbench.context_switches", "", INFORMATIONAL, "involuntary context switches (time's %c)")
SLEEPS = Metric("kernbench.sleeps", "", INFORMATIONAL, "voluntary context switches: waits (time's %w)")
METRICS = catalog_of(ELAPSED, USER, SYSTEM, PERCENT_CPU, CONTEXT_SWITCHES, SLEEPS)

LOADS = ("half", "optimal")
DROP_CACHES = "/proc/sys/vm/drop_caches"
MAKEFILES = ("GNUmakefile", "makefile", "Makefile")


def load_jobs(load: str | int, cpus: int | None = None) -> int:
    """make's -j for a load: half = CPUs/2 (at least 1), optimal = CPUs x 2, a number as it is."""
    if isinstance(load, int):
        return load
    cpus = cpus or len(os.sched_getaffinity(0))
    return max(1, cpus // 2) if load == "half" else cpus * 2


def load_title(load: str, jobs: int) -> str:
    """kernbench's name of a load: 'Half load -j 4', 'Optimal load -j 16', 'Load -j 3'."""
    name = {"half": "Half load", "optimal": "Optimal load"}.get(load, "Load")
    return f"{name} -j {jobs}"


class KernbenchParams(Params, WorkdirParams):
    jobs: Literal["half", "optimal"] | int = Field(
        "optimal", description="make's -j: half (CPUs/2, at least 1), optimal (CPUs x 2) or a number; "
                               "both half and optimal when not given (kernbench's two blocks, one run each)")
    size: Literal["tiny", "small", "full"] = Field(
        "full", description="the generated tree: tiny (seconds), small, full (minutes on 2 CPUs)")
    seed: Annotated[int, in_range(0, 2 ** 31 - 1, "must be a whole number between 0 and 2^31-1")] = Field(
        1, description="seed of the generated tree (the same seed, the same sources)")
    tree: str | None = Field(None, description="a real source tree with a Makefile (e.g. a configured kernel) "
                                               "instead of the generated one; built where it is")
    target: str | None = Field(None, description="make target (e.g. vmlinux; default: the Makefile's first)")
    drop_caches: bool = Field(False, description="drop the page cache before every build (root only)")

    @field_validator("jobs", mode="before")
    @classmethod
    def _jobs(cls, v):
        if isinstance(v, str) and v.strip().isdigit():
            v = int(v)
        if isinstance(v, bool) or not (v in LOADS or isinstance(v, int)):
            raise ValueError("must be half, optimal or a number of jobs >= 1")
        if isinstance(v, int) and not 1 <= v <= 4096:
            raise ValueError("must be half, optimal or a number of jobs between 1 and 4096")
        return v

    @field_validator("target")
    @classmethod
    def _target(cls, v):
        if v is not None and (not v.strip() or v.startswith("-") or any(c.isspace() for c in v)):
            raise ValueError("must be one make target (a word not starting with -), e.g. vmlinux")
        return v

    @field_validator("tree")
    @classmethod
    def _tree(cls, v):
        if v is None:
            return v
        path = os.path.abspath(in_run_directory(os.path.expanduser(v)))
        if not os.path.isdir(path):
            raise ValueError(f"no such directory: {path}")
        if not any(os.path.isfile(os.path.join(path, m)) for m in MAKEFILES):
            raise ValueError(f"{path} has no Makefile (looked for {', '.join(MAKEFILES)})")
        if not os.access(path, os.W_OK | os.X_OK):
            raise ValueError(f"{path} is not writable (the build writes its objects there)")
        return path

    @field_validator("drop_caches")
    @classmethod
    def _drop(cls, v: bool) -> bool:
        if v and (os.geteuid() != 0 or not os.access(DROP_CACHES, os.W_OK)):
            raise ValueError(f"true needs root (it writes 3 to {DROP_CACHES}); run as root or leave it false")
        return v

    @model_validator(mode="after")
    def _where(self) -> "KernbenchParams":
        if self.tree is not None and (self.fs is not None or self.dir is not None):
            raise ValueError("tree is built where it is: give tree, or fs/dir for the generated tree, not both")
        return self


class KernbenchSession(Session):
    def __init__(self, params: KernbenchParams, job: dict, root: str, make: str, make_vars: list[str],
                 facts: dict):
        self.p = params
        self.root = root
        self.make = make
        self.make_vars = make_vars
        self.timeout = job.get("timeout")
        self.jobs = load_jobs(params.jobs)
        load = params.jobs if isinstance(params.jobs, str) else "custom"
        stored = {"load": load, "jobs": self.jobs, "runs": job["runs"], "warmup": job.get("warmup", 0),
                  "drop_caches": params.drop_caches, "target": params.target}
        if params.tree is None:
            stored.update(size=params.size, seed=params.seed, generator=generated.GENERATOR_VERSION)
        else:
            stored["tree"] = params.tree
        what = f"{params.size} generated tree" if params.tree is None else params.tree
        super().__init__(name=f"kernbench {load_title(load, self.jobs)} ({what})", params=stored, facts=facts)

    def processes(self, repetition: int) -> list[ProcessSpec]:
        specs = [ProcessSpec([self.make, "-s", "clean", *self.make_vars], item="make clean", cwd=self.root,
                             timeout=self.timeout, capture_stdout=False, record=False)]
        if self.p.drop_caches:
            specs.append(ProcessSpec(["/bin/sh", "-c", f"sync && echo 3 > {DROP_CACHES}"], item="drop caches",
                                     timeout=self.timeout, capture_stdout=False, record=False))
        argv = [self.make, f"-j{self.jobs}", *self.make_vars]
        if self.p.target:
            argv.append(self.p.target)
        specs.append(ProcessSpec(argv, item=f"make -j{self.jobs}" + (f" {self.p.target}" if self.p.target else ""),
                                 cwd=self.root, timeout=self.timeout, capture_stdout=False))
        return specs

    def parse(self, spec: ProcessSpec, result: ProcessResult) -> list[Sample]:
        return samples_of(result)


def samples_of(result: ProcessResult) -> list[Sample]:
    """kernbench's six figures of one build, from the launcher's measurement of make."""
    cpu = (result.user + result.sys) / result.wall * 100 if result.wall > 0 else 0.0
    return [ELAPSED.sample(result.wall), USER.sample(result.user), SYSTEM.sample(result.sys),
            PERCENT_CPU.sample(cpu), CONTEXT_SWITCHES.sample(float(result.involuntary_switches)),
            SLEEPS.sample(float(result.voluntary_switches))]


class KernbenchFamily(Family):
    name = "kernbench"
    # It builds a kernel tree in place with the host's make and compiler.
    # Without a `jobs`, both of kernbench's loads run, one run (and one compare block) each.
    default_axes = {"jobs": ["half", "optimal"]}
    summary = "time a parallel build of a C tree (generated, or a kernel) at half and optimal load"
    Params = KernbenchParams
    failure_policy = STOP    # a failed build ends the run: later builds would not be comparable
    default_runs = 5   # kernbench's default
    catalog = METRICS

    @contextmanager
    def session(self, params: KernbenchParams, job: dict) -> Iterator[KernbenchSession]:
        make = shutil.which("make")
        if make is None:
            raise UsageProblem("kernbench needs make, which is not on PATH (install make)")
        facts = {"kernbench_make": make, "kernbench_cpus": len(os.sched_getaffinity(0))}
        with ExitStack() as stack:
            if params.tree is None:
                compiler = cbuild.compiler()   # a missing $CC: one line, before anything runs
                place = stack.enter_context(workdir(params, "kernbench"))
                root = os.path.join(place.path, "tree")
                made = generated.generate(root, params.size, params.seed)
                make_vars = [f"CC={compiler.display}"]
                facts.update(place.facts)
                facts.update(kernbench_tree=f"generated {params.size} seed {params.seed} "
                                            f"(generator {generated.GENERATOR_VERSION}): {made.files} C files, "
                                            f"{made.headers} headers",
                             kernbench_tree_sha256=made.digest, kernbench_cc=compiler.display,
                             kernbench_cc_version=compiler.version)
            else:
                root = params.tree
                cc = os.environ.get("CC")
                make_vars = [f"CC={cc}"] if cc else []
                facts.update(kernbench_tree=root, kernbench_cc=cc or "the Makefile's")
                from perflab.execution.workdir import filesystem_of

                fstype, mount, options = filesystem_of(root)
                facts.update(workdir=root, workdir_fs=fstype, workdir_mount=mount, workdir_mount_options=options,
                             workdir_backing="existing directory (tree)")
            yield KernbenchSession(params, job, root, make, make_vars, facts)


FAMILY = KernbenchFamily()

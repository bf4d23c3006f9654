"""The Measurer: "build commit X and run these jobs there", the one way automation measures a commit.

bisect, robot and the lab's worker all measure commits, and only through this
seam. A Measurer's `measure(commit, jobs, slot=...)` returns one Measured per
job (its runs, stored in the store the caller reads; their samples by metric;
whether it failed), or raises BuildFailed when the commit does not build.

- LocalMeasurer: here. A Trees object gives a worktree at the commit, built
  (ScratchTree: a fresh one per call, removed afterwards, for the robot; the
  bisection keeps one per end and one for its steps; a lab box keeps built
  worktrees of fetched commits, perflab.automate.lab.checkouts); the jobs then
  run through the one runner with `cwd=` that worktree (no os.chdir: `./prog`
  is the program built there).
- BoxMeasurer: on a lab box. The jobs are queued with their `source` (repository
  URL, commit, build command); the box's worker builds and runs them with a
  LocalMeasurer of its own, and the runs are read back from the shared store.

A third kind (a kernel booted in a VM) implements the same `measure`; a test
substitutes a fake that returns scripted Measured values (tests/test_measurer.py).
"""

from __future__ import annotations

import shutil
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from perflab.core.errors import PerflabError
from perflab.core.git import BuildFailed, add_worktree, prune_worktrees, remove_worktree
from perflab.core.job import AtomicJob


@dataclass
class Measured:
    """What one job gave at a commit."""

    status: str                                   # done | failed | cancelled
    error: str | None = None                      # why it failed (None when it did not)
    runs: list[int] = field(default_factory=list)                 # ids of its runs in the store
    values: dict[str, list[float]] = field(default_factory=dict)  # metric -> its samples, run after run
    samples: int = 0                              # samples stored


class SourceFailed(PerflabError):
    """A box could not fetch or check out the commit (the submitter's fault, not the commit's)."""

    def __init__(self, box: str, error: str):
        super().__init__(f"box {box}: {error}")
        self.error = error


class Measurer(Protocol):
    """Builds a commit and runs jobs there."""

    place: str   # where, for messages: "" (here) or " on box NAME"

    def measure(self, commit: str, jobs: list[AtomicJob], *, slot: str = "") -> list[Measured]:
        """Run `jobs` (atomic jobs, tag and comment set) at `commit`; one Measured per job.

        `slot` names a worktree kept between calls (a bisection's "good", "bad", "step")
        where an implementation keeps any; BuildFailed when the build fails."""
        ...

    def summary(self, measured: list[Measured]) -> str:
        """How much was measured, in words: "12 samples", "3 runs"."""
        ...


class Trees(Protocol):
    """Where a LocalMeasurer gets a worktree at a commit, built."""

    def checkout(self, commit: str, slot: str) -> AbstractContextManager[Path]:
        """The worktree at `commit`, built, for the duration of the with block; BuildFailed."""
        ...


def build(path: Path, command: str, timeout: float | None) -> str | None:
    """Run the build command in a worktree through the runner's executor; why it failed, or None."""
    from perflab.execution import interrupt
    from perflab.execution.executor import ProcessSpec, execute

    if not command.strip():
        return None
    spec = ProcessSpec(["/bin/sh", "-c", command], item=f"--build {command!r}", cwd=str(path),
                       timeout=timeout, capture_stdout=False)
    with interrupt.stop_requests_as_flag():
        result = execute(spec)
        interrupt.check()
    if result.ok:
        return None
    return result.describe_failure(timeout, tail_lines=3)


class ScratchTree:
    """A fresh worktree of `repo` per checkout, built, removed when the block ends."""

    def __init__(self, repo: Path, build_cmd: str, build_timeout: float | None = None, prefix: str = "perflab-robot-"):
        self.repo, self.build_cmd, self.build_timeout, self.prefix = repo, build_cmd, build_timeout, prefix

    @contextmanager
    def checkout(self, commit: str, slot: str = "") -> Iterator[Path]:
        base = Path(tempfile.mkdtemp(prefix=self.prefix))
        path = base / "tree"
        add_worktree(self.repo, path, commit)
        try:
            why = build(path, self.build_cmd, self.build_timeout)
            if why is not None:
                raise BuildFailed(f"--build failed: {why}", why)
            yield path
        finally:
            remove_worktree(self.repo, path)
            shutil.rmtree(base, ignore_errors=True)
            prune_worktrees(self.repo)


def run_here(store, jobs: list[AtomicJob], *, box: str | None, path: Path | None) -> list[Measured]:
    """Run jobs through the one runner in `path` (stored with its commit), or here when None.

    Jobs validated already (perflab.jobs.resolve) are not validated again by the runner."""
    from perflab.runner.loop import run_jobs

    where = str(path) if path is not None else None
    return [Measured("failed" if o.error else "done", o.error, [o.run_id] if o.run_id else [], o.values, o.samples)
            for o in run_jobs(store, jobs, box=box, repo=where, cwd=where)]


class LocalMeasurer:
    """Builds commits in worktrees here and runs jobs in them through the one runner."""

    place = ""

    def __init__(self, store, trees: Trees, *, box: str | None = None):
        self.store, self.trees, self.box = store, trees, box

    def measure(self, commit: str, jobs: list[AtomicJob], *, slot: str = "") -> list[Measured]:
        with self.trees.checkout(commit, slot) as path:
            return run_here(self.store, jobs, box=self.box, path=path)

    def summary(self, measured: list[Measured]) -> str:
        return f"{sum(m.samples for m in measured)} samples"


class BoxMeasurer:
    """Queues jobs with their source on a lab box and waits for their runs in the shared store."""

    def __init__(self, store, *, broker: str, box: str, source_url: str, build_cmd: str,
                 build_timeout: float | None = None, say: Callable[[str], None] = lambda _m: None):
        self.store, self.broker, self.box = store, broker, box
        self.source_url, self.build_cmd, self.build_timeout, self.say = source_url, build_cmd, build_timeout, say
        self.place = f" on box {box}"

    def measure(self, commit: str, jobs: list[AtomicJob], *, slot: str = "") -> list[Measured]:
        from perflab.automate.lab.client import run_on_box

        source = {"repo": self.source_url, "commit": commit, "build": self.build_cmd,
                  "build_timeout": self.build_timeout}
        # "source" is a key of the queued job's JSON beyond AtomicJob's fields: it travels in `extra`.
        results = run_on_box(self.broker, self.box, [j.with_(source=source) for j in jobs], self.store,
                             say=self.say)
        failed = next((r for r in results if r.status == "build-failed"), None)
        if failed is not None:
            raise BuildFailed(failed.error)
        failed = next((r for r in results if r.status == "source-failed"), None)
        if failed is not None:
            raise SourceFailed(self.box, failed.error)
        rows = defaultdict(list)
        for row in self.store.samples([r.id for res in results for r in res.runs]):
            rows[row.run_id].append(row)
        out = []
        for res in results:
            values: dict[str, list[float]] = {}
            for run in res.runs:
                for row in rows.get(run.id, []):
                    values.setdefault(row.metric, []).append(row.value)
            out.append(Measured(res.status, res.error, [r.id for r in res.runs], values,
                                sum(len(rows.get(r.id, [])) for r in res.runs)))
        return out

    def summary(self, measured: list[Measured]) -> str:
        return f"{sum(len(m.runs) for m in measured)} runs"

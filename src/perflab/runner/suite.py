"""The LMbench-class suite as one run: `perflab run lmbench` without a job file.

The family (`perflab.benchmarks.lmbench`) says what to build, run and parse; this runs it as
one atomic job on the runner's loop and summarises the outcome for the command line.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.console import Console

from perflab.benchmarks.lmbench.driver import Mode
from perflab.jobs import atomic
from perflab.runner.loop import run_jobs
from perflab.runner.recorder import RunFailed
from perflab.store import Store


@dataclass
class SuiteResult:
    run_id: int
    mode: Mode
    programs: list[str]
    samples: int
    failures: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


def run_suite(
    store: Store,
    *,
    quick: bool = False,
    categories: list[str] | None = None,
    tag: str | None = None,
    box: str | None = None,
    repo: str | None = None,
    comment: str | None = None,
    console: Console | None = None,
    monitors: dict | None = None,
    kernel: str | None = None,
    vm: dict | None = None,
) -> SuiteResult:
    """Build and run the selected programs as one run (one atomic job on the runner)."""
    params: dict = {"quick": bool(quick)}
    if categories:
        params["only"] = list(categories)
    job = atomic("lmbench", params, tag=tag, comment=comment, monitors=monitors, kernel=kernel, vm=vm)
    (outcome,) = run_jobs(store, [job], box=box, repo=repo, console=console)
    if outcome.error is not None:
        raise RunFailed(outcome.error)
    session = outcome.session
    return SuiteResult(outcome.run_id, session.mode, session.programs, outcome.samples,
                       dict(outcome.failures), outcome.seconds)

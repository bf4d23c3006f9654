"""A run as it is being recorded: every repetition is committed as it exists.

Ctrl-C and SIGTERM mark the run interrupted (the samples already committed
stay; see runner.interrupt for why they arrive as a flag); after kill -9 a
later command finds the writer gone (Store.reap_dead_runs).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from perflab.core import environment
from perflab.core.model import Sample
from perflab.execution.interrupt import Interrupted

__all__ = ["Interrupted", "RunFailed", "RunRecorder", "recording", "start_run"]

if TYPE_CHECKING:
    from perflab.store import Store   # or a Recorder (perflab.store.recording): the same writes


class RunRecorder:
    def __init__(self, store: Store, run_id: int):
        self.store = store
        self.run_id = run_id
        self.repetitions = 0
        self.samples = 0
        self.failed_items: list[str] = []
        self.error: str | None = None

    def add_samples(self, repetition: int, samples: Iterable[Sample], process: int | None = None) -> None:
        """Store samples of one repetition (from one of its processes) and commit them before returning."""
        self.samples += self.store.add_samples(self.run_id, repetition, samples, process=process)
        self.repetitions = max(self.repetitions, repetition + 1)

    def add_failure(self, item: str, message: str) -> None:
        """Record that one part of the run failed; the rest of the run goes on."""
        self.failed_items.append(item)
        self.store.add_failure(self.run_id, item, message)

    def fail(self, message: str) -> None:
        """The run as a whole failed; it is closed as failed, its samples kept."""
        self.error = message


class RunFailed(Exception):
    """A run ended because its benchmark failed; the run is kept, marked failed."""


def start_run(
    store: Store,
    *,
    benchmark: str,
    name: str,
    params: dict,
    box: str | None = None,
    tag: str | None = None,
    repo: str | None = None,
    comment: str | None = None,
    cc: str | None = None,
    extra_facts: dict | None = None,
    job: dict | None = None,
    elsewhere: bool = False,
) -> RunRecorder:
    """Capture the environment and create the run row (status 'running'). `elsewhere`: the processes
    ran on another machine or kernel (the target's `fulfils_far`), whose facts are the run's."""
    facts = environment.capture(box=box, cc=cc)
    commit = dirty = None
    if repo:
        git = environment.git_state(repo)
        commit, dirty = git["commit"], git["dirty"]
        facts["sut_repo"] = git["repo"]
        facts.update({f"sut_{k}": git[k] for k in ("worktree", "remote") if git.get(k)})
    if extra_facts:
        if box and "testbox" in extra_facts:
            extra_facts = {**extra_facts, "testbox": box}     # --box names the machine, wherever it is
        if elsewhere:
            # A run in a VM guest or on an SSH machine: its kernel, CPUs and memory replace this machine's,
            # which stay beside them.
            for key in ("kernel_release", "kernel_version", "kernel_cmdline", "cpu_model", "cpu_cores", "cpu_threads",
                        "memory_kib"):
                if key in extra_facts and key in facts:
                    facts[f"host_{key}"] = facts[key]
        facts.update(extra_facts)
    run_id = store.create_run(
        box=facts["testbox"], environment=facts, benchmark=benchmark, name=name,
        params=params, tag=tag, commit=commit, dirty=dirty, comment=comment, job=job,
    )
    return RunRecorder(store, run_id)


@contextmanager
def recording(recorders: list[RunRecorder]) -> Iterator[list[RunRecorder]]:
    """Close the runs with the right status whatever happens inside.

    Normal exit: finished, partial when a part failed, failed when the run was
    marked failed; RunFailed: failed; Ctrl-C / SIGTERM: interrupted; any other
    error: failed with its message. The status is written once, here.
    """
    try:
        yield recorders
    except (KeyboardInterrupt, Interrupted) as e:
        reason = "interrupted by Ctrl-C" if isinstance(e, KeyboardInterrupt) else str(e)
        for rec in recorders:
            rec.store.finish_run(rec.run_id, "interrupted", reason)
        raise
    except RunFailed as e:
        for rec in recorders:
            rec.store.finish_run(rec.run_id, "failed", str(e))
        raise
    except Exception as e:
        for rec in recorders:
            rec.store.finish_run(rec.run_id, "failed", f"{type(e).__name__}: {e}")
        raise
    else:
        for rec in recorders:
            if rec.error is not None:
                rec.store.finish_run(rec.run_id, "failed", rec.error)
            elif rec.failed_items:
                rec.store.finish_run(rec.run_id, "partial", "failed parts: " + ", ".join(rec.failed_items))
            else:
                rec.store.finish_run(rec.run_id, "finished")

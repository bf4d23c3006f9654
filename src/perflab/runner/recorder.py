"""A run as it is being recorded: every repetition is committed as it exists.

Ctrl-C and SIGTERM mark the run interrupted (the samples already committed
stay); after kill -9 a later command finds the writer gone (Store.reap_dead_runs).
"""

from __future__ import annotations

import signal
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from perflab import environment
from perflab.model import Sample
from perflab.store import Store


class Interrupted(Exception):
    """Raised in the main thread by SIGTERM, as KeyboardInterrupt is by SIGINT."""


class RunRecorder:
    def __init__(self, store: Store, run_id: int):
        self.store = store
        self.run_id = run_id
        self.repetitions = 0
        self.samples = 0
        self.failed_items: list[str] = []

    def add_samples(self, repetition: int, samples: Iterable[Sample]) -> None:
        """Store one repetition's samples and commit them before returning."""
        self.samples += self.store.add_samples(self.run_id, repetition, samples)
        self.repetitions += 1

    def add_failure(self, item: str, message: str) -> None:
        """Record that one part of the run failed; the rest of the run goes on."""
        self.failed_items.append(item)
        self.store.add_failure(self.run_id, item, message)


def _raise_interrupted(signum, _frame):
    raise Interrupted(f"signal {signal.Signals(signum).name}")


@contextmanager
def sigterm_as_exception() -> Iterator[None]:
    previous = signal.signal(signal.SIGTERM, _raise_interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


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
) -> RunRecorder:
    """Capture the environment and create the run row (status 'running')."""
    facts = environment.capture(box=box, cc=cc)
    commit = dirty = None
    if repo:
        git = environment.git_state(repo)
        commit, dirty = git["commit"], git["dirty"]
        facts["sut_repo"] = git["repo"]
    if extra_facts:
        facts.update(extra_facts)
    run_id = store.create_run(
        testbox=facts["testbox"], environment=facts, benchmark=benchmark, name=name,
        params=params, tag=tag, commit=commit, dirty=dirty, comment=comment,
    )
    return RunRecorder(store, run_id)


@contextmanager
def recording(recorders: list[RunRecorder]) -> Iterator[list[RunRecorder]]:
    """Close the runs with the right status whatever happens inside.

    Normal exit: finished (or failed when a part failed); RunFailed: failed;
    Ctrl-C / SIGTERM: interrupted; any other error: failed with its message.
    """
    with sigterm_as_exception():
        try:
            yield recorders
        except (KeyboardInterrupt, Interrupted) as e:
            reason = "Ctrl-C" if isinstance(e, KeyboardInterrupt) else str(e)
            for rec in recorders:
                rec.store.finish_run(rec.run_id, "interrupted", f"interrupted by {reason}")
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
                if rec.failed_items:
                    rec.store.finish_run(rec.run_id, "partial", "failed parts: " + ", ".join(rec.failed_items))
                else:
                    rec.store.finish_run(rec.run_id, "finished")

"""The runner loop without processes: a fake executor returns scripted results, a minimal family
turns them into samples, and a real (temporary SQLite) store records them.

Warm-up, repetitions, interleaving, the failure policies, interruption and after-jobs figures
are checked here in milliseconds; tests/test_runner.py checks the real executor.
"""

from __future__ import annotations

import os
import signal
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

from perflab import jobs
from perflab.benchmarks.base import SKIP, STOP, Family, ItemFailed, Metric, Params, Session
from perflab.jobs.job import AtomicJob
from perflab.core.model import Sample
from perflab.core.process import ProcessResult, ProcessSpec
from perflab.execution.interrupt import Interrupted
from perflab.runner import loop, recorder
from perflab.store import open_store

FACTS = {"testbox": "fastbox", "kernel_release": "6.8.0"}


class FakeParams(Params):
    items: list[str] = ["a"]
    base: float = 1.0


class FakeSession(Session):
    def __init__(self, params: FakeParams, job: dict, build_failures: dict | None = None):
        super().__init__(name=f"fake {'+'.join(params.items)}", params=params.model_dump(),
                         build_failures=dict(build_failures or {}))
        self.job = job
        self.repetitions: list[int] = []

    def processes(self, repetition: int) -> list[ProcessSpec]:
        self.repetitions.append(repetition)
        return [ProcessSpec(["fake", item, str(repetition)], item=item) for item in self.params["items"]]

    def parse(self, spec: ProcessSpec, result: ProcessResult) -> list[Sample]:
        if result.stdout == "garbage":
            raise ItemFailed(f"{spec.item}: garbage")
        return [Sample(f"fake.{spec.item}", float(result.stdout), "s", -1)]


class FakeFamily(Family):
    name = "fake"
    summary = "scripted processes"
    Params = FakeParams

    def __init__(self, policy: str = SKIP, build_failures: dict | None = None):
        self.failure_policy = policy
        self.build_failures = build_failures or {}
        self.sessions: list[FakeSession] = []
        self.after: list[list] = []

    def metrics(self, params):
        return {f"fake.{i}": Metric(f"fake.{i}", "s", -1) for i in params.items}

    def default_runs(self, params) -> int:
        return 2

    runs_for = default_runs   # the name the family interface is moving to

    def after_jobs(self, outcomes, add_samples) -> None:
        self.after.append([o.run_id for o in outcomes])
        for o in outcomes:
            add_samples(o, 0, [Sample("fake.total", sum(sum(v) for v in o.values.values()), "s", 0)])

    @contextmanager
    def session(self, params, job):
        session = FakeSession(params, job, self.build_failures)
        self.sessions.append(session)
        yield session


def result(value: float = 1.0, *, stdout: str | None = None, status: int = 0, timed_out: bool = False,
           interrupted: bool = False) -> ProcessResult:
    return ProcessResult(wall=value, user=0.0, sys=0.0, maxrss_kib=1000, voluntary_switches=0,
                         involuntary_switches=0, exit_status=status, signal=0, timed_out=timed_out,
                         interrupted=interrupted, stdout=str(value) if stdout is None else stdout,
                         stderr_tail="boom\n" if status else "")


@dataclass
class FakeExecutor:
    """Answers each (item, repetition) from a script; records the order processes were started in."""

    script: dict | None = None
    on_call: object = None

    def __post_init__(self):
        self.calls: list[tuple[str, int]] = []

    def __call__(self, spec: ProcessSpec, hooks=None) -> ProcessResult:
        _, item, repetition = spec.argv
        key = (item, int(repetition))
        self.calls.append(key)
        if self.on_call is not None:
            self.on_call(key)
        scripted = (self.script or {}).get(key)
        if scripted is not None:
            return scripted
        return result(float(len(self.calls)))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    # One store for the module (its schema takes a second to create); every test reads its own runs.
    return open_store(str(tmp_path_factory.mktemp("fast") / "perflab.db"))


@pytest.fixture(autouse=True)
def fixed_environment(monkeypatch):
    monkeypatch.setattr(recorder.environment, "capture", lambda box=None, cc=None: dict(FACTS))


def job(family: FakeFamily, **kw) -> AtomicJob:
    params = kw.pop("params", {"items": ["a"]})
    return jobs.resolve(AtomicJob("fake", params, family=family, **kw))


def samples(store, run_id) -> list[tuple]:
    return [(r.metric, r.value, r.repetition, r.process) for r in store.samples([run_id])]


def status(store, run_id) -> tuple[str, str | None]:
    run = store.get_run(run_id)
    return run.status, run.error


def test_warmup_rounds_are_run_but_not_recorded(store):
    fam, ex = FakeFamily(), FakeExecutor()
    (o,) = loop.run_jobs(store, [job(fam, runs=3, warmup=2)], executor=ex)
    # Warm-ups are numbered from 0 as rounds; the timed repetitions from 0 again.
    assert ex.calls == [("a", 0), ("a", 1), ("a", 0), ("a", 1), ("a", 2)]
    assert samples(store, o.run_id) == [("fake.a", 3.0, 0, 0), ("fake.a", 4.0, 1, 0), ("fake.a", 5.0, 2, 0),
                                        ("fake.total", 12.0, 0, None)]
    assert status(store, o.run_id) == ("finished", None)
    assert o.walls == {"a": [3.0, 4.0, 5.0]} and o.values["fake.a"] == [3.0, 4.0, 5.0]


def test_the_stored_job_is_the_atomic_job_with_its_default_runs(store):
    fam = FakeFamily()
    (o,) = loop.run_jobs(store, [job(fam, tag="t1", comment="c")], executor=FakeExecutor())
    run = store.get_run(o.run_id)
    assert run.job == {"benchmark": "fake", "params": {"items": ["a"]}, "runs": 2, "warmup": 0, "timeout": None,
                       "tag": "t1", "comment": "c", "monitors": {}}
    assert list(run.job) == ["benchmark", "params", "runs", "warmup", "timeout", "tag", "comment", "monitors"]
    assert (run.tag, run.comment, run.benchmark) == ("t1", "c", "fake")
    assert fam.sessions[0].job == run.job   # the family sees the job's JSON form


def test_interleaved_jobs_run_round_by_round_and_others_one_after_another(store):
    fam, ex = FakeFamily(), FakeExecutor()
    both = [job(fam, runs=2, params={"items": ["a"]}), job(fam, runs=3, params={"items": ["b"]})]
    loop.run_jobs(store, both, executor=ex, interleave=True)
    assert ex.calls == [("a", 0), ("b", 0), ("a", 1), ("b", 1), ("b", 2)]
    ex = FakeExecutor()
    outcomes = loop.run_jobs(store, both, executor=ex)
    assert ex.calls == [("a", 0), ("a", 1), ("b", 0), ("b", 1), ("b", 2)]
    # One family's after-jobs hook saw both finished runs of the invocation.
    assert fam.after[-1] == [o.run_id for o in outcomes]


def test_skip_policy_records_the_failure_skips_the_item_and_the_run_is_partial(store):
    fam = FakeFamily(SKIP)
    ex = FakeExecutor({("b", 1): result(status=3)})
    (o,) = loop.run_jobs(store, [job(fam, runs=3, params={"items": ["a", "b"]})], executor=ex)
    assert ex.calls == [("a", 0), ("b", 0), ("a", 1), ("b", 1), ("a", 2)]
    assert [(m, rep) for m, _, rep, _ in samples(store, o.run_id)] == [
        ("fake.a", 0), ("fake.a", 1), ("fake.a", 2), ("fake.b", 0), ("fake.total", 0)]
    assert status(store, o.run_id) == ("partial", "failed parts: b")
    assert [tuple(f)[1:] for f in store.failures([o.run_id])] == [("b", "b: exited with status 3: boom")]
    assert o.error is None and o.failures == {"b": "b: exited with status 3: boom"}


def test_garbage_output_is_a_failed_item(store):
    fam = FakeFamily(SKIP)
    ex = FakeExecutor({("a", 0): result(stdout="garbage")})
    (o,) = loop.run_jobs(store, [job(fam, runs=2, params={"items": ["a", "b"]})], executor=ex)
    assert o.failures == {"a": "a: garbage"}
    assert [m for m, *_ in samples(store, o.run_id)] == ["fake.b", "fake.b", "fake.total"]


def test_stop_policy_ends_the_run_failed_and_keeps_its_samples(store):
    fam = FakeFamily(STOP)
    ex = FakeExecutor({("a", 1): result(status=1)})
    other = FakeFamily(STOP)
    first, second = loop.run_jobs(store, [job(fam, runs=4), job(other, runs=1)], executor=ex)
    assert ex.calls == [("a", 0), ("a", 1), ("a", 0)]
    assert status(store, first.run_id) == ("failed", "a: exited with status 1: boom")
    # Under "stop" the failing process is parsed too (a command's time.* of its last run).
    assert [rep for _, _, rep, _ in samples(store, first.run_id)] == [0, 1]
    assert store.failures([first.run_id]) == []   # stop: the run's error says it, no failed part
    # The failed job's family adds nothing after the jobs; the next job ran to its end.
    assert fam.after == [] and other.after == [[second.run_id]]
    assert status(store, second.run_id) == ("finished", None)


def test_a_failing_warmup_fails_the_command(store):
    fam = FakeFamily(STOP)
    ex = FakeExecutor({("a", 0): result(status=2)})
    (o,) = loop.run_jobs(store, [job(fam, runs=2, warmup=1)], executor=ex)
    assert ex.calls == [("a", 0)]
    assert o.error == "warm-up: a: exited with status 2: boom"
    assert status(store, o.run_id) == ("failed", o.error) and samples(store, o.run_id) == []


def test_items_that_did_not_build_are_failures_and_nothing_measured_fails_the_run(store):
    fam = FakeFamily(SKIP, build_failures={"a": "a: did not compile"})
    ex = FakeExecutor()
    (o,) = loop.run_jobs(store, [job(fam, runs=2)], executor=ex)
    assert ex.calls == []
    assert status(store, o.run_id) == ("failed", "a: did not compile")


def test_a_stop_request_ends_the_loop_and_marks_every_run_of_the_batch_interrupted(store):
    fam = FakeFamily()

    def sigterm_at(key):
        if key == ("b", 1):
            os.kill(os.getpid(), signal.SIGTERM)   # the loop's handler only sets the flag

    ex = FakeExecutor({("b", 1): result(interrupted=True, status=143)}, on_call=sigterm_at)
    both = [job(fam, runs=5, params={"items": ["a"]}), job(fam, runs=5, params={"items": ["b"]})]
    before = {r.id for r in store.find_runs()}
    with pytest.raises(Interrupted, match="SIGTERM"):
        loop.run_jobs(store, both, executor=ex, interleave=True)
    assert ex.calls == [("a", 0), ("b", 0), ("a", 1), ("b", 1)]
    runs = [r for r in store.find_runs() if r.id not in before]
    assert [(r.status, r.error) for r in runs] == [("interrupted", "interrupted by SIGTERM")] * 2
    # What was measured before the request stays; the interrupted process gave nothing.
    assert [[rep for _, _, rep, _ in samples(store, r.id)] for r in runs] == [[0, 1], [0]]
    assert fam.after == []
    assert signal.getsignal(signal.SIGTERM) is not loop.interrupt._note   # the handlers are restored


def test_bad_input_before_anything_was_measured_removes_the_run(store):
    class Refuses(FakeSession):
        def parse(self, spec, result):
            from perflab.core.errors import PerflabError

            raise PerflabError("--metric x matched nothing")

    @contextmanager
    def refusing(params, job):
        yield Refuses(params, job)

    fam = FakeFamily()
    fam.session = refusing
    before = {r.id for r in store.find_runs()}
    with pytest.raises(Exception, match="matched nothing"):
        loop.run_jobs(store, [job(fam, runs=2)], executor=FakeExecutor())
    assert {r.id for r in store.find_runs()} == before


def test_dicts_are_converted_at_the_boundary_and_validated_once(store, monkeypatch):
    fam = FakeFamily()
    parsed = []
    real = FakeFamily.parse_params

    def counting(self, raw, where=""):
        parsed.append(raw)
        return real(self, raw, where)

    monkeypatch.setattr(FakeFamily, "parse_params", counting)
    from perflab import benchmarks

    monkeypatch.setitem(benchmarks.FAMILIES, "fake", __name__)
    monkeypatch.setattr(benchmarks, "import_module", lambda name: type("M", (), {"FAMILY": fam}))
    (o,) = loop.run_jobs(store, [{"benchmark": "fake", "params": {"items": ["a"]}, "runs": None, "warmup": 0,
                                  "timeout": None, "tag": None, "comment": None, "monitors": {}}],
                         executor=FakeExecutor())
    assert parsed == [{"items": ["a"]}]
    assert o.job.family is fam and o.job.parsed == FakeParams(items=["a"]) and o.job.runs == 2
    assert store.get_run(o.run_id).job["runs"] == 2

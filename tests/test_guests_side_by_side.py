"""Guests side by side (issue 47): how many guests a boot gets, and how the one loop hands a round's
processes to a place of several machines — with a fake place whose machines answer from a script
(nothing boots); tests/test_vm.py's test_icount_figures_are_the_same_in_one_guest_and_in_two
boots the real ones.
"""

from __future__ import annotations

import contextlib
import json
import threading
from dataclasses import dataclass, field

import pytest

from perflab import jobs
from perflab.core.errors import TargetDown, UsageProblem
from perflab.execution.targets import Opening, Place, RunIn, Target, Toolchain, qemu_guests
from perflab.execution.targets.qemu import machine_of
from perflab.core.process import ProcessSpec
from perflab.jobs.job import AtomicJob
from perflab.runner import loop
from test_runner_fast import FakeFamily, result, samples, store  # noqa: F401 (store: a fixture)
from test_runner_fast import fixed_environment  # noqa: F401 (autouse fixture)
from test_targets import Counter

WAIT_S = 60      # a deadlock guard, not a timing: the other machine's process starts in microseconds


class Independent(FakeFamily):
    independent_processes = True


class Repeatable(FakeFamily):
    """will-it-scale's kind: one process a round, the same every repetition."""

    independent_repetitions = True


@dataclass(frozen=True)
class Machines(Target):
    """A place of `n` machines, as a boot of guests side by side is: a job that runs side by side
    gets their executors pooled (qemu_guests.Pooled), any other job the first machine's."""

    kind = "machines"
    n: int = 2
    log: list = field(default_factory=list, compare=False)
    dies_on: str = ""           # an item, or `item/repetition`, whose process finds its machine down
    # Processes (an item, or `item/repetition`) that each wait until all of their group have started:
    # the names given alone are one group, a tuple of names another.
    meet: tuple = ()
    ends_after: tuple = ()      # (name, other): name's process ends only once other's has ended
    toolchain: Toolchain = field(default_factory=Toolchain)

    def share_key(self, needs, params):
        return "machines"

    @contextlib.contextmanager
    def open(self, openings, execute):
        lock = threading.Lock()
        state = {"active": 0, "most": 0}
        groups = [g for g in (tuple(n for n in self.meet if isinstance(n, str)), *(g for g in self.meet
                                                                                 if isinstance(g, tuple))) if g]
        started = {name: threading.Event() for g in groups for name in g}
        ended = {other: threading.Event() for _, other in self.ends_after}

        def machine(number):
            def run(spec, hooks=None, wrapper=()):
                _, item, repetition = spec.argv
                with lock:
                    state["active"] += 1
                    state["most"] = max(state["most"], state["active"])
                names = {item, f"{item}/{repetition}"}
                try:
                    for group in groups:
                        if names & set(group):
                            for name in names & set(group):
                                started[name].set()
                            assert all(started[n].wait(WAIT_S) for n in group), "ran one after another"
                    if self.dies_on in names:
                        raise TargetDown(f"machine {number} went down", "its console")
                    for name, other in self.ends_after:
                        if name in names:
                            assert ended[other].wait(WAIT_S), f"{other} never ended"
                    self.log.append((number, item, int(repetition)))
                    return result({"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0}[item] + int(repetition))
                finally:
                    with lock:
                        state["active"] -= 1
                    for name in names & ended.keys():
                        ended[name].set()
            return run

        class _Place(Place):
            def admit(place, index):
                n = self.n if openings[index].side_by_side else 1
                pooled = qemu_guests.Pooled([machine(i) for i in range(n)])
                return RunIn(pooled.execute, {"machines": str(n)}, together=pooled.together if n > 1 else None)

        self.log.append(("open", [(o.side_by_side, o.widest) for o in openings]))
        try:
            yield _Place(lambda *a, **k: None, {})
        finally:
            self.log.append(("most at once", state["most"]))


def _job(target, family, items, runs=2, instruments=()):
    return jobs.resolve(AtomicJob("fake", {"items": list(items)}, runs=runs, family=family, target=target,
                                  instruments=tuple(instruments)))


def _opening(side: bool, widest: int = 10) -> Opening:
    return Opening(None, None, 1, side_by_side=side, widest=widest)


def test_guests_side_by_side_only_under_icount_for_jobs_that_may_and_as_the_host_allows():
    side = [_opening(True, widest=12)]
    assert qemu_guests.count("tcg", None, side, cpus=8)[0] == 1
    assert qemu_guests.count("kvm", 2, side, cpus=8)[0] == 1            # asked, but wall time: one guest
    assert qemu_guests.count("icount", None, [_opening(False)], cpus=8)[0] == 1
    assert qemu_guests.count("icount", None, side, cpus=1)[0] == 1      # one host CPU: nothing side by side
    assert qemu_guests.count("icount", None, side, cpus=2) == (
        2, "2 of at most 2: 2 host CPU(s), up to 12 process(es) at once")
    assert qemu_guests.count("icount", None, side, cpus=64)[0] == qemu_guests.MAX_GUESTS
    assert qemu_guests.count("icount", None, [_opening(True, widest=1)], cpus=8)[0] == 1
    assert qemu_guests.count("icount", 1, side, cpus=8) == (1, "vm.guests = 1")     # the job forces one
    assert qemu_guests.count("icount", 3, side, cpus=2)[0] == 3
    assert qemu_guests.count("icount", None, side, cpus=8, disks=True)[0] == 1   # one QEMU writes a disk image


def test_a_round_of_independent_processes_runs_in_two_machines_at_once_recorded_in_its_order(store):  # noqa: F811
    log: list = []
    target = Machines(log=log, meet=("a", "b"))
    (o,) = loop.run_jobs(store, [_job(target, Independent(), "abcd")])
    assert o.error is None and o.together is not None
    # a and b of each round were running at the same time (each waited for the other to start)
    assert ("most at once", 2) in log and log[0] == ("open", [(True, 4)])
    assert {(item, rep) for _, item, rep in log[1:-1]} == {(i, r) for i in "abcd" for r in (0, 1)}
    assert {m for m, _, _ in log[1:-1]} == {0, 1}, log
    # recorded as one after another: process index = the round's order, values as scripted
    assert sorted(s for s in samples(store, o.run_id) if s[0] != "fake.total") == sorted(
        (f"fake.{i}", v + r, r, p) for r in (0, 1) for p, (i, v) in enumerate(zip("abcd", (1.0, 2.0, 3.0, 4.0))))
    facts = store.get_run(o.run_id).environment
    assert (facts if isinstance(facts, dict) else json.loads(facts))["machines"] == "2"


def test_processes_that_depend_on_one_another_or_are_watched_run_one_at_a_time(store):  # noqa: F811
    log: list = []
    target = Machines(log=log)
    dependent, watched = loop.run_jobs(store, [_job(target, FakeFamily(), "abcd"),
                                               _job(target, Independent(), "abcd", instruments=[Counter()])])
    assert dependent.error is None and watched.error is None
    assert log[0] == ("open", [(False, 1), (False, 1)]) and log[-1] == ("most at once", 1)
    # in one machine, in the round's order
    assert [e for e in log[1:-1]] == [(0, i, r) for r in (0, 1) for i in "abcd"] * 2


def test_a_round_starts_the_longest_first_as_the_last_run_of_the_job_here_took(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    ran: list = []
    now = [0.0]

    def machine(spec, hooks=None):
        ran.append(spec.item)
        now[0] += {"a": 1.0, "b": 5.0, "c": 3.0, "d": 0.5}[spec.item]      # what it takes, on a fake clock
        return result(now[0])

    specs = [ProcessSpec(["fake", i, "0"], item=i) for i in "abc"]
    first = qemu_guests.Pooled([machine], clock=lambda: now[0], memory="job")
    assert [f.result(WAIT_S).wall for f in first.together(specs)] == [1.0, 6.0, 9.0]   # never timed: as given
    assert ran == ["a", "b", "c"] and first.took == {"a": 1.0, "b": 5.0, "c": 3.0}
    ran.clear()
    futures = first.together([ProcessSpec(["fake", "d", "1"], item="d"), *specs])
    assert [f.result(WAIT_S).wall for f in futures] == [18.5, 18.0, 14.0, 17.0]     # in the order given
    assert ran == ["b", "c", "a", "d"]       # b (5 s), c (3 s), a (1 s), then d, never timed
    # the next run of the same job here starts its first round longest first; another job does not
    for _ in range(WAIT_S * 20):
        if qemu_guests.remembered("job").get("d") == 0.5:
            break
        threading.Event().wait(0.05)         # written once the round's guests are idle
    assert qemu_guests.Pooled([machine], memory="job").took == {"a": 1.0, "b": 5.0, "c": 3.0, "d": 0.5}
    assert qemu_guests.Pooled([machine], memory="another job").took == {}


def test_a_machine_that_goes_down_fails_the_job_as_one_guest_does_and_the_next_gets_a_fresh_place(store):  # noqa: F811
    log: list = []
    target = Machines(log=log, dies_on="b")
    first, second = loop.run_jobs(store, [_job(target, Independent(), "abcd"), _job(target, Independent(), "cd")])
    assert first.error.startswith("machine") and first.target_down
    assert store.get_run(first.run_id).status == "failed"
    # what came before the dead machine's process in the round's order is kept; nothing after it
    assert [m for m, *_ in samples(store, first.run_id)] == ["fake.a"]
    assert second.error is None and second.samples == 4
    assert [e[0] for e in log].count("open") == 2


def test_a_jobs_repetitions_run_in_two_machines_at_once_recorded_in_their_order(store):  # noqa: F811
    """will-it-scale's matrix in one boot (issue 47): each job a batch of its own, one process a
    round; the repetitions of each run side by side, recorded as if one after another."""
    log: list = []
    # a's two repetitions at once, the second ending first; b's 0 and 1 start at once, and 2 while 1 runs
    target = Machines(log=log, meet=(("a/0", "a/1"), ("b/1", "b/2")), ends_after=(("a/0", "a/1"),))
    first, second = loop.run_jobs(store, [_job(target, Repeatable(), "a"), _job(target, Repeatable(), "b", runs=3)])
    assert first.error is None and second.error is None and first.together is not None
    # one place for both, each may start all its repetitions at once (two machines: qemu_guests.count)
    assert log[0] == ("open", [(True, 2), (True, 3)]) and log[-1] == ("most at once", 2)
    ran = [(item, rep) for _, item, rep in log[1:-1]]
    assert ran[:2] == [("a", 1), ("a", 0)] and sorted(ran[2:]) == [("b", 0), ("b", 1), ("b", 2)]
    assert {m for m, _, _ in log[1:-1]} == {0, 1}, log
    # recorded in the repetitions' order (the loop takes, and writes, each as it records it), process 0
    # of each, values as scripted
    for o, item, value, runs in ((first, "a", 1.0, 2), (second, "b", 2.0, 3)):
        assert o.values[f"fake.{item}"] == [value + r for r in range(runs)]
        kept = [s for s in samples(store, o.run_id) if s[0] != "fake.total"]
        assert kept == [(f"fake.{item}", value + r, r, 0) for r in range(runs)]
    facts = store.get_run(second.run_id).environment
    assert (facts if isinstance(facts, dict) else json.loads(facts))["machines"] == "2"


@pytest.mark.parametrize("how", ["warm-up", "instrument", "one run", "interleaved"])
def test_repetitions_run_one_after_another_with_a_warm_up_an_instrument_one_run_or_beside_another_job(
        store, how):  # noqa: F811
    log: list = []
    target = Machines(log=log)
    family = Repeatable()
    kw = {"warm-up": {"warmup": 1}, "instrument": {"instruments": [Counter()]}, "one run": {"runs": 1}}.get(how, {})
    built = [_job(target, family, "a", **{k: v for k, v in kw.items() if k != "warmup"})]
    if how == "warm-up":
        built = [built[0].with_(warmup=1)]
    if how == "interleaved":
        built.append(_job(target, family, "b"))
    outcomes = loop.run_jobs(store, built, interleave=how == "interleaved")
    assert all(o.error is None for o in outcomes)
    assert log[0] == ("open", [(False, 1)] * len(built)) and log[-1] == ("most at once", 1)
    assert {m for m, *_ in log[1:-1]} == {0}        # in the first machine
    rounds = 1 if how == "one run" else 2
    expected = ([("a", r) for r in range(rounds)] if how != "warm-up" else [("a", 0), ("a", 0), ("a", 1)])
    if how == "interleaved":
        expected = [(i, r) for r in range(rounds) for i in "ab"]
    assert [(item, rep) for _, item, rep in log[1:-1]] == expected


@pytest.mark.parametrize("down", ["a/0", "a/1"])
def test_a_repetition_whose_machine_goes_down_keeps_the_ones_before_it_and_nothing_after(store, down):  # noqa: F811
    log: list = []
    target = Machines(log=log, dies_on=down)
    first, second = loop.run_jobs(store, [_job(target, Repeatable(), "a", runs=3), _job(target, Repeatable(), "b")])
    assert first.error.startswith("machine") and first.target_down
    assert store.get_run(first.run_id).status == "failed"
    # the other machine may have run later repetitions: none of them is recorded
    assert [(m, r) for m, _, r, _ in samples(store, first.run_id)] == ([] if down == "a/0" else [("fake.a", 0)])
    assert second.error is None and second.samples == 2 and [e[0] for e in log].count("open") == 2


def test_the_guests_key_is_checked_and_stored_only_when_written():
    assert "guests" not in machine_of({"mode": "icount"})
    assert machine_of({"mode": "icount", "guests": 1})["guests"] == 1
    for bad in (0, "2", True, 1.5):
        with pytest.raises(UsageProblem, match=r"^job: key 'vm.guests' = .*: expected an integer >= 1"):
            machine_of({"mode": "icount", "guests": bad}, "job")
    assert machine_of({"mode": "tcg", "guests": 1})["guests"] == 1
    for mode in ("tcg", "kvm"):
        with pytest.raises(UsageProblem, match=f"^job: key 'vm.guests' = 2: guests side by side only under icount "
                                               f"\\(mode {mode} measures wall time"):
            machine_of({"mode": mode, "guests": 2}, "job")


class _Boot:
    def __init__(self, log, name, fails=False):
        self.log, self.name, self.fails = log, name, fails

    def __enter__(self):
        if self.fails:
            raise TargetDown(f"{self.name} did not boot", "")
        self.log.append(("up", self.name, threading.current_thread().name))
        return self.name

    def __exit__(self, *exc):
        self.log.append(("off", self.name))


def test_guests_boot_at_once_each_lives_in_its_thread_until_closed_and_a_failed_one_is_left_out():
    log: list = []
    names = iter(["g1", "g2"])
    with qemu_guests.booted(2, lambda: _Boot(log, next(names))) as (up, down):
        assert sorted(up) == ["g1", "g2"] and down == []
        # booted in threads of their own (QEMU's parent-death signal follows the thread), still up
        assert {e[2] for e in log} == {"perflab-guest"} and not any(e[0] == "off" for e in log)
    assert sorted(e for e in log if e[0] == "off") == [("off", "g1"), ("off", "g2")]

    plan = iter([("g1", True), ("g2", False)])
    with qemu_guests.booted(2, lambda: _Boot([], *next(plan))) as (up, down):
        assert up == ["g2"] and [str(e) for e in down] == ["g1 did not boot"]
    assert qemu_guests.facts_of(1, "why", down) == {"vm_guests": "1", "vm_guests_why": "why",
                                                    "vm_guests_down": "g1 did not boot"}
    with pytest.raises(TargetDown, match="did not boot"):
        with qemu_guests.booted(2, lambda: _Boot([], "g", fails=True)):
            pass


def test_the_guests_facts_are_said_once_when_alike_and_each_in_guest_order_when_not():
    assert qemu_guests.joined_facts([{"k": "6.1", "boot": "12.10"}, {"k": "6.1", "boot": "13.02"}]) == {
        "k": "6.1", "boot": "12.10 | 13.02"}
    assert qemu_guests.facts_of(1, "one guest", []) == {}

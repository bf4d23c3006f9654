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


@dataclass(frozen=True)
class Machines(Target):
    """A place of `n` machines, as a boot of guests side by side is: a job that runs side by side
    gets their executors pooled (qemu_guests.Pooled), any other job the first machine's."""

    kind = "machines"
    n: int = 2
    log: list = field(default_factory=list, compare=False)
    dies_on: str = ""
    meet: tuple = ()            # items whose processes each wait until all of them have started
    toolchain: Toolchain = field(default_factory=Toolchain)

    def share_key(self, needs, params):
        return "machines"

    @contextlib.contextmanager
    def open(self, openings, execute):
        lock = threading.Lock()
        state = {"active": 0, "most": 0}
        started = {item: threading.Event() for item in self.meet}

        def machine(number):
            def run(spec, hooks=None, wrapper=()):
                _, item, repetition = spec.argv
                with lock:
                    state["active"] += 1
                    state["most"] = max(state["most"], state["active"])
                try:
                    if item in started:
                        started[item].set()
                        assert all(e.wait(WAIT_S) for e in started.values()), "ran one after another"
                    if item == self.dies_on:
                        raise TargetDown(f"machine {number} went down", "its console")
                    self.log.append((number, item, int(repetition)))
                    return result({"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0}[item] + int(repetition))
                finally:
                    with lock:
                        state["active"] -= 1
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
        2, "2 of at most 2: 2 host CPU(s), rounds of up to 12 process(es)")
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

"""Guests side by side: one place of the Qemu target made of several guests of one kernel (issue 47).

Under icount a guest's figures are instruction-time: another guest on another host CPU does not
move them (docs/vm.md, "Guests side by side"). A job whose family runs independent processes
(`Family.independent_processes`: lmbench's programs) and that no instrument watches can then run
one round's processes in two guests at once, each guest a single-threaded QEMU on a host CPU of
its own; a job of a fixed count of independent repetitions (`Family.independent_repetitions`:
will-it-scale's), its repetitions. The runner's one loop stays the one loop: the place admits such a job with its
executors pooled (`Pooled`) and a way to start a round's processes in the guests at once
(`RunIn.together`); the loop takes their results in the round's order (runner.loop).

How many guests (`count`): one unless the mode is icount (under TCG or KVM the guests' wall times
would disturb each other), the boot has no work disk (an image one QEMU writes) and some job of
the place runs side by side; then the job's `vm.guests` when written (1 forces one guest), else
as many as this process may run on CPUs, at most MAX_GUESTS and at most the processes a job may
start at once (a round's, or all its repetitions' when those run side by side).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import AbstractContextManager

from perflab.core import paths
from perflab.core.errors import UsageProblem
from perflab.execution.targets import Executor, Opening

# The job key, in its `vm` block, that sets the number of guests (1: one guest, as before issue 47).
GUESTS_KEY = "guests"
# Two guests are what a 2-core box runs side by side; more would cost memory and boots for a
# figure not measured yet.
MAX_GUESTS = 2


def host_cpus() -> int:
    """The CPUs this process may run on (its affinity, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def count(mode: str, asked: int | None, openings: list[Opening], cpus: int | None = None,
          disks: bool = False) -> tuple[int, str]:
    """(guests to boot, why, as the run's fact says it) for a place opened for `openings`; `disks`:
    the boot has work disks (`fs:`), image files one QEMU at a time may write."""
    if mode != "icount":
        return 1, f"one guest: mode {mode} measures wall time, which guests side by side would disturb"
    if disks:
        return 1, "one guest: a work disk is written by one guest"
    side = [o for o in openings if o.side_by_side]
    if not side:
        return 1, "one guest: no job of this boot runs its processes side by side"
    if asked is not None:
        return asked, f"vm.{GUESTS_KEY} = {asked}"
    cpus = host_cpus() if cpus is None else cpus
    widest = max(o.widest for o in side)
    n = max(1, min(cpus, MAX_GUESTS, widest))
    return n, f"{n} of at most {MAX_GUESTS}: {cpus} host CPU(s), up to {widest} process(es) at once"


class Pooled:
    """One job's executors, one per guest, as one place: `together` runs a round's processes in
    the guests at once, a thread per guest taking the next process when its guest is idle,
    longest first by what its program's last process took on this host (`took`; in a job's
    first round, what it took in the last run of the same job here: `remembered`), then the
    programs never timed, in the round's order: so that the guests end a round together."""

    def __init__(self, executors: list[Executor], clock: Callable[[], float] = time.monotonic, memory: str = ""):
        self.executors, self.clock, self.memory = executors, clock, memory
        self.took: dict[str, float] = remembered(memory) if memory else {}   # item -> seconds, on this host
        self._writing = threading.Lock()

    def execute(self, spec, **kwargs):
        """One process alone: in the first guest."""
        return self.executors[0](spec, **kwargs)

    def together(self, specs: list) -> list[Future]:
        """The processes started in the guests at once: a Future of each one's result, in the
        order given. A Future cancelled before its process started is skipped."""
        futures = [Future() for _ in specs]
        pending = sorted(zip(specs, futures), key=lambda p: -self.took.get(p[0].item, -1.0))
        lock = threading.Lock()

        def serve(guest: int) -> None:
            execute = self.executors[guest]
            while True:
                with lock:
                    if not pending:
                        return
                    spec, future = pending.pop(0)
                if not future.set_running_or_notify_cancel():
                    continue
                began = self.clock()
                try:
                    done = execute(spec, hooks=None)
                except BaseException as e:    # the loop raises it where it takes the result
                    self.took[spec.item] = self.clock() - began
                    future.set_exception(e)
                    continue
                # Before the result: the loop may start the next round as soon as it has it.
                self.took[spec.item] = self.clock() - began
                future.set_result(done)

        threads = [threading.Thread(target=serve, args=(guest,), name=f"perflab-guest-{guest + 1}", daemon=True)
                   for guest in range(len(self.executors))]
        for thread in threads:
            thread.start()
        if self.memory:
            threading.Thread(target=self._remember, args=(threads,), daemon=True).start()
        return futures

    def _remember(self, threads: list[threading.Thread]) -> None:
        """Once the round's guests are idle: the times as they are then (a later round's writer
        that ran first wrote no more than this one holds)."""
        for thread in threads:
            thread.join()
        with self._writing:
            remember(self.memory, dict(self.took))


# What each program's process took in the last side-by-side run of a job on this host, by the job
# (kernel, machine, session): how its next run's first round is ordered. Only an order: a
# figure does not depend on it.
TOOK_FILE = "side-by-side-seconds.json"


def _took_path():
    return paths.cache_home() / "vm" / TOOK_FILE


def remembered(memory: str) -> dict[str, float]:
    try:
        data = json.loads(_took_path().read_text()).get(memory, {})
        return {str(k): float(v) for k, v in data.items()}
    except (OSError, ValueError, AttributeError, TypeError):
        return {}            # none yet, or unreadable: the round's order


def remember(memory: str, took: dict[str, float]) -> None:
    """Whole or not at all (another perflab may write it at the same time); the last 50 jobs."""
    path = _took_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            data = json.loads(path.read_text())
            data = data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            data = {}
        data.pop(memory, None)
        data[memory] = {k: round(v, 3) for k, v in took.items()}
        data = dict(list(data.items())[-50:])
        paths.write_whole(path, json.dumps(data))
    except OSError:
        pass                 # a cache: the next run orders its first round as given


def pooled(runs: list, session) -> Pooled:
    """A job's executors in a boot's guests (qemu._GuestExecutor each), pooled; with more than one,
    its times remembered by its kernel and machine, its session's name and parameters."""
    spec = runs[0].guest.spec
    memory = json.dumps([str(spec.kernel), spec.mode, spec.cpus, spec.memory_mib, session.name, session.params],
                        sort_keys=True, default=str) if len(runs) > 1 else ""
    return Pooled([r.execute for r in runs], memory=memory)


def joined_facts(facts: list[dict]) -> dict:
    """The guests' facts as one run records them: a fact every guest says alike, once; one they
    differ in (the boot's seconds, the settle), each guest's value in guest order, ` | ` between."""
    out: dict = {}
    for key in dict.fromkeys(k for f in facts for k in f):
        values = [str(f.get(key, "")) for f in facts]
        out[key] = facts[0][key] if len(set(values)) == 1 else " | ".join(values)
    return out


class _Owner(threading.Thread):
    """The thread a guest is booted in and lives in until the place closes: QEMU is started with
    a parent-death signal (core.process.die_with_parent), which fires when the thread that started
    it ends, so the thread stays until the guest is powered off."""

    def __init__(self, boot_one: Callable[[], AbstractContextManager]):
        super().__init__(name="perflab-guest", daemon=True)
        self.boot_one = boot_one
        self.guest = None
        self.error: BaseException | None = None
        self.ready = threading.Event()
        self.release = threading.Event()

    def run(self) -> None:
        try:
            with self.boot_one() as guest:
                self.guest = guest
                self.ready.set()
                self.release.wait()
        except BaseException as e:        # its boot failed: the place goes on without it, or says so
            if self.guest is None:
                self.error = e
        finally:
            self.ready.set()


@contextlib.contextmanager
def booted(n: int, boot_one: Callable[[], AbstractContextManager]) -> Iterator[tuple[list, list[BaseException]]]:
    """`n` guests booted at once (`boot_one()` each): (the guests that came up, in order; why each
    of the others did not). All down: the first one's error. One guest boots in this thread."""
    if n == 1:
        with boot_one() as guest:
            yield [guest], []
        return
    owners = [_Owner(boot_one) for _ in range(n)]
    try:
        for owner in owners:
            owner.start()
        for owner in owners:
            owner.ready.wait()
        up = [o.guest for o in owners if o.guest is not None]
        if not up:
            raise next(o.error for o in owners if o.error is not None)
        yield up, [o.error for o in owners if o.error is not None]
    finally:
        for owner in owners:
            owner.release.set()
        for owner in owners:
            if owner.is_alive():
                owner.join()


def facts_of(up: int, why: str, down: list[BaseException]) -> dict:
    """What a run records of its boot's guests besides their own facts: nothing for one guest
    (as every run before issue 47), else how many, why, and why any did not come up."""
    if up == 1 and not down:
        return {}
    return {"vm_guests": str(up), "vm_guests_why": why,
            **({"vm_guests_down": "; ".join(str(e) for e in down)} if down else {})}


def warm(files, setup, data) -> None:
    """The initramfs every guest of the boot reads, built here before they boot at once: its cache
    writes one temporary file per process, which two threads building it alike would share. The
    same archive execution.vm.machine.boot builds for them."""
    from perflab.execution.vm.machine import initrd_of

    initrd_of(files, setup, data)


def check_key(machine: dict, at: str) -> None:
    """A vm block's `guests` as written: UsageProblem in one line when it is not a count, or more
    than one outside icount."""
    guests = machine.get(GUESTS_KEY)
    if guests is not None and (isinstance(guests, bool) or not isinstance(guests, int) or guests < 1):
        raise UsageProblem(f"{at}key 'vm.{GUESTS_KEY}' = {guests!r}: expected an integer >= 1 "
                           "(1: one guest; side by side only under icount)")
    if guests is not None and guests > 1 and machine.get("mode") != "icount":
        raise UsageProblem(f"{at}key 'vm.{GUESTS_KEY}' = {guests}: guests side by side only under icount "
                           f"(mode {machine.get('mode')} measures wall time, which they would disturb)")


@contextlib.contextmanager
def boot_guests(boot, spec, machine: dict, openings: list[Opening], disks: bool, *, files, setup,
                data) -> Iterator[tuple[list, dict]]:
    """The guests of one boot (`count` of them, each `boot(spec, files=, setup=, data=)`, as
    execution.vm.machine.boot): (the guests up, their facts joined, with facts_of's)."""
    n, why = count(spec.mode, machine.get(GUESTS_KEY), openings, disks=disks)
    if n > 1:
        warm(files, setup, data)
    with booted(n, lambda: boot(spec, files=files, setup=setup, data=data)) as (up, down):
        if down:
            print(f"perflab: {len(down)} of {n} guests did not boot ({down[0]}); the jobs run in {len(up)}",
                  file=sys.stderr, flush=True)
        yield up, {**joined_facts([g.facts for g in up]), **facts_of(len(up), why, down)}

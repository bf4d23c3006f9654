"""A target and an instrument written in a test plug into the one loop without touching it.

The fake target opens a "place" whose executor answers from a script (nothing starts); the
fake instrument wraps each recorded process (the executor sees its wrapper words) and adds a
figure of its own. Both are the same kinds of objects as the Host and Qemu targets and the
valgrind and monitors instruments (perflab.execution.targets, perflab.execution.instruments).
"""

from __future__ import annotations

import contextlib
import json
import shutil
from dataclasses import dataclass, field

import pytest

from perflab import jobs
from perflab.core.errors import PerflabError, TargetDown
from perflab.core.model import Sample
from perflab.execution.instruments import Instrument, Watch
from perflab.execution.targets import HOST_PROGRAMS, Place, Target, Toolchain
from perflab.execution.targets.host import Host
from perflab.jobs.job import AtomicJob
from perflab.runner import loop
from test_runner_fast import FakeFamily, result, samples, store  # noqa: F401 (store: a fixture)
from test_runner_fast import fixed_environment  # noqa: F401 (autouse fixture)


@dataclass(frozen=True)
class Elsewhere(Target):
    """A place that answers every process from a script: it only says what a target says."""

    kind = "elsewhere"
    lacks = {HOST_PROGRAMS: "it has none of the host's programs"}
    down: bool = False
    toolchain: Toolchain = field(default_factory=Toolchain)
    started: list = field(default_factory=list, compare=False)

    def describe(self) -> str:
        return "elsewhere"

    @contextlib.contextmanager
    def open(self, openings, execute):
        if self.down:
            raise TargetDown("elsewhere did not come up", "last words\nof its console")

        def run(spec, hooks=None, wrapper=()):
            self.started.append([*wrapper, *spec.argv])
            return result(2.0)

        yield Place(run, {"elsewhere_facts": "yes"})

    def params(self, params: dict) -> dict:
        return {**params, "where": "elsewhere"}

    def mark(self, samples: list[Sample]) -> list[Sample]:
        return [Sample(s.metric, s.value, s.unit + " (elsewhere)", s.direction) for s in samples]

    def unopened_facts(self) -> dict:
        return {"elsewhere_tried": "yes"}


@dataclass(frozen=True)
class Counter(Instrument):
    """Wraps each recorded process in `counter --` and reports one figure per process."""

    name = "counter"
    requires = frozenset()       # it wraps argv: any place that takes a wrapper

    def attach(self, what, warn=lambda message: None, target=None) -> Watch:
        return _CounterWatch()


class _CounterWatch(Watch):
    params = {"counted": True}
    facts = {"counter_version": "1"}

    def wrap(self, spec):
        return spec, ["counter", "--"] if spec.record else []

    def samples(self, spec, result):
        return [Sample("counter.count", 7.0, "events", -1)]


@dataclass(frozen=True)
class HostOnly(Instrument):
    name = "host-only"


def _job(target: Target, instruments=(), family=None) -> AtomicJob:
    family = family or FakeFamily()
    return jobs.resolve(AtomicJob("fake", {"items": ["a"]}, runs=2, family=family, target=target,
                                  instruments=tuple(instruments)))


def test_a_test_target_and_instrument_run_through_the_one_loop(store):  # noqa: F811
    target = Elsewhere()
    (o,) = loop.run_jobs(store, [_job(target, [Counter()])], executor=lambda *a, **k: pytest.fail("host executor"))
    assert o.error is None
    # every process started in the target's place, wrapped by the instrument
    assert target.started == [["counter", "--", "fake", "a", "0"], ["counter", "--", "fake", "a", "1"]]
    run = store.get_run(o.run_id)
    params = run.params if isinstance(run.params, dict) else json.loads(run.params)
    assert params == {"items": ["a"], "base": 1.0, "counted": True, "where": "elsewhere"}
    facts = run.environment if isinstance(run.environment, dict) else json.loads(run.environment)
    assert facts["elsewhere_facts"] == "yes" and facts["counter_version"] == "1"
    got = {(m, v, rep) for m, v, rep, _ in samples(store, o.run_id)}
    assert ("fake.a", 2.0, 0) in got and ("counter.count", 7.0, 1) in got
    assert {r.unit for r in store.samples([o.run_id]) if r.metric == "counter.count"} == {"events (elsewhere)"}


def test_a_target_that_does_not_come_up_fails_its_run_typed_and_the_others_go_on(store):  # noqa: F811
    down, up = Elsewhere(down=True), Elsewhere()
    first, second = loop.run_jobs(store, [_job(down), _job(up)])
    assert first.error.startswith("elsewhere did not come up") and first.executor is None
    assert first.boot_failure.message == "elsewhere did not come up"
    assert first.boot_failure.console_tail == "last words\nof its console"
    assert store.get_run(first.run_id).status == "failed"
    facts = store.get_run(first.run_id).environment
    facts = facts if isinstance(facts, dict) else json.loads(facts)
    assert facts["elsewhere_tried"] == "yes"
    assert second.error is None and second.samples == 2 and second.boot_failure is None


def test_what_a_target_lacks_and_where_an_instrument_cannot_run_are_one_line_refusals():
    class NeedsHostPrograms(FakeFamily):
        needs = frozenset({HOST_PROGRAMS})

    with pytest.raises(PerflabError, match="^fake cannot run in elsewhere: it needs the host's programs, and "
                                           "it has none of the host's programs$"):
        loop.check_jobs([_job(Elsewhere(), family=NeedsHostPrograms())])
    with pytest.raises(PerflabError, match="host-only watches processes on this machine, not in elsewhere"):
        loop.check_jobs([_job(Elsewhere(), [HostOnly()])])
    loop.check_jobs([_job(Host(), [HostOnly(), Counter()])])       # the host offers both


def test_what_changes_what_a_guest_runs_keeps_its_runs_apart(tmp_path):
    """vCPUs, memory and QEMU arguments are grouping parameters of a guest run (the defaults are
    left out, so a default guest's series goes on from runs stored before): never pooled."""
    from perflab.analysis.selection import Selection, groups_of
    from perflab.execution.targets.qemu import Qemu
    from perflab.store import open_store

    variants = {
        "default": {},
        "cpus": {"cpus": 2},
        "memory": {"memory": 1024},
        "qemu_args": {"qemu_args": ["-cpu", "max"]},
        "mode": {"mode": "icount"},
    }
    params = {name: Qemu(kernel="/k", vm=vm).params({"test": "getppid1"}) for name, vm in variants.items()}
    assert params["default"] == {"test": "getppid1", "vm": "tcg"}
    assert params["cpus"]["vm_cpus"] == 2 and params["memory"]["vm_memory_mib"] == 1024
    assert params["qemu_args"]["vm_qemu_args"] == "-cpu max" and params["mode"]["vm"] == "icount"
    store = open_store(str(tmp_path / "p.db"))
    try:
        runs = []
        for name, p in params.items():
            run_id = store.create_run(box="b", environment={"kernel_release": "6.1.0-47-amd64"},
                                      benchmark="will-it-scale", name=name, params=p)
            store.add_samples(run_id, 0, [Sample("will-it-scale.per_process_ops", 3.0e6, "ops/s", 1)])
            runs.append(store.get_run(run_id))
        groups = groups_of(store, Selection("all", runs, "all"))
        assert len(groups) == len(variants)
        assert all(len(g.run_ids) == 1 for g in groups.values())
    finally:
        store.engine.dispose()


@dataclass(frozen=True)
class Shared(Target):
    """A place opened once for the jobs that share it (a guest booted once): it logs what it did."""

    kind = "shared"
    name: str = "one"
    log: list = field(default_factory=list, compare=False)
    down_at_open: bool = False
    dies_on: str = ""                 # the argv word that makes its place go down
    toolchain: Toolchain = field(default_factory=Toolchain)

    def share_key(self, needs, params):
        return None if params.get("items") == ["own"] else self.name

    @contextlib.contextmanager
    def open(self, openings, execute):
        self.log.append(("open", self.name, len(openings)))
        if self.down_at_open:
            raise TargetDown(f"{self.name} did not come up", "")
        alive = [True]

        def run(spec, hooks=None, wrapper=()):
            if not alive[0] or self.dies_on in spec.argv:
                alive[0] = False
                raise TargetDown(f"{self.name} went down", "")
            self.log.append(("run", self.name, spec.argv[1]))
            return result(2.0)

        try:
            yield Place(run, {"shared_facts": self.name})
        finally:
            self.log.append(("close", self.name))


def _items(target, item, runs=1):
    return jobs.resolve(AtomicJob("fake", {"items": [item]}, runs=runs, family=FakeFamily(), target=target))


def test_consecutive_jobs_on_one_target_share_one_place_opened_with_them_all(store):  # noqa: F811
    log: list = []
    a, b = Shared("a", log), Shared("b", log)
    outcomes = loop.run_jobs(store, [_items(a, "x"), _items(a, "y"), _items(b, "z"), _items(a, "w")])
    assert [o.error for o in outcomes] == [None] * 4
    # a's place opened once for the two jobs that follow one another, closed before b's opened;
    # a's last job gets a fresh place (an idle place is not kept waiting)
    assert log == [("open", "a", 2), ("run", "a", "x"), ("run", "a", "y"), ("close", "a"),
                   ("open", "b", 1), ("run", "b", "z"), ("close", "b"),
                   ("open", "a", 1), ("run", "a", "w"), ("close", "a")]
    facts = [store.get_run(o.run_id).environment for o in outcomes]
    facts = [f if isinstance(f, dict) else json.loads(f) for f in facts]
    assert all(f["shared_facts"] in "ab" for f in facts)


def test_a_job_that_needs_a_place_of_its_own_gets_one_between_shared_ones(store):  # noqa: F811
    log: list = []
    a = Shared("a", log)
    outcomes = loop.run_jobs(store, [_items(a, "x"), _items(a, "own"), _items(a, "y")])
    assert [o.error for o in outcomes] == [None] * 3
    assert [e for e in log if e[0] == "open"] == [("open", "a", 1)] * 3


def test_a_place_that_does_not_come_up_is_not_tried_again_for_the_jobs_that_share_it(store):  # noqa: F811
    log: list = []
    down = Shared("a", log, down_at_open=True)
    outcomes = loop.run_jobs(store, [_items(down, "x"), _items(down, "y"), _items(Shared("b", log), "z")])
    assert [o.boot_failure.message if o.boot_failure else None for o in outcomes] == [
        "a did not come up", "a did not come up", None]
    assert [e for e in log if e[0] == "open"] == [("open", "a", 2), ("open", "b", 1)]
    assert [store.get_run(o.run_id).status for o in outcomes] == ["failed", "failed", "finished"]


def test_a_place_that_goes_down_under_a_job_is_opened_afresh_for_the_next(store):  # noqa: F811
    log: list = []
    a = Shared("a", log, dies_on="x")
    first, second = loop.run_jobs(store, [_items(a, "x"), _items(a, "y", runs=2)])
    assert first.error == "a went down" and first.boot_failure is None
    assert second.error is None and second.samples == 2
    assert [e for e in log if e[0] in ("open", "close")] == [("open", "a", 2), ("close", "a"),
                                                               ("open", "a", 1), ("close", "a")]


def test_interleaved_jobs_on_two_targets_alternate_between_their_two_places(store):  # noqa: F811
    log: list = []
    a, b = Shared("a", log), Shared("b", log)
    loop.run_jobs(store, [_items(a, "x", runs=2), _items(b, "y", runs=2), _items(a, "w", runs=2)],
                  interleave=True)
    # both places up at once, each opened once; rounds alternate between them
    assert log == [("open", "a", 2), ("open", "b", 1),
                   ("run", "a", "x"), ("run", "b", "y"), ("run", "a", "w"),
                   ("run", "a", "x"), ("run", "b", "y"), ("run", "a", "w"),
                   ("close", "b"), ("close", "a")]


def test_two_jobs_programs_of_one_name_each_get_a_place_in_a_shared_guest():
    """A guest booted for several jobs holds all their programs: one whose guest path another
    job's different program already holds moves to a directory of its own (argv is rewritten)."""
    from perflab.execution.targets.qemu import _placed, _rewrite

    taken = {"/opt/perflab/bin/prog": "/tmp/a/prog", "/usr/bin/x": "/usr/bin/x"}
    moved = _placed({"/opt/perflab/bin/prog": "/tmp/b/prog", "/usr/bin/x": "/usr/bin/x"}, taken)
    assert moved == {"/opt/perflab/bin/1/prog": "/tmp/b/prog", "/usr/bin/x": "/usr/bin/x"}
    assert _rewrite(["/tmp/b/prog", "-n", "/usr/bin/x"], moved) == ["/opt/perflab/bin/1/prog", "-n", "/usr/bin/x"]
    assert _placed({"/opt/perflab/bin/prog": "/tmp/a/prog"}, taken) == {"/opt/perflab/bin/prog": "/tmp/a/prog"}


# -- a target is one module: registered, it is in every command and runs through the one runner --

JOB_COMMANDS = (("run", "cmd"), ("run", "will-it-scale"), ("rerun",), ("bisect",), ("series",), ("robot",),
                ("submit",))


def _perflab(argv: list[str]) -> tuple[int, str, str]:
    import contextlib
    import io

    from perflab import cli as cli_pkg

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli_pkg.main(argv)
    return rc, out.getvalue(), err.getvalue()


def _option_blocks(help_text: str, flags: list[str]) -> dict[str, str]:
    """flag -> its help entry with whitespace made single spaces (columns differ between commands)."""
    import re

    blocks, current = {}, None
    for line in help_text.partition("\nOptions:\n")[2].splitlines():
        m = re.match(r"^\s+(-\S+)", line)
        if m:
            current = m.group(1).rstrip(",") if m.group(1).rstrip(",") in flags else None
        if current:
            blocks[current] = f"{blocks.get(current, '')} {line}"
    return {k: " ".join(v.split()) for k, v in blocks.items()}


@pytest.fixture
def wrapped(monkeypatch):
    """tests/target_plugin.py's target registered for the test (and only for it)."""
    from perflab.execution import targets

    monkeypatch.setattr(targets, "REGISTERED", list(targets.REGISTERED))
    targets.register("target_plugin:Wrapped")
    return targets


def test_the_six_commands_that_run_jobs_show_the_same_target_options():
    from perflab.execution.targets import registered_options

    flags = [o.flag for o in registered_options()]
    assert {"--on", "--kernel", "--vm"} <= set(flags)
    shown = {}
    for command in JOB_COMMANDS:
        rc, out, err = _perflab([*command, "--help"])
        assert rc == 0, err
        shown[command] = _option_blocks(out, flags)
        assert sorted(shown[command]) == sorted(flags), (command, shown[command])
    first = shown[JOB_COMMANDS[0]]
    for command, blocks in shown.items():
        assert blocks == first, command


def test_a_registered_target_is_an_option_of_every_command_that_runs_jobs(wrapped):
    for command in JOB_COMMANDS:
        rc, out, err = _perflab([*command, "--help"])
        assert rc == 0, err
        assert "--wrap COMMAND" in out and "through COMMAND (a test's target)" in " ".join(out.split()), command


def test_listing_the_commands_loads_no_target():
    """The options are added when a command parses or shows its help, not when `perflab --help`
    lists the commands: no target module is imported for it (start-up time)."""
    import subprocess
    import sys

    probe = ("import contextlib, io, sys\nfrom perflab import cli\n"
             "with contextlib.redirect_stdout(io.StringIO()): cli.main(['--help'])\n"
             "print(sorted(m for m in sys.modules if m.startswith('perflab.execution.targets')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_registered_target_runs_a_job_with_its_key_through_the_one_runner(wrapped, tmp_path):
    from perflab.store import open_store

    db = str(tmp_path / "perflab.db")
    rc, out, err = _perflab(["--db", db, "run", "cmd", "--runs", "2", "--wrap", "env PERFLAB_WRAPPED=7",
                             "--metric", r"wrapped=(\d+)", "--", "sh", "-c", "echo $PERFLAB_WRAPPED"])
    assert rc == 0, err
    store = open_store(db)
    run = store.get_run(1)
    assert run.job["wrap"] == "env PERFLAB_WRAPPED=7"
    params = run.params if isinstance(run.params, dict) else json.loads(run.params)
    assert params["wrap"] == "env PERFLAB_WRAPPED=7"
    env = run.environment if isinstance(run.environment, dict) else json.loads(run.environment)
    assert env["wrapped_by"] == "env PERFLAB_WRAPPED=7"
    # The processes started through the wrapper: without it the command prints an empty line.
    assert sorted(r.value for r in store.samples([run.id]) if r.metric == "wrapped") == [7.0, 7.0]
    # The stored job's key names the target again: rerun runs it there.
    rc, out, err = _perflab(["--db", db, "rerun", str(run.id), "--tag", "again"])
    assert rc == 0, err
    again = store.get_run(run.id + 1)
    assert again.job["wrap"] == "env PERFLAB_WRAPPED=7"
    assert sorted(r.value for r in store.samples([again.id]) if r.metric == "wrapped") == [7.0, 7.0]


def test_target_options_are_refused_in_one_line_where_they_cannot_go(wrapped, tmp_path):
    db = str(tmp_path / "perflab.db")
    rc, _, err = _perflab(["--db", db, "run", "cmd", "--wrap", "no-such-wrapper-here", "--", "true"])
    assert rc != 0 and len(err.strip().splitlines()) == 1
    assert "--wrap 'no-such-wrapper-here': expected a command on PATH" in err
    rc, _, err = _perflab(["--db", db, "run", "cmd", "--wrap", "env", "--kernel", "/boot/vmlinuz", "--", "true"])
    assert rc != 0 and len(err.strip().splitlines()) == 1
    assert "--kernel/--vm with --wrap: a job runs in one place" in err
    # bisect, series and robot run their steps on an SSH machine (--on; tests/test_lab_ssh.py), not on every target.
    for command, option in ((["bisect", "--repo", str(tmp_path)], ["--wrap", "env"]),
                            (["series", "--repo", ".", "--mbox", "x"], ["--wrap", "env"]),
                            (["robot", "--repo", str(tmp_path), "--job", "x.yaml"], ["--wrap", "env"])):
        rc, _, err = _perflab(["--db", db, *command, *option])
        assert rc != 0 and len(err.strip().splitlines()) == 1, (command, err)
        assert f"{option[0]}: {command[0]} does not run its jobs there yet" in err, err


def test_monitors_ask_the_target_for_what_they_need_not_its_kind(wrapped):
    """A monitor states what it needs of the place (its files read, this machine's processes, the
    emulator's counts); whether the processes run here is the target's answer (`fulfils_far`)."""
    from perflab.execution import instruments
    from perflab.execution.targets import FILE_READINGS
    from perflab.monitors.instrument import Monitors
    from target_plugin import Wrapped

    here = Wrapped(wrap="env")
    instruments.check((Monitors({"vmstat": {}, "sched_debug": {}}),), here, "job")    # this machine's processes
    with pytest.raises(PerflabError, match="monitor insn-profile counts the instructions of a VM guest"):
        instruments.check((Monitors({"insn-profile": {}}),), here, "job")

    @dataclass(frozen=True)
    class Unreadable(Elsewhere):
        lacks = {FILE_READINGS: "it reads no files"}

    far = Elsewhere()
    instruments.check((Monitors({"vmstat": {}}),), far, "job")      # read there by the place
    with pytest.raises(PerflabError, match="monitor sched_debug watches this machine, not elsewhere"):
        instruments.check((Monitors({"sched_debug": {}}),), far, "job")
    with pytest.raises(PerflabError, match="monitor vmstat watches this machine, not elsewhere"):
        instruments.check((Monitors({"vmstat": {}}),), Unreadable(), "job")
    assert far.where_readings() == "on elsewhere" and here.where_readings() is None


def test_a_machine_is_held_by_its_address_whatever_name_reaches_it(tmp_path, monkeypatch):
    """The controller's machine lock (execution/machine_lock.py) is named after host and port: a
    configured name and an ssh:// URL of the same address exclude each other; another port is
    another machine. (The machine's own lock: tests/test_lab_ssh.py, with a real sshd.)"""
    import fcntl
    import os

    from perflab.execution import machine_lock
    from perflab.execution.targets.ssh_machine import machine_of

    config = tmp_path / "perflab.toml"
    config.write_text('[machine.box1]\nssh = "ssh://perf@h.lab.example:2222"\n')
    monkeypatch.setenv("PERFLAB_CONFIG", str(config))
    monkeypatch.setenv(machine_lock.LOCKS_ENV, str(tmp_path / "locks"))
    named, url = machine_of("box1"), machine_of("ssh://root@h.lab.example:2222")
    assert machine_lock.lock_path(named) == machine_lock.lock_path(url)
    assert machine_lock.lock_path(machine_of("ssh://h.lab.example")) != machine_lock.lock_path(named)
    said = []
    with machine_lock.held_here(named, "first job", say=said.append):
        fd = os.open(machine_lock.lock_path(url), os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):     # another opener (another process's run) must wait
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
        assert "first job" in machine_lock.holder(machine_lock.lock_path(url))
    assert said == []
    with machine_lock.held_here(url):     # released with its holder's descriptor
        pass


def test_nothing_is_started_ahead_for_the_host_or_a_kernel_that_is_not_there(tmp_path):
    """A run whose place cannot begin ahead says nothing there: its own checks refuse it, in one line."""
    from perflab.execution import targets
    from perflab.execution.vm import machine

    assert targets.start_ahead({}, frozenset({HOST_PROGRAMS}), "cmd") is None
    for kernel in (str(tmp_path / "no-vmlinuz"), "debian:6.1.0-99-amd64"):     # not fetched: nothing fetched
        assert targets.start_ahead({"kernel": kernel, "vm": {"mode": "tcg"}}, frozenset({HOST_PROGRAMS}), "cmd") is None
    assert machine.running_ahead() == 0 and not machine._AHEAD
    rc, _, err = _perflab(["--db", str(tmp_path / "db.sqlite"), "run", "cmd", "--runs", "1",
                           "--kernel", str(tmp_path / "no-vmlinuz"), "--", "true"])
    assert rc != 0 and err.strip() == f"perflab: error: kernel {tmp_path / 'no-vmlinuz'}: no such file"
    assert not machine._AHEAD


def test_a_machine_lock_is_named_after_what_the_ssh_config_resolves(tmp_path, monkeypatch):
    """The controller's lock names the HostName and Port an ssh config's Host alias stands for
    (`ssh -G`, which reaches nothing): one alias in two configs for two addresses is two machines
    (two test sshds did wait for each other), and the alias and the address it names are one."""
    from perflab.execution import machine_lock
    from perflab.execution.targets.ssh_machine import machine_of

    if shutil.which("ssh") is None:
        pytest.skip("needs the OpenSSH client")
    paths = []
    for port in (2201, 2202):
        (tmp_path / f"ssh{port}").write_text(f"Host box-alias\n  HostName 127.0.0.1\n  Port {port}\n")
        (tmp_path / f"perflab{port}.toml").write_text(
            f'[machine.far]\nssh = "box-alias"\nssh_config = "{tmp_path / f"ssh{port}"}"\n')
        monkeypatch.setenv("PERFLAB_CONFIG", str(tmp_path / f"perflab{port}.toml"))
        paths.append(machine_lock.lock_path(machine_of("far")))
    assert paths[0] != paths[1]
    assert machine_lock.lock_path(machine_of("ssh://root@127.0.0.1:2202")) == paths[1]
    (tmp_path / "jump").write_text("Host behind\n  HostName 10.0.0.5\n  ProxyJump gate.lab.example\n")
    monkeypatch.setenv("PERFLAB_CONFIG", str(tmp_path / "jump.toml"))
    (tmp_path / "jump.toml").write_text(f'[machine.b]\nssh = "behind"\nssh_config = "{tmp_path / "jump"}"\n')
    assert machine_lock.machine_key(machine_of("b")) == "10.0.0.5:22 via gate.lab.example"
    assert machine_lock.lock_path(machine_of("b")) != machine_lock.lock_path(machine_of("ssh://10.0.0.5"))

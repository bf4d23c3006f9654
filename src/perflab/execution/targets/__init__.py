"""Where a job's processes run: the execution-target layer (docs/architecture.md).

A target is a place a process can run: this machine (`Host`), a kernel booted in QEMU
(`Qemu`, tcg | icount | kvm), a machine reached over SSH on its running kernel (`Ssh`). An atomic job
carries one target (perflab.jobs.job.AtomicJob.target), and the runner's one loop asks it
the same questions whatever it is — it knows none by name:

    target.check(needs, what)                  refuse, before anything is built or booted
    with target.preparing(needs, what) as p:  the family's session is entered here (its
        session = family.session(...)          programs built static for a guest, its CPU
                                               shares the guest's vCPUs, its work dirs disks)
    with target.open([Opening(prepared, session, rounds, needs), ...], execute) as place:
        run_in = place.admit(i)                       one job's share of the place
        run_in.execute(spec, wrapper=..., hooks=...)  the host executor's signature
        run_in.facts                                  what the run's environment records
    target.params(params), target.mark(samples)       what keeps its figures apart

A place is opened once for every job that may share it: jobs whose targets give the same
`share_key` and that follow one another in the invocation (a guest booted once for all the
jobs of a job file on one kernel and machine). A target whose key is None opens a place per
job (the host: there is nothing to bring up).

A target that cannot be brought up raises perflab.core.errors.TargetDown; the loop records
the run failed with a BootFailure and goes on with the other jobs.

What a family needs of the place it runs in (`Family.needs`) and what a target offers are
words from CAPABILITIES: the refusal is one line built from both (`refusal`).

The targets registered in REGISTERED (Ssh, Qemu) read their own job keys (`job_keys`,
`from_keys`) and declare their own command-line options (`options`, one TargetOption each, made
into click options once for every command that runs jobs: perflab.cli.common.target_options;
`option_keys` and `placed` turn their values into job keys and put them on a job); a job none
of them takes runs on the Host. Monitors and instruments ask a target what it offers
(`offers`, `fulfils_far`), never its kind. Adding one is a module and a line in REGISTERED
(docs/architecture.md, "How to add ... a target").
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from perflab.core import cbuild
from perflab.core.model import Sample
from perflab.core.process import ProcessResult

# What a family may need of its target (a Family's `needs`).
PERFLAB_PROGRAMS = "perflab-programs"      # perflab's C programs, built here, run there
HOST_PROGRAMS = "host-programs"            # the host's own programs (cmd's command, fio)
WRITABLE_HOST_TREE = "writable-host-tree"  # the host's directories, written in place (kernbench)
WORK_DISK = "work-disk"                    # a file system to work in (fio, aim7, news: `fs:`)
# What an instrument may need of its target (Instrument.needs): the instructions the
# processes' machine ran, counted by the emulator (the insn-profile monitor).
INSTRUCTION_COUNTS = "instruction-counts"
# ... and perf beside its processes, where they run (a guest's monitors run the host's perf over
# 9p; an SSH machine's, its own perf): the target says how (`perf_there`).
HOST_TOOLS = "host-tools"
# What a monitor or instrument asks of the place its process runs (Monitor.needs, Instrument.requires),
# fulfilled where the process runs: its files read there (/proc: by the host, a guest's or an SSH
# machine's agent); the processes on this machine itself (valgrind wraps them, debugfs is this
# machine's), which a target whose processes run elsewhere (`fulfils_far`) lacks.
FILE_READINGS = "file-readings"
HOST_PROCESSES = "host-processes"
CAPABILITIES = {
    PERFLAB_PROGRAMS: "perflab's C programs",
    HOST_PROGRAMS: "the host's programs",
    WRITABLE_HOST_TREE: "the host's directories, writable",
    WORK_DISK: "a file system to work in",
    INSTRUCTION_COUNTS: "the instructions its machine runs, counted by an emulator",
    HOST_TOOLS: "perf beside its processes",
    FILE_READINGS: "its files read where its processes run",
    HOST_PROCESSES: "its processes on this machine",
}

# Starts one process where the target runs: perflab.execution.executor.execute's signature.
Executor = Callable[..., ProcessResult]


@dataclass(frozen=True)
class TargetOption:
    """A command-line option a target declares (`--on`, `--kernel`, `--vm`): its flag, the job key
    it sets, its help; the command function's parameter (`name`, default the key) and, for a
    choice, the values it takes. Every command that runs jobs takes every declared option, made
    once from these (perflab.cli.common.target_options)."""

    flag: str
    key: str
    metavar: str
    help: str
    name: str = ""
    choices: tuple[str, ...] = ()
    is_flag: bool = False

    @property
    def param(self) -> str:
        """The parameter a command receives the value as."""
        return self.name or self.key


@dataclass(frozen=True)
class BootFailure:
    """A target that never came up (a kernel that panicked, hung or is not a kernel): what was
    tried, in one line, and the console's last lines."""

    message: str
    console_tail: str = ""

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class PerfThere:
    """How a target whose processes run elsewhere (`fulfils_far`) runs perf beside them (HOST_TOOLS),
    through the place's agent (executor.Helper): the perf command there, the root it runs in, where
    its control FIFOs and files go, and what that machine counts. perflab.monitors.guest makes the
    helpers from it; its `perf script` runs there too, so the samples are named by that machine's
    kernel and binaries."""

    perf: str | None          # the perf command there, absolute; None: this machine's (a root shared with it)
    root: str = ""            # the directory perf runs chrooted in ("": the machine's own root)
    fifos: str = ""           # where its control FIFOs go ("": the agent's working directory)
    files: str = ""           # where its output files go, removed once read ("": the same)
    said: str = ""            # where it came from, kept in the monitor's notes
    hardware: bool = False    # the machine counts hardware events (perf-profile samples cycles)
    software_only: str = "no hardware counters there"   # ... and if not, said beside what was left out
    unsupported: tuple[str, ...] = ()   # events found not counted there (a VM's hardware counters)
    # awk there sums perf script's identical stacks before the text comes back (FOLD_AWK); without
    # it (a minimal machine) the text comes back whole, rather than nothing and "perf did not run".
    fold: bool = True


@dataclass(frozen=True)
class Toolchain:
    """How a job's C programs are built for its target: the compiler (`cc:`) and flags added
    after the family's own (`cflags:`); None: the machine's cc and the family's flags."""

    cc: str | None = None
    cflags: str | None = None

    def keys(self) -> dict:
        """The job keys it is written as (only those set)."""
        return {k: v for k, v in (("cc", self.cc), ("cflags", self.cflags)) if v}

    @contextlib.contextmanager
    def building(self) -> Iterator[None]:
        with cbuild.compiling_with(self.cc, self.cflags):
            yield


@dataclass
class Opening:
    """One job's share of a place being opened: its target's preparation, its entered session,
    the rounds it will run (warm-ups and repetitions) and what its family needs; `side_by_side`:
    its processes may run in several machines at once (a round's, independent of one another, or
    its repetitions', runner.loop._rounds_together; no instrument watching them), `widest` of them
    at once: its first round's, or all its repetitions' (qemu_guests.count)."""

    prepared: Any
    session: Any
    rounds: int
    needs: frozenset[str] = frozenset()
    side_by_side: bool = False
    widest: int = 1


@dataclass
class RunIn:
    """Where one job's processes start in an opened place, and what its run records of it;
    `together`, in a place of several machines (guests side by side: qemu_guests): starts a
    round's processes in them at once, a Future of each one's result in the given order."""

    execute: Executor
    facts: dict = field(default_factory=dict)
    together: Callable[[list], list] | None = None


@dataclass
class Place:
    """An opened target: how a process starts there, and what the run's environment records of
    it. A place opened for several jobs gives each its own `admit`: the same executor and facts
    unless the target says otherwise (a guest's per-job programs, and which job of its boot)."""

    execute: Executor
    facts: dict = field(default_factory=dict)

    def admit(self, index: int) -> RunIn:
        """The `index`-th job the place was opened for, about to run."""
        return RunIn(self.execute, dict(self.facts))


class Target:
    """One place processes run in. Subclasses are frozen dataclasses (a job's typed `target`):
    equal targets run alike, and `keys()` is the job-file form they were read from."""

    kind: ClassVar[str]                       # "host", "qemu", "ssh": the word in refusals and docs
    job_keys: ClassVar[tuple[str, ...]] = ()  # the job keys a registered target reads (`on`)
    options: ClassVar[tuple[TargetOption, ...]] = ()   # ... and the options that set them (`--on`)
    # Capability -> why not, for what a target does not offer (a family needing it is refused).
    lacks: ClassVar[dict[str, str]] = {}
    toolchain: Toolchain

    @classmethod
    def from_keys(cls, doc: dict, toolchain: Toolchain) -> Target | None:
        """A registered target: itself when a job's keys name it (its job_keys), else None."""
        return None

    @classmethod
    def check_key(cls, key: str, value, where: str) -> None:
        """A registered target's job key as written: UsageProblem in one line naming `where` when wrong."""

    @classmethod
    def option_keys(cls, values: dict) -> dict:
        """Its options as a command received them (by parameter; None: not given) -> the job keys
        they set, as a job file would write them ({"on": "ssh://box"})."""
        return {o.key: values[o.param] for o in cls.options if values.get(o.param) not in (None, False)}

    @classmethod
    def placed(cls, doc: dict, keys: dict) -> dict:
        """A job's keys `doc` with this target's `keys` (from option_keys) over them: by default
        each replaces the job's own (Qemu merges `--vm`'s mode into the job's vm block)."""
        return {**doc, **keys}

    # What the instruments ask of the place a process runs (monitors reading its files, a helper
    # process beside it), fulfilled where it runs: True — by the place (a guest's agent, an SSH
    # machine's), and the processes are not this machine's (it lacks HOST_PROCESSES); False — here,
    # by this process (the host's executor has nothing to fulfil).
    fulfils_far: ClassVar[bool] = True

    # How perf runs beside its processes when they run elsewhere (HOST_TOOLS fulfilled far): fixed
    # (`perf_where`, a guest's), or found on the machine (`perf_there`, an SSH machine's); None: it does not.
    perf_where: ClassVar[PerfThere | None] = None

    def perf_there(self) -> PerfThere | None:
        return self.perf_where

    def where_readings(self) -> str | None:
        """What a monitor's record says of where its files were read (None: nothing said, as on
        this machine and in its guests)."""
        return f"on {self.describe()}" if self.fulfils_far else None

    def lacking(self) -> dict[str, str]:
        """Capability -> why not, for all it does not offer (its `lacks`, and this machine's
        processes when its own run elsewhere)."""
        far = {HOST_PROCESSES: f"its processes run in {self.describe()}"} if self.fulfils_far else {}
        return {**far, **self.lacks}

    def offers(self, capability: str) -> bool:
        return capability not in self.lacking()

    def keys(self) -> dict:
        """The atomic job's JSON keys this target is written as (kernel, vm, cc, cflags), only those set."""
        return self.toolchain.keys()

    def describe(self) -> str:
        return self.kind

    @property
    def exact_time(self) -> bool:
        """Whether durations measured here are exact by construction (instruction-time)."""
        return False

    def cpus(self) -> int | None:
        """The CPUs a job's processes see here (what `nr_task: 50%` is a share of); None: the host's."""
        return None

    def refusal(self, needs: frozenset[str] | set[str], what: str) -> str | None:
        """Why a job needing `needs` cannot run here (one line), or None when it can."""
        lacking = self.lacking()
        missing = [n for n in sorted(needs) if n in lacking]
        if not missing:
            return None
        why = "; ".join(f"it needs {CAPABILITIES.get(n, n)}, and {lacking[n]}" for n in missing)
        return f"{what} cannot run in {self.describe()}: {why}"

    def check(self, needs: frozenset[str], what: str, params: dict | None = None) -> None:
        """Before anything is built or booted: PerflabError in one line when the job cannot run here."""
        from perflab.core.errors import PerflabError

        why = self.refusal(needs, what)
        if why:
            raise PerflabError(why)

    @contextlib.contextmanager
    def preparing(self, needs: frozenset[str], what: str) -> Iterator[Any]:
        """While the family's session is entered (its programs built): what `open` needs of it."""
        with self.toolchain.building():
            yield None

    def start_ahead(self, needs: frozenset[str], what: str, params: dict | None = None) -> Callable[[], None] | None:
        """Begin now what `open` will bring up for a lone job needing `needs`, while the run is
        still being set up (a guest's boot); `open` takes it when it brings up the same. Returns
        what undoes it if nothing took it (the command's end calls it), or None: nothing begun."""
        return None

    def share_key(self, needs: frozenset[str], params: dict) -> Any:
        """Jobs whose targets give the same key, one after another, run in one opened place;
        None (the default): this job opens a place of its own."""
        return None

    @contextlib.contextmanager
    def open(self, openings: list[Opening], execute: Executor) -> Iterator[Place]:
        """The place the openings' processes run; `execute` is the host's executor (or a test's)."""
        yield Place(execute, {})

    def params(self, params: dict) -> dict:
        """The run's stored parameters: what keeps this target's figures apart from others'."""
        return params

    def mark(self, samples: list[Sample]) -> list[Sample]:
        """Samples as stored from here (an exact target marks its durations exact)."""
        return samples

    def unopened_facts(self) -> dict:
        """What a run whose target never came up records of what it tried."""
        return {}

    def facts(self) -> dict:
        """What every run here records besides its environment (the compiler's flags)."""
        return {"cflags": self.toolchain.cflags} if self.toolchain.cflags else {}


# The targets that read their own job keys and declare their own options, as module:class
# (imported when asked: a command that names none does not load them), in the order a job's
# keys are offered to them (`registered_target`); a job none of them takes runs on the host.
REGISTERED = ["perflab.execution.targets.ssh:Ssh", "perflab.execution.targets.qemu:Qemu"]


def register(entry: str) -> None:
    """One more target, as module:class (a plug-in's, a test's); its options join every command
    that runs jobs when the command is next looked up."""
    if entry not in REGISTERED:
        REGISTERED.append(entry)


def registered() -> list[type[Target]]:
    import importlib

    return [getattr(importlib.import_module(module), name) for module, name in (r.split(":") for r in REGISTERED)]


def registered_keys() -> tuple[str, ...]:
    """Every job key a registered target reads."""
    return tuple(k for t in registered() for k in t.job_keys)


class WithTargetKeys:
    """Some job keys and, after them, every registered target's (asked each time it is read, so a
    target registered later counts): `key in it`, `iter(it)`."""

    def __init__(self, *fixed: str, but: tuple[str, ...] = ()):
        self.fixed, self.but = fixed, but

    def __iter__(self) -> Iterator[str]:
        return iter(k for k in dict.fromkeys((*self.fixed, *registered_keys())) if k not in self.but)

    def __contains__(self, key: object) -> bool:
        return key in tuple(self)


def option_keys(values: dict) -> dict:
    """The target options a command received (by parameter; None: not given) -> the job keys they
    set: the one function `run`, `rerun`, `bisect`, `series`, `robot` and `submit` turn them with.
    Options of two targets (`--on` with `--kernel`) are refused in one line: a job runs in one place."""
    from perflab.core.errors import UsageProblem

    remaining, given = dict(values), []
    for target in registered():
        keys = target.option_keys(remaining)
        if keys:
            given.append((target, keys))
            # What one target took is not another's: an SSH target that boots `--kernel` there
            # (kexec) takes it in its option_keys, and the Qemu target is not asked.
            for option in registered_options():
                if option.key in keys:
                    remaining.pop(option.param, None)
    if len(given) > 1:
        (first, _), (second, _) = given[:2]
        flags = ["/".join(o.flag for o in t.options) for t in (first, second)]
        raise UsageProblem(f"{flags[0]} with {flags[1]}: a job runs in one place ({first.kind} or {second.kind}; "
                           f"the {second.kind} target on the {first.kind} one is not built yet); give one of them")
    keys = given[0][1] if given else {}
    check_registered(keys)
    return keys


def placed(doc: dict, keys: dict) -> dict:
    """A job's keys with the target options' `keys` (option_keys) over them: the keys of every other
    target left out (a stored guest job rerun `--on` a machine runs there), the named target's
    merged by it (Target.placed)."""
    for target in registered():
        if any(k in keys for k in target.job_keys):
            others = {k for t in registered() if t is not target for k in t.job_keys}
            return target.placed({k: v for k, v in doc.items() if k not in others}, keys)
    return doc


def registered_options() -> list[TargetOption]:
    """Every command-line option a registered target declares."""
    return [o for t in registered() for o in t.options]


def check_registered(values: dict, where=lambda key, flag: flag) -> None:
    """Registered targets' keys ({"on": "ssh://box"}) checked by their targets; `where(key, flag)`
    names the place at fault (the option's flag by default)."""
    for target in registered():
        for option in target.options:
            if option.key in values:
                target.check_key(option.key, values[option.key], where(option.key, option.flag))


def registered_kernel(values: dict, kernel, where: str):
    """The kernel under test on the registered target `values` names (`--on box --kernel K`), as
    its target stores it (`check_kernel`); UsageProblem in one line naming `where` when it takes none."""
    from perflab.core.errors import UsageProblem

    for target in registered():
        if any(values.get(o.key) for o in target.options):
            check = getattr(target, "check_kernel", None)
            if check is None:
                raise UsageProblem(f"{where}: {target.describe(target)} boots no kernel under test")
            return check(kernel, where)
    raise UsageProblem(f"{where}: no target takes this kernel")


def start_ahead(keys: dict, needs: frozenset[str], what: str) -> Callable[[], None] | None:
    """The place a lone job with target `keys` (option_keys) and `needs` runs in, begun now
    (Target.start_ahead): what undoes it, or None. A target that cannot begin says nothing
    here: the run's own checks say why, in their words, before anything else is done."""
    from perflab.core.errors import PerflabError

    try:
        target = registered_target(keys, Toolchain())
        return target.start_ahead(needs, what) if target is not None else None
    except PerflabError:
        return None


def registered_target(doc: dict, toolchain: Toolchain) -> Target | None:
    """The registered target a job's keys name, or None (the host, or a kernel in QEMU)."""
    for target in registered():
        found = target.from_keys(doc, toolchain)
        if found is not None:
            return found
    return None

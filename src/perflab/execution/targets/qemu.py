"""A kernel booted in QEMU (tcg | icount | kvm): booted once for the jobs that share it, run them inside.

The family's session is entered with its C programs built static (`cbuild.static_programs`) and its CPU shares
the guest's vCPUs; the kernel boots with those programs in the initramfs at the very paths the session's
ProcessSpecs name (or, for a path under a directory the guest mounts over such as /tmp, in /opt/perflab/bin:
the one place argv is rewritten), and the loop gets an executor that makes a process's working directory in
the guest on first use, then runs it there (`Guest.execute`, the host executor's signature). Families that run
the host's programs (cmd, fio) see the host's root read-only over virtio-9p.

What the run records besides (docs/vm.md): the guest's facts in its environment, the VM mode in its parameters
(`vm`), so figures of a guest are never grouped with the host's or another mode's, and under icount every
sample exact by construction, its unit saying instruction-time.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import ClassVar
from pathlib import Path

from perflab.core import cbuild
from perflab.core.errors import PerflabError, UsageProblem
from perflab.core.model import Sample
from perflab.core.process import ProcessResult, ProcessSpec
from perflab.execution.targets import (HOST_PROGRAMS, HOST_TOOLS, INSTRUCTION_COUNTS, WRITABLE_HOST_TREE, Executor,
                                      Opening, PerfThere, Place, RunIn, Target, TargetOption, Toolchain, qemu_guests)
from perflab.core.units import parse_size
from perflab.store.exactness import ICOUNT_MARK
from perflab.execution.vm import MODES, VmError, VmSpec, boot, disk, initramfs, modules, qemu_args_refusal
from perflab.execution.vm import kernel as kernels, remembering
from perflab.execution.vm.hello import environment_facts
from perflab.execution.vm.counting import refusal as counting_refusal
from perflab.execution.vm.machine import (SLOWDOWN, drop_ahead, qemu_binary, qemu_command, start_ahead as boot_ahead,
                                          start_remembered)

VM_KEYS = ("mode", "cpus", "memory", "qemu_args", "guests")     # guests: only when written (qemu_guests)
DEFAULT_VM = {"mode": "tcg", "cpus": 1, "memory": 512, "qemu_args": []}
# Appended to the unit of every sample measured under icount: the honest word for what the
# number is (1 ns per guest instruction: instruction-time, not time). Exactness itself is the
# sample's `exact`, not this word.
ICOUNT_UNIT_SUFFIX = f" {ICOUNT_MARK}"
# The parameter every guest run stores: the key that keeps its figures apart from the host's.
VM_PARAM = "vm"
# The parameter a run on a kernel booted with a command line of its own stores it under.
CMDLINE_PARAM = "cmdline"
# ... and a kernel perflab built from a recipe, its build's name (LOCALVERSION) or key.
BUILD_PARAM = "kernel_build"
# Where the guest mounts the host's root (read-only, 9p) for the jobs that run host programs.
HOST_ROOT = "/host"
# Where the files a session wrote before the run travel in the initramfs (then copied into place).
STAGE = "/opt/perflab/stage"
# Directories the guest agent mounts a file system over: a program put there in the initramfs
# would be hidden, so it goes to GUEST_BIN instead (the one place argv is rewritten).
MOUNTED = ("/tmp/", "/run/", "/proc/", "/sys/", "/dev/")
GUEST_BIN = "/opt/perflab/bin"
BOOT_TIMEOUT_ENV = "PERFLAB_VM_BOOT_TIMEOUT"
# Under icount the agent waits for a quiet kernel before HELLO (agent.c, `settle`): rounds of
# 50,000 getppid() until 5 in a row agree within 500 ppm, for at most 5 s of guest time.
# Measured (issue 33): Debian 6.12.107 is busy for 1.14 s of guest time after boot (getppid
# reads 660-680 ns, then 336 ns), settling in 37 rounds; 6.1.0-47 in 0.19 s (11 rounds); the
# rounds then agree within 0.02%. Without it every boot of 6.12 read the busy figure alike.
SETTLE = {"ppm": 500, "max_ms": 5000, "calls": 50000, "agree": 5}
# Parameters a guest run stores besides its mode when they are not the defaults: whatever
# changes what the guest runs keeps its figures apart (issue 33). Defaults are left out so
# that a series of default guests goes on from the runs stored before these keys existed.
MACHINE_PARAMS = {"cpus": "vm_cpus", "memory": "vm_memory_mib", "qemu_args": "vm_qemu_args"}


def _say(line: str) -> None:
    import sys

    print(f"perflab: {line}", file=sys.stderr, flush=True)


def boot_timeout() -> float:
    """Seconds a guest may take to reach perflab's init on this machine: $PERFLAB_VM_BOOT_TIMEOUT,
    else VmSpec's 60. A property of the box (how loaded, how slow its TCG), not of the job: it
    is not recorded with the run. A TCG boot takes 5-16 s, icount 11-26 s on 2 cores under load."""
    text = os.environ.get(BOOT_TIMEOUT_ENV, "").strip()
    if not text:
        return VmSpec.boot_timeout
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (0 < value < 86400):
        raise UsageProblem(f"${BOOT_TIMEOUT_ENV} = {text!r}: expected seconds, more than 0 and less than a day")
    return value


def machine_of(vm, where: str = "") -> dict:
    """A job's `vm` block as written -> its stored form (every key, memory in MiB, qemu_args a
    list of words); UsageProblem in one line naming the key at fault."""
    at = f"{where}: " if where else ""
    if vm is None:
        vm = {}
    if not isinstance(vm, dict):
        raise UsageProblem(f"{at}key 'vm': expected a mapping ({', '.join(VM_KEYS)})")
    for key in vm:
        if key not in VM_KEYS:
            raise UsageProblem(f"{at}key 'vm.{key}' is unknown; valid: {', '.join(VM_KEYS)}")
    out = {**DEFAULT_VM, **vm}
    if out["mode"] not in MODES:
        raise UsageProblem(f"{at}vm mode {out['mode']!r}: expected one of {', '.join(MODES)}")
    cpus = out["cpus"]
    if isinstance(cpus, bool) or not isinstance(cpus, int) or cpus < 1:
        raise UsageProblem(f"{at}key 'vm.cpus' = {cpus!r}: expected an integer >= 1")
    memory = out["memory"]
    # A bare number is MiB however it is written: 512, "512", 512.0 (issue 31, L4).
    if isinstance(memory, float):
        if not memory.is_integer():
            raise UsageProblem(f"{at}key 'vm.memory' = {memory!r}: expected a whole number of MiB or a size (1G, 512M)")
        memory = int(memory)
    elif isinstance(memory, str) and memory.strip().isdigit():
        memory = int(memory.strip())
    if not (isinstance(memory, int) and not isinstance(memory, bool)):
        try:
            memory = parse_size(memory) >> 20       # "1G", "512M": a size; a bare number is MiB
        except ValueError as e:
            raise UsageProblem(f"{at}key 'vm.memory' = {memory!r}: {e}") from None
    if memory < 64:
        raise UsageProblem(f"{at}key 'vm.memory' = {out['memory']!r}: at least 64 MiB")
    args = out["qemu_args"]
    if isinstance(args, str):
        try:
            args = shlex.split(args)
        except ValueError as e:
            raise UsageProblem(f"{at}key 'vm.qemu_args': {e}") from None
    if not isinstance(args, list) or not all(isinstance(a, (str, int, float)) for a in args):
        raise UsageProblem(f"{at}key 'vm.qemu_args': expected a list of QEMU arguments or one string")
    why = qemu_args_refusal(args)
    if why:
        raise UsageProblem(f"{at}key 'vm.qemu_args': {why}")
    out.update(memory=memory, qemu_args=[str(a) for a in args])
    qemu_guests.check_key(out, at)
    return {k: out[k] for k in VM_KEYS if k in out}


@dataclass
class _Prepared:
    """What entering the session left for the boot: its work directories, as the guest's disks."""

    what: str                                   # the job, as refusals name it
    disks: list = field(default_factory=list)


KERNEL_OPTION = TargetOption(
    "--kernel", "kernel", "PATH",
    "Boot this kernel in a QEMU guest and run the job inside (every family that can run there; a refusal "
    "says why: docs/vm.md): a bzImage/vmlinuz, debian:RELEASE or a recipe (RECIPE.yaml); for bisect, series "
    "and robot the image the build makes, relative to its output directory (e.g. arch/x86/boot/bzImage; "
    "with --on MACHINE the package it leaves, '../linux-image-*.deb'); "
    "for submit a path on the boxes.", name="kernel")
VM_OPTION = TargetOption(
    "--vm", "vm", "[" + "|".join(MODES) + "]",
    "The guest's mode: tcg (emulated, wall time), icount (emulated, instruction-time: exact and repeatable) "
    "or kvm. Needs --kernel (or a job's kernel key); default: the job's vm.mode, else tcg.",
    name="vm_mode", choices=MODES)


@dataclass(frozen=True)
class Qemu(Target):
    """A kernel image booted in QEMU. `vm` is the machine block as the job wrote it (mode, cpus,
    memory, qemu_args; perflab.jobs.guest.normalize makes it whole where a job is made)."""

    kind = "qemu"
    job_keys: ClassVar[tuple[str, ...]] = ("kernel", "vm")
    options: ClassVar[tuple[TargetOption, ...]] = (KERNEL_OPTION, VM_OPTION)
    lacks = {WRITABLE_HOST_TREE: "the guest's view of the host's root is read-only"}
    perf_where = PerfThere(None, HOST_ROOT, "/run/perflab", "/tmp", "this machine's perf, run in the guest over 9p")
    kernel: str = ""            # an image's path, or debian:RELEASE (execution.vm.kernel.image)
    vm: dict = field(default_factory=dict)
    toolchain: Toolchain = field(default_factory=Toolchain)
    cmdline: str = ""           # appended to the guest kernel's command line (a variant: mitigations=off)
    recipe: dict = field(default_factory=dict)   # a kernel perflab builds (execution.vm.recipe), its stored keys

    @classmethod
    def of(cls, kernel: str | dict, vm: dict, toolchain: Toolchain | None = None) -> Qemu:
        """The target of a job's `kernel` key in its stored form (jobs.guest.normalize): a path or
        debian:RELEASE, {image, cmdline}, or a recipe (with its cmdline)."""
        toolchain = toolchain or Toolchain()
        if not isinstance(kernel, dict):
            return cls(kernel=kernel, vm=vm, toolchain=toolchain)
        cmdline = kernel.get("cmdline") or ""
        if "tree" in kernel:          # a recipe: perflab builds the kernel
            return cls(recipe={k: v for k, v in kernel.items() if k != "cmdline"}, vm=vm, toolchain=toolchain,
                       cmdline=cmdline)
        return cls(kernel=kernel.get("image") or "", vm=vm, toolchain=toolchain, cmdline=cmdline)

    @classmethod
    def from_keys(cls, doc: dict, toolchain: Toolchain) -> Qemu | None:
        """The target of a job's `kernel` key (in its stored form; jobs.guest checks it where a job
        is made), None when it names none."""
        if not doc.get("kernel"):
            return None
        return cls.of(doc["kernel"], {} if doc.get("vm") is None else doc["vm"], toolchain)

    @classmethod
    def option_keys(cls, values: dict) -> dict:
        """`--kernel K` -> kernel: K; `--vm MODE` -> vm: {mode: MODE} (the rest of a job's vm block stays)."""
        keys = {"kernel": values["kernel"]} if values.get("kernel") is not None else {}
        return {**keys, **({"vm": {"mode": values["vm_mode"]}} if values.get("vm_mode") else {})}

    @classmethod
    def placed(cls, doc: dict, keys: dict) -> dict:
        """--vm changes the mode of the job's vm block, not the block; --kernel replaces the image,
        and a command line the job's kernel was booted with stays."""
        out = {**doc, **keys}
        if isinstance(doc.get("vm"), dict) and "vm" in keys:
            out["vm"] = {**doc["vm"], **keys["vm"]}
        old = doc.get("kernel")
        if isinstance(keys.get("kernel"), str) and isinstance(old, dict) and "tree" not in old and old.get("cmdline"):
            out["kernel"] = {"image": keys["kernel"], "cmdline": old["cmdline"]}
        return out

    def where_readings(self) -> str | None:
        return None           # a guest's monitor records have always said nothing of where

    def keys(self) -> dict:
        if self.recipe:
            kernel = {**self.recipe, **({"cmdline": self.cmdline} if self.cmdline else {})}
        else:
            kernel = {"image": self.kernel, "cmdline": self.cmdline} if self.cmdline else self.kernel
        return {"kernel": kernel, **({"vm": self.vm} if self.vm else {}), **self.toolchain.keys()}

    @property
    def image(self) -> str:
        """The image file to boot: the path, the Debian kernel fetched into the cache (once), or the
        recipe's build (built once, then from the cache)."""
        if self.recipe:
            from perflab.execution.vm import recipe

            return str(recipe.build(recipe.recipe_of(self.recipe), say=_say).image)
        return str(kernels.image(self.kernel))

    @property
    def machine(self) -> dict:
        """The whole machine block, checked (a stored job's may be anything): UsageProblem in one line."""
        return machine_of(self.vm)

    @property
    def mode(self) -> str:
        # As written, for messages about a block that may not be valid yet.
        return str(self.vm.get("mode", DEFAULT_VM["mode"])) if isinstance(self.vm, dict) else DEFAULT_VM["mode"]

    def describe(self) -> str:
        return f"a VM guest ({self.mode})"

    @property
    def exact_time(self) -> bool:
        return self.mode == "icount"

    def cpus(self) -> int | None:
        return int(self.machine["cpus"])

    def spec(self) -> VmSpec:
        """The VmSpec this target boots."""
        vm = self.machine
        image = self.image
        # A PREEMPT_RT kernel threads the agent's UART interrupt; under TCG its handler runs late,
        # the kernel counts the line as stuck ("irq 3: nobody cared") and disables it mid-transfer
        # (Debian 6.1.0-56-rt reading its 3.9 MB kallsyms under icount). noirqdebug keeps it on.
        append = " ".join(w for w in ("noirqdebug" if kernels.preempt_rt(Path(image)) else "", self.cmdline) if w)
        return VmSpec(kernel=image, append=append, mode=vm["mode"], cpus=int(vm["cpus"]), memory_mib=int(vm["memory"]),
                      qemu_args=tuple(vm["qemu_args"]), boot_timeout=boot_timeout())

    def refusal(self, needs: frozenset[str] | set[str], what: str) -> str | None:
        """Besides what a guest lacks: counted instructions (insn-profile) need TCG, and one thread
        running the vCPUs (icount, or one vCPU); the machine block as written (not yet checked)."""
        why = super().refusal(needs, what)
        if why or INSTRUCTION_COUNTS not in needs:
            return why
        cpus = self.vm.get("cpus", 1) if isinstance(self.vm, dict) else 1
        counting = counting_refusal(self.mode, cpus if isinstance(cpus, int) else 1)
        return f"{what}: {counting}" if counting else None

    def check(self, needs: frozenset[str], what: str, params: dict | None = None) -> None:
        """The family, the kernel file, the machine, the kernel's 9p and file systems where the
        job needs them: PerflabError in one line, before anything is built or booted."""
        super().check(needs, what)
        self.spec().check()          # mode, cpus and memory, the QEMU arguments, the kernel file
        qemu_binary()                # installed
        wanted = ["9p"] if needs & {HOST_PROGRAMS, HOST_TOOLS} else []
        fs = (params or {}).get("fs")
        if isinstance(fs, str) and fs in modules.NEEDS:
            wanted += (["disk"] if fs != "tmpfs" else []) + [fs]
        if wanted:
            modules.plan(self.image, wanted, f"{what} in a VM guest")

    @contextlib.contextmanager
    def preparing(self, needs: frozenset[str], what: str) -> Iterator[_Prepared]:
        """The guest has no C library: programs are built static; the CPUs the session sees
        (will-it-scale's binding, hackbench's placement) are the guest's vCPUs; under icount its
        durations are exact (lmbench's stopping rule); its work directories (fio, aim7, news)
        become the guest's disks."""
        from perflab.core.params import job_cpus, job_time_exact    # YAML: not before a guest can start ahead

        prepared = _Prepared(what)
        with self.toolchain.building(), cbuild.static_programs(), job_cpus(self.cpus()), \
                job_time_exact(self.exact_time), disk.collecting() as disks:
            yield prepared
        prepared.disks = disks

    def share_key(self, needs: frozenset[str], params: dict):
        """Jobs on the same kernel and machine share one boot; a job with a file system of its
        own (`fs:`) gets a fresh guest, so that no job's files or page cache meet another's."""
        if params.get("fs"):
            return None
        # Counting instructions slows TCG: a guest that counts is not shared with one that does not.
        return ("qemu", os.path.realpath(self.image), self.cmdline, repr(sorted(self.machine.items())),
                INSTRUCTION_COUNTS in needs)

    def _boot_of(self, openings: list[Opening]):    # open()'s spec, boot() keywords, plan, files, rooted, staged, disks
        spec = self.spec()
        what = openings[0].prepared.what if len(openings) == 1 else f"{len(openings)} jobs"
        disks = [d for o in openings for d in o.prepared.disks]
        rooted = [HOST_PROGRAMS in o.needs for o in openings]
        # The host's root is shared for jobs that run its programs, and for monitors that run its perf.
        shared = any(rooted) or any(HOST_TOOLS in o.needs for o in openings)
        plan = modules.plan(spec.kernel, _modules_needed(shared, disks), f"{what} in a VM guest",
                            cmdline=" ".join(qemu_append(spec)))
        files: list[dict[str, str]] = []
        boot_files: dict[str, str] = {}
        for o, host_programs in zip(openings, rooted):
            files.append({} if host_programs else _placed(files_of(o.session, o.rounds), boot_files))
            boot_files.update(files[-1])
        staged = {f"{STAGE}{path}": data for d in disks for path, data in d.staged().items()}
        setup = [*modules.setup_lines(plan), *disk.setup_lines(disks)]
        if shared:
            setup += modules.share_root_lines(HOST_ROOT)
        if self.exact_time:
            # Last, once the devices are up: the first sample must read what the fifth does.
            setup.append("settle {ppm} {max_ms} {calls} {agree}".format(**SETTLE))
            spec = replace(spec, boot_timeout=spec.boot_timeout + SETTLE["max_ms"] / 1000 * SLOWDOWN["icount"])
        spec = replace(spec, share_root=shared, drives=tuple(d.image for d in disks if d.image),
                       count_instructions=any(INSTRUCTION_COUNTS in o.needs for o in openings))
        boot_with = {"files": {**boot_files, **plan.files()}, "setup": setup, "data": {**staged, **plan.data()}}
        return spec, boot_with, plan, files, rooted, staged, disks

    def start_ahead(self, needs: frozenset[str], what: str, params: dict | None = None):
        """A lone job's guest, started before its run is set up when its needs decide the boot (docs/vm.md)."""
        debian, path = self.kernel.startswith(kernels.DEBIAN), os.path.abspath(os.path.expanduser(self.kernel))
        here = kernels.cached(kernels.debian_package(self.kernel)) if debian else os.path.isfile(path)
        if not here or self.recipe or HOST_PROGRAMS not in needs or (params or {}).get("fs"):
            return None
        target = self if debian else replace(self, kernel=path)     # as a job stores it (jobs.guest.kernel_of)
        remember = remembering.inputs(target.image, target.machine, target.cmdline, needs, (Path(__file__),))
        if remember is None or not start_remembered(remember):
            spec, boot_with, *_ = target._boot_of([Opening(_Prepared(what), None, 0, needs)])
            boot_ahead(spec, **boot_with, remember=remember)
        return drop_ahead

    @contextlib.contextmanager
    def open(self, openings: list[Opening], execute: Executor) -> Iterator[Place]:
        """Boot the kernel once with every opening's programs; each job's processes run in the guest."""
        spec, boot_with, plan, files, rooted, staged, disks = self._boot_of(openings)
        # Under icount, a boot for jobs that run side by side may be several guests (qemu_guests).
        with qemu_guests.boot_guests(boot, spec, self.machine, openings, bool(disks), **boot_with) as (guests, facts):
            facts = {**environment_facts(facts), "kernel_cmdline": " ".join(qemu_append(spec)),
                     "guest_modules": " ".join(p.stem for p in plan.load)}
            if plan.load:
                facts["guest_module_signatures"] = plan.signature_fact()
            yield _GuestPlace(guests, facts, openings, files, rooted, staged)

    def params(self, params: dict) -> dict:
        machine = self.machine
        differ = {MACHINE_PARAMS[k]: (" ".join(machine[k]) if k == "qemu_args" else machine[k])
                  for k in MACHINE_PARAMS if machine[k] != DEFAULT_VM[k]}
        # The guest's command line is a variant of its own (`compare cmdline=mitigations=off ...`).
        return {**params, VM_PARAM: self.mode, **differ, **({CMDLINE_PARAM: self.cmdline} if self.cmdline else {}),
                **({BUILD_PARAM: self._build_name()} if self.recipe else {})}

    def _build_name(self) -> str:
        """What keeps a recipe's runs apart: its name, else its key (what decides the build)."""
        from perflab.execution.vm import recipe

        r = recipe.recipe_of(self.recipe)
        return r.name or recipe.identity(r)[2]

    def facts(self) -> dict:
        if not self.recipe:
            return super().facts()
        from perflab.execution.vm import recipe

        done = recipe.built(recipe.recipe_of(self.recipe))
        return {**super().facts(), **(done.facts if done else {})}

    def mark(self, samples: list[Sample]) -> list[Sample]:
        """Under icount every figure is instruction-time: exact by construction, its unit says so."""
        if not self.exact_time:
            return samples
        return [replace(s, unit=s.unit if s.unit.endswith(ICOUNT_UNIT_SUFFIX) else s.unit + ICOUNT_UNIT_SUFFIX,
                        exact=True) for s in samples]

    def unopened_facts(self) -> dict:
        vm = self.machine
        return {"vm_mode": str(vm["mode"]), "vm_cpus": str(vm["cpus"]), "vm_memory_mib": str(vm["memory"]),
                "kernel_path": str(self.kernel) or json.dumps(self.recipe, sort_keys=True),
                "host_kernel": os.uname().release}


# A shared boot's state outside the jobs' own directories is read before each job by the agent
# itself (Guest.state): the mount table, then the files of the initramfs's root (not /tmp, /run,
# /proc, the host's root or a disk) modified since the first read; what was already that new at
# the first job is in both readings, and so no change.
# What the fact names of a change, at most.
CHANGES_SHOWN = 8


@dataclass(frozen=True)
class GuestState:
    """What of a booted guest a job could change for the jobs after it: mounts (mount point,
    what is mounted: the file system's root there, its type and source) and changed files."""

    mounts: frozenset
    files: frozenset

    @classmethod
    def parse(cls, text: str) -> GuestState:
        table, _, listing = text.partition("@@files")
        mounts = set()
        for line in table.splitlines():
            head, sep, tail = line.partition(" - ")
            words, rest = head.split(), tail.split()
            if sep and len(words) >= 5 and len(rest) >= 2:
                mounts.add((words[4], words[3], rest[0], rest[1]))
        return cls(frozenset(mounts), frozenset(line for line in listing.splitlines() if line.startswith("/")))

    def changes(self, before: GuestState, own: tuple[str, ...]) -> list[str]:
        """What differs from `before`, as phrases; files under `own` (the jobs' directories) are theirs."""
        out = [f"mount on {point} ({fstype} {source}, {root})" for point, root, fstype, source
               in sorted(self.mounts - before.mounts)]
        out += [f"unmounted {point}" for point in sorted({m[0] for m in before.mounts} - {m[0] for m in self.mounts})]
        out += [f"file {path}" for path in sorted(self.files - before.files)
                if not any(path == d or path.startswith(d.rstrip("/") + "/") for d in own)]
        return out


class _GuestPlace(Place):
    """A booted guest shared by the jobs it was opened for, in their order: each job gets an
    executor of its own (its programs' guest paths, its root, its directories) and records
    which of the boot's jobs it was, since what ran before it in the guest is part of its state.
    Guests side by side (qemu_guests): a job that runs side by side gets one executor per guest.

    In a boot of several jobs, the guest's mounts and the files of its root outside the jobs'
    own directories are read before each job: a job that changed them (a bind mount over a
    program, a replaced file) left a guest the next job would run on unknowingly (issue 45,
    G6). The jobs after it record what changed (`vm_guest_changed`), and a line says so."""

    def __init__(self, guests: list, facts: dict, openings: list[Opening], files: list[dict], rooted: list[bool],
                 staged: dict):
        super().__init__(self._unadmitted, facts)
        self.guests, self.openings, self.files, self.rooted, self.staged = guests, openings, files, rooted, staged
        self.executors: list[_GuestExecutor] = []
        self.first_state: list[GuestState | None] | None = None
        self.checked_at = 0            # the job before which the guest was last found as it was

    def _unadmitted(self, spec, **kwargs):
        raise RuntimeError("a guest's processes start through the executor admit() gives")

    def _changed(self, index: int) -> str | None:
        """What the boot's earlier jobs changed (a phrase naming them), or None."""
        states = [GuestState.parse(g.state()) for g in self.guests]
        if self.first_state is None:
            self.first_state = states
            return None
        own = tuple({d for e in self.executors for d in e.made} | {d.path for e in self.executors for d in e.disks})
        changes = list(dict.fromkeys(c for now, first in zip(states, self.first_state) if now and first
                                     for c in now.changes(first, own)))
        if not changes:
            self.checked_at = index
            return None
        jobs = list(range(self.checked_at + 1, index + 1))
        by = f"job {jobs[0]}" if len(jobs) == 1 else f"jobs {jobs[0]}-{jobs[-1]}"
        shown = "; ".join(changes[:CHANGES_SHOWN]) + (f"; and {len(changes) - CHANGES_SHOWN} more"
                                                       if len(changes) > CHANGES_SHOWN else "")
        return f"by {by} of this boot: {shown}"

    def admit(self, index: int) -> RunIn:
        o = self.openings[index]
        changed = self._changed(index) if len(self.openings) > 1 else None
        runs = [_GuestExecutor(g, self.files[index], self.rooted[index], o.prepared.disks, self.staged)
                for g in (self.guests if o.side_by_side else self.guests[:1])]
        self.executors += runs
        if changed:
            _say(f"job {index + 1} of {len(self.openings)} in this boot runs in a guest changed {changed}")
        pooled = qemu_guests.pooled(runs, o.session)
        return RunIn(pooled.execute, together=pooled.together if len(runs) > 1 else None, facts={
            **self.facts,
            "guest_programs": ("the host's, over 9p (read-only root, chroot)" if self.rooted[index]
                               else "static (-static)"),
            # Which job of the boot this was (the openings are in the order the jobs run): 1 of 1
            # for a guest of its own.
            "vm_boot_job": str(index + 1), "vm_boot_jobs": str(len(self.openings)),
            **({"vm_guest_changed": changed} if changed else {})})


class _GuestExecutor:
    """Runs a session's processes in a booted guest: its directories made on first use."""

    def __init__(self, guest, files: dict[str, str], rooted: bool, disks: list, staged: dict):
        self.guest, self.files, self.rooted, self.disks = guest, files, rooted, disks
        self.root = HOST_ROOT if rooted else ""
        self.made: set[str] = set()
        for d in disks:      # in the initramfs, where the staged files are (busybox's cp)
            guest.make_directory(d.path)
            self.made.add(d.path)
            if any(path.startswith(f"{STAGE}{d.path}/") for path in staged):
                self._run(["/bin/cp", "-R", f"{STAGE}{d.path}/.", d.path], f"copy the run's files into {d.path}",
                          root="")

    def _run(self, argv: list[str], what: str, root: str | None = None) -> None:
        done = self.guest.execute(ProcessSpec(argv, item=what, timeout=120), root=self.root if root is None else root)
        if not done.ok:
            raise VmError(f"cannot {what} in the guest: {done.describe_failure(120)}", self.guest.console_tail())

    def execute(self, spec: ProcessSpec, **kwargs) -> ProcessResult:
        if self.rooted and spec.cwd is None:
            # A host program runs where perflab was started, as on the host (`./prog.sh`): the
            # host's directories are the guest's over 9p, but for those the guest mounts its
            # own (/tmp, /run ...), where it stays at / (issue 31, M5; docs/vm.md).
            here = os.getcwd()
            if not (here + "/").startswith(MOUNTED) and here != "/":
                spec = replace(spec, cwd=here)
                self.made.add(here)     # it exists: the host's, read-only
        # The session's directories were made on the host; the guest needs its own.
        if spec.cwd and spec.cwd not in self.made:
            self.guest.make_directory(spec.cwd, self.root)
            self.made.add(spec.cwd)
        if self.files:
            spec = replace(spec, argv=_rewrite(spec.argv, self.files))
        return self.guest.execute(spec, root=self.root, **kwargs)


def guest_path(program: str) -> str:
    """Where a host program is put in the guest: the same path, unless the guest mounts over it."""
    return f"{GUEST_BIN}/{os.path.basename(program)}" if program.startswith(MOUNTED) else program


def files_of(session, rounds: int) -> dict[str, str]:
    """The host programs a session's processes start (argv[0], and static programs named as
    arguments, like aim7's helper): guest path -> host file."""
    files: dict[str, str] = {}
    for round_no in range(rounds):
        for spec in session.processes(round_no):
            for i, word in enumerate(spec.argv):
                if not (os.path.isabs(word) and os.path.isfile(word)) or guest_path(word) in files:
                    continue
                if initramfs.is_static(word):
                    files[guest_path(word)] = word
                elif i == 0:
                    raise PerflabError(f"{word} is not a static program: it cannot run in the guest")
    return files


def _placed(wanted: dict[str, str], taken: dict[str, str]) -> dict[str, str]:
    """A session's programs (guest path -> host file) where they go in a guest that also holds
    `taken`: a program whose guest path another session's different program holds moves to a
    directory of its own under GUEST_BIN."""
    out: dict[str, str] = {}
    for path, host in wanted.items():
        n = 0
        while taken.get(path, host) != host or out.get(path, host) != host:
            n += 1
            path = f"{GUEST_BIN}/{n}/{os.path.basename(host)}"
        out[path] = host
    return out


def _rewrite(argv: list[str], files: dict[str, str]) -> list[str]:
    moved = {host: path for path, host in files.items() if path != host}
    return [moved.get(word, word) for word in argv]


def _modules_needed(rooted: bool, disks: list) -> list[str]:
    needs = ["9p"] if rooted else []
    if any(d.image for d in disks):
        needs.append("disk")
    return needs + sorted({d.fstype for d in disks if d.fstype})


def qemu_append(spec) -> list[str]:
    """The guest kernel's command line, as QEMU gives it (execution.vm.machine.qemu_command)."""
    words = qemu_command("qemu", spec, "initrd", "console")
    return words[words.index("-append") + 1].split()

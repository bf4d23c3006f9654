"""An atomic job with a kernel: boot it once, and let the one loop run the job inside.

The runner enters a guest job's family session with its C programs built static
(`cbuild.static_programs`), boots the kernel with those programs in the initramfs at
the very paths the session's ProcessSpecs name (or, for a path under a directory the guest
mounts over such as /tmp, in /opt/perflab/bin: the one place argv is rewritten), and hands
the loop an executor that makes a process's working directory in the guest on first
use, then runs it there (`Guest.execute`, the host executor's signature). Warm-up,
repetitions, parsing and recording are the loop's, unchanged.

What the run records besides (docs/vm.md): the guest's facts in its environment, the
VM mode in its parameters (`vm`), so figures of a guest are never grouped with the
host's or another mode's, and under icount every sample's unit marked instruction-time.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import replace

from perflab.core import cbuild
from perflab.core.errors import PerflabError
from perflab.core.model import Sample
from perflab.core.params import job_cpus
from perflab.core.process import ProcessResult, ProcessSpec
from perflab.execution.vm import VmError, boot, disk, initramfs, modules
from perflab.execution.vm.machine import qemu_command
from perflab.jobs import guest as guest_keys

# Appended to the unit of every sample measured under icount: its durations are
# instruction counts (1 ns per guest instruction), not time.
ICOUNT_UNIT_SUFFIX = " (icount)"
# Parameters every guest run stores: the key that keeps its figures apart from the host's.
VM_PARAM = "vm"


def check(jobs) -> None:
    """Refuse, before anything is built or booted, a guest job that cannot run (one line)."""
    for job in jobs:
        if job.in_guest:
            guest_keys.check(job)


@contextlib.contextmanager
def preparing(job) -> Iterator[None]:
    """While a job's session is entered: a guest job's C programs are built static (the guest
    has no C library), and the CPUs its session sees (will-it-scale's binding, hackbench's
    one-cpu placement) are the guest's vCPUs, not the host's. A host job: nothing changes."""
    if not job.in_guest:
        yield
        return
    # Work directories (fio, aim7, news) become the guest's disks, listed for booted().
    with cbuild.static_programs(), job_cpus(guest_keys.cpus_of(job)), disk.collecting() as disks:
        yield
    _DISKS[id(job)] = disks


# A guest job's disks, from preparing() (its session's work directories) to booted().
_DISKS: dict[int, list] = {}
# Where the guest mounts the host's root (read-only, 9p) for the jobs that run host programs.
HOST_ROOT = "/host"
# Where the files a session wrote before the run travel in the initramfs (then copied into place).
STAGE = "/opt/perflab/stage"


# Directories the guest agent mounts a file system over: a program put there in the initramfs
# would be hidden, so it goes to GUEST_BIN instead (the one place argv is rewritten).
MOUNTED = ("/tmp/", "/run/", "/proc/", "/sys/", "/dev/")
GUEST_BIN = "/opt/perflab/bin"


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


def _rewrite(argv: list[str], files: dict[str, str]) -> list[str]:
    moved = {host: path for path, host in files.items() if path != host}
    return [moved.get(word, word) for word in argv]


@contextlib.contextmanager
def booted(job, session, rounds: int) -> Iterator[tuple[dict, callable]]:
    """Boot the job's kernel with its session's programs: (facts for the environment, executor)."""
    spec = guest_keys.spec_of(job)
    disks = _DISKS.pop(id(job), [])
    rooted = guest_keys.runs_host_programs(job.benchmark)
    plan = modules.plan(spec.kernel, _needs(rooted, disks), f"{job.benchmark} in a VM guest")
    files = {} if rooted else files_of(session, rounds)
    staged = {f"{STAGE}{path}": data for d in disks for path, data in d.staged().items()}
    setup = [*modules.setup_lines(plan), *disk.setup_lines(disks)]
    if rooted:
        setup += modules.share_root_lines(HOST_ROOT)
    spec = replace(spec, share_root=rooted, drives=tuple(d.image for d in disks if d.image))
    with boot(spec, files={**files, **plan.files()}, setup=setup, data=staged) as guest:
        root = HOST_ROOT if rooted else ""
        made: set[str] = set()

        def run(argv: list[str], what: str, root: str = root) -> None:
            done = guest.execute(ProcessSpec(argv, item=what, timeout=120), root=root)
            if not done.ok:
                raise VmError(f"cannot {what} in the guest: {done.describe_failure(120)}", guest.console_tail())

        for d in disks:      # busybox's mkdir and cp, in the initramfs, where the staged files are
            run(["/bin/mkdir", "-p", d.path], f"make {d.path}", root="")
            made.add(d.path)
            if any(path.startswith(f"{STAGE}{d.path}/") for path in staged):
                run(["/bin/cp", "-R", f"{STAGE}{d.path}/.", d.path], f"copy the run's files into {d.path}", root="")

        def execute(spec: ProcessSpec, **kwargs) -> ProcessResult:
            if rooted and spec.cwd is None:
                # A host program runs where perflab was started, as on the host (`./prog.sh`): the
                # host's directories are the guest's over 9p, but for those the guest mounts its
                # own (/tmp, /run ...), where it stays at / (issue 31, M5; docs/vm.md).
                here = os.getcwd()
                if not (here + "/").startswith(MOUNTED) and here != "/":
                    spec = replace(spec, cwd=here)
                    made.add(here)     # it exists: the host's, read-only
            # The session's directories were made on the host; the guest needs its own.
            if spec.cwd and spec.cwd not in made:
                run(["/bin/mkdir", "-p", spec.cwd], f"make {spec.cwd}")
                made.add(spec.cwd)
            if files:
                spec = replace(spec, argv=_rewrite(spec.argv, files))
            return guest.execute(spec, root=root, **kwargs)

        programs = "the host's, over 9p (read-only root, chroot)" if rooted else "static (-static)"
        yield {**environment_facts(guest.facts), "kernel_cmdline": " ".join(qemu_append(spec)),
               "guest_programs": programs, "guest_modules": " ".join(p.stem for p in plan.load)}, execute


def _needs(rooted: bool, disks: list) -> list[str]:
    needs = ["9p"] if rooted else []
    if any(d.image for d in disks):
        needs.append("disk")
    return needs + sorted({d.fstype for d in disks if d.fstype})


def environment_facts(facts: dict) -> dict:
    """The guest's facts, over the host's where the run's environment names the system under test.

    A guest run measured the guest's kernel: `kernel_release` (what `compare kernel=...`
    selects by), `kernel_version`, the CPU model, cores and threads and the memory are the guest's;
    the host's stay beside them as host_*.
    """
    out = dict(facts)
    for key, value in (("kernel_release", facts.get("guest_kernel_release")),
                       ("kernel_version", facts.get("guest_kernel_version")),
                       ("cpu_model", facts.get("vm_cpu_model")), ("cpu_threads", int(facts.get("vm_cpus") or 0)),
                       # QEMU's -smp N: N single-threaded vCPUs, so as many cores as threads.
                       ("cpu_cores", int(facts.get("vm_cpus") or 0)),
                       ("memory_kib", int(facts.get("vm_memory_mib") or 0) * 1024)):
        if value:
            out[key] = value
    return out


def qemu_append(spec) -> list[str]:
    """The guest kernel's command line, as QEMU gives it (execution.vm.machine.qemu_command)."""
    words = qemu_command("qemu", spec, "initrd", "console")
    return words[words.index("-append") + 1].split()


def params_of(job, params: dict) -> dict:
    """The run's stored parameters: a guest run's say its VM mode."""
    if not job.in_guest:
        return params
    return {**params, VM_PARAM: (job.vm or {}).get("mode", "tcg")}


def mark(job, samples: list[Sample]) -> list[Sample]:
    """Samples as stored: under icount, units say the figures are instruction-time."""
    if not job.in_guest or (job.vm or {}).get("mode") != "icount":
        return samples
    return [replace(s, unit=s.unit + ICOUNT_UNIT_SUFFIX) if not s.unit.endswith(ICOUNT_UNIT_SUFFIX) else s
            for s in samples]


def unbooted_facts(job) -> dict:
    """What a run whose guest never came up records of it: the machine it tried to boot."""
    spec = guest_keys.spec_of(job)
    return {"vm_mode": spec.mode, "vm_cpus": str(spec.cpus), "vm_memory_mib": str(spec.memory_mib),
            "kernel_path": str(spec.kernel), "host_kernel": os.uname().release}

"""The `kernel:` and `vm:` job keys: a job that boots a kernel in QEMU and runs inside it.

    kernel: /boot/vmlinuz-6.1.0-47-amd64   # a bzImage/vmlinuz (absolute once validated)
    vm:
      mode: icount                         # tcg (default) | icount | kvm
      cpus: 2                              # vCPUs (default 1)
      memory: 1G                           # MiB as a number, or a size (default 512)
      qemu_args: [-machine, q35]           # appended to QEMU's command line (a list or one string)

`normalize` checks the keys' shape where a job is made (job file, `--kernel`/`--vm`, code)
and gives the stored form: the absolute kernel path and the full `vm` block. `check`
runs once more before anything boots, in the runner: the kernel file exists, QEMU is
installed, the family can run in a guest. Every error is one line.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from perflab.benchmarks.base import JobError
from perflab.core.units import parse_size
from perflab.execution.vm import MODES, VmSpec, qemu_args_refusal

VM_KEYS = ("mode", "cpus", "memory", "qemu_args")
DEFAULT_VM = {"mode": "tcg", "cpus": 1, "memory": 512, "qemu_args": []}

# Families that run in a guest. Most run in perflab's own root (their C programs built
# static, in the initramfs); those in HOST_PROGRAMS run the host's programs, from the host's
# root shared read-only over virtio-9p. fio, aim7 and news work on a virtio disk (`fs:`).
GUEST_FAMILIES = ("lmbench", "will-it-scale", "ebizzy", "hackbench", "cmd", "fio", "aim7", "news")
HOST_PROGRAMS = ("cmd", "fio")
# Why the others cannot (issue 20): what they need that the guest does not have.
REFUSED = {
    "kernbench": "it builds a kernel tree in place, and the guest's view of the host's root is read-only",
}


def family_refusal(benchmark: str) -> str | None:
    """Why `benchmark` cannot run in a guest (one line), or None when it can."""
    if benchmark in GUEST_FAMILIES:
        return None
    reason = REFUSED.get(benchmark, "it is not one of the families that run in a guest")
    return f"{benchmark} cannot run in a VM guest: {reason} (guest families: {', '.join(GUEST_FAMILIES)})"


def normalize(benchmark: str, kernel, vm, where: str = "job", monitors: dict | None = None) -> tuple[str | None, dict]:
    """(kernel, vm) as written -> their stored form; JobError (one line) naming the key."""
    if kernel is None:
        if vm:
            raise JobError(f"{where}: key 'vm' needs a kernel to boot (key 'kernel' or --kernel PATH)")
        return None, {}
    if not isinstance(kernel, str) or not kernel.strip():
        raise JobError(f"{where}: key 'kernel' = {kernel!r}: expected the path of a kernel image (bzImage, vmlinuz)")
    why = family_refusal(benchmark)
    if why:
        raise JobError(f"{where}: {why}")
    if monitors:
        raise JobError(f"{where}: monitors watch the host, not the guest: a job with a kernel takes none")
    if vm is None:
        vm = {}
    if not isinstance(vm, dict):
        raise JobError(f"{where}: key 'vm': expected a mapping (mode, cpus, memory, qemu_args)")
    for key in vm:
        if key not in VM_KEYS:
            raise JobError(f"{where}: key 'vm.{key}' is unknown; valid: {', '.join(VM_KEYS)}")
    out = {**DEFAULT_VM, **vm}
    if out["mode"] not in MODES:
        raise JobError(f"{where}: vm mode {out['mode']!r}: expected one of {', '.join(MODES)}")
    cpus = out["cpus"]
    if isinstance(cpus, bool) or not isinstance(cpus, int) or cpus < 1:
        raise JobError(f"{where}: key 'vm.cpus' = {cpus!r}: expected an integer >= 1")
    memory = out["memory"]
    # A bare number is MiB however it is written: 512, "512", 512.0 (issue 31, L4).
    if isinstance(memory, float):
        if not memory.is_integer():
            raise JobError(f"{where}: key 'vm.memory' = {memory!r}: expected a whole number of MiB or a size (1G, 512M)")
        memory = int(memory)
    elif isinstance(memory, str) and memory.strip().isdigit():
        memory = int(memory.strip())
    if not (isinstance(memory, int) and not isinstance(memory, bool)):
        try:
            memory = parse_size(memory) >> 20       # "1G", "512M": a size; a bare number is MiB
        except ValueError as e:
            raise JobError(f"{where}: key 'vm.memory' = {memory!r}: {e}") from None
    if memory < 64:
        raise JobError(f"{where}: key 'vm.memory' = {out['memory']!r}: at least 64 MiB")
    args = out["qemu_args"]
    if isinstance(args, str):
        try:
            args = shlex.split(args)
        except ValueError as e:
            raise JobError(f"{where}: key 'vm.qemu_args': {e}") from None
    if not isinstance(args, list) or not all(isinstance(a, (str, int, float)) for a in args):
        raise JobError(f"{where}: key 'vm.qemu_args': expected a list of QEMU arguments or one string")
    why = qemu_args_refusal(args)
    if why:
        raise JobError(f"{where}: key 'vm.qemu_args': {why}")
    out.update(memory=memory, qemu_args=[str(a) for a in args])
    return os.path.abspath(os.path.expanduser(kernel)), {k: out[k] for k in VM_KEYS}


def cpus_of(job) -> int | None:
    """The vCPUs a job's guest boots with (what `nr_task: 50%` is a share of); None for a host job."""
    if not job.in_guest:
        return None
    return int({**DEFAULT_VM, **(job.vm or {})}["cpus"])


BOOT_TIMEOUT_ENV = "PERFLAB_VM_BOOT_TIMEOUT"


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
        raise JobError(f"${BOOT_TIMEOUT_ENV} = {text!r}: expected seconds, more than 0 and less than a day")
    return value


def spec_of(job) -> VmSpec:
    """The VmSpec an atomic job with a kernel boots."""
    vm = {**DEFAULT_VM, **(job.vm or {})}
    return VmSpec(kernel=job.kernel, mode=vm["mode"], cpus=int(vm["cpus"]), memory_mib=int(vm["memory"]),
                  qemu_args=tuple(vm["qemu_args"]), boot_timeout=boot_timeout())


def runs_host_programs(benchmark: str) -> bool:
    """Whether the family's processes are the host's programs (run from the host's root over 9p)."""
    return benchmark in HOST_PROGRAMS


def check(job) -> None:
    """Before anything boots: the family, the kernel file, the machine, the kernel's 9p and
    file systems where the job needs them; PerflabError in one line."""
    from perflab.execution.vm import modules
    from perflab.execution.vm.machine import qemu_binary

    why = family_refusal(job.benchmark)
    if why:
        raise JobError(why)
    spec_of(job).check()          # mode, cpus and memory, the kernel file
    qemu_binary()                 # installed
    needs = ["9p"] if runs_host_programs(job.benchmark) else []
    fs = (job.params or {}).get("fs")
    if isinstance(fs, str) and fs in modules.NEEDS:
        needs += (["disk"] if fs != "tmpfs" else []) + [fs]
    if needs:
        modules.plan(job.kernel, needs, f"{job.benchmark} in a VM guest")


def file_overrides(path, overrides, kernel: str | None, vm: dict | None) -> list[str]:
    """`--set` overrides that put a job file's jobs into a guest (`--kernel`, `--vm`) *before*
    the file is expanded: its points are then worked out with the guest's vCPUs (`nr_task:
    [1, 50%, 100%]` in a 1-vCPU guest is one job), as when the file names the kernel itself.
    `--vm` changes only the mode of the file's `vm:` block."""
    import json

    import yaml

    if kernel is None and not vm:
        return list(overrides)
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        doc = None            # load_atomic says what is wrong with the file, in one line
    file_vm = doc.get("vm") if isinstance(doc, dict) and isinstance(doc.get("vm"), dict) else {}
    extra = [f"kernel={json.dumps(str(kernel))}"] if kernel is not None else []
    if vm or file_vm:
        extra.append(f"vm={json.dumps({**file_vm, **(vm or {})})}")
    return [*overrides, *extra]

"""The `kernel:` and `vm:` job keys: a job that boots a kernel in QEMU and runs inside it.

    kernel: /boot/vmlinuz-6.1.0-47-amd64   # a bzImage/vmlinuz (absolute once validated)
    vm:
      mode: icount                         # tcg (default) | icount | kvm
      cpus: 2                              # vCPUs (default 1)
      memory: 1G                           # MiB as a number, or a size (default 512)
      qemu_args: [-machine, q35]           # appended to QEMU's command line (a list or one string)

`normalize` checks the keys' shape where a job is made (job file, `--kernel`/`--vm`, code)
and gives the stored form: the absolute kernel path and the full `vm` block, read into the
job's typed target (perflab.execution.targets.qemu.Qemu). The target checks once more before
anything boots, in the runner: the kernel file exists, QEMU is installed, the family can
run in a guest. Every error is one line.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from perflab.benchmarks.base import JobError
from perflab.core.errors import PerflabError
from perflab.core.units import parse_size
from perflab.execution.vm import MODES, qemu_args_refusal

from perflab.execution.targets import qemu
from perflab.execution.targets.qemu import BOOT_TIMEOUT_ENV, DEFAULT_VM, VM_KEYS, Qemu  # noqa: F401


def boot_timeout() -> float:
    """The box's boot timeout (perflab.execution.targets.qemu.boot_timeout), a JobError when set wrong."""
    try:
        return qemu.boot_timeout()
    except PerflabError as e:
        raise JobError(str(e)) from None


def refusal(benchmark: str, target, monitors: dict | None, where: str) -> str | None:
    """Why a job of `benchmark` watched by `monitors` cannot run in `target` (one line), or None:
    what the family needs against what the target offers, then its instruments against the target."""
    from perflab import benchmarks
    from perflab.execution import instruments
    from perflab.monitors.instrument import Monitors

    if benchmark in benchmarks.FAMILIES:
        why = target.refusal(benchmarks.family(benchmark).needs, benchmark)
        if why:
            return why
    try:
        instruments.check((Monitors(monitors),) if monitors else (), target, where)
    except PerflabError as e:
        return str(e)
    return None


def normalize(benchmark: str, kernel, vm, where: str = "job", monitors: dict | None = None) -> tuple[str | None, dict]:
    """(kernel, vm) as written -> their stored form; JobError (one line) naming the key."""
    if kernel is None:
        if vm:
            raise JobError(f"{where}: key 'vm' needs a kernel to boot (key 'kernel' or --kernel PATH)")
        return None, {}
    if not isinstance(kernel, str) or not kernel.strip():
        raise JobError(f"{where}: key 'kernel' = {kernel!r}: expected the path of a kernel image (bzImage, vmlinuz)")
    why = refusal(benchmark, Qemu(kernel=kernel, vm=vm if isinstance(vm, dict) else {}), monitors, where)
    if why:
        raise JobError(why if why.startswith(where) else f"{where}: {why}")
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

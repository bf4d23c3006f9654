"""The `kernel:` and `vm:` job keys: a job that boots a kernel in QEMU and runs inside it.

    kernel: /boot/vmlinuz-6.1.0-47-amd64   # a bzImage/vmlinuz (absolute once validated)
    kernel: debian:6.1.0-56-rt-amd64       # Debian's kernel of that release, fetched once
    kernel: {image: debian:6.1.0-56-amd64, cmdline: mitigations=off}   # a boot option, a variant
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
from pathlib import Path

from perflab.benchmarks.base import JobError
from perflab.core.errors import PerflabError, UsageProblem

from perflab.execution.targets import qemu
from perflab.execution.targets.qemu import BOOT_TIMEOUT_ENV, Qemu  # noqa: F401 (BOOT_TIMEOUT_ENV: re-exported)


def boot_timeout() -> float:
    """The box's boot timeout (perflab.execution.targets.qemu.boot_timeout), a JobError when set wrong."""
    try:
        return qemu.boot_timeout()
    except PerflabError as e:
        raise JobError(str(e)) from None


def refusal(benchmark: str, target, monitors: dict | None, where: str) -> str | None:
    """Why a job of `benchmark` watched by `monitors` cannot run in `target` (one line), or None:
    what the family and its monitors need against what the target offers, then its instruments
    against the target."""
    from perflab import benchmarks
    from perflab.execution import instruments
    from perflab.monitors.instrument import Monitors

    watching = (Monitors(monitors),) if monitors else ()
    if benchmark in benchmarks.FAMILIES:
        needs = frozenset(benchmarks.family(benchmark).needs).union(*(m.needs() for m in watching))
        why = target.refusal(needs, benchmark)
        if why:
            return why
    try:
        instruments.check(watching, target, where)
    except PerflabError as e:
        return str(e)
    return None


KERNEL_KEYS = ("image", "cmdline")
# A recipe's keys that may list several values: each value a kernel of the matrix.
RECIPE_AXES = ("ref", "config", "cc", "kcflags", "name", "cmdline")


def variants(kernel) -> list:
    """A kernel key as written -> the kernels it names: a recipe whose `cc:` (ref, config, kcflags,
    name, cmdline) lists several is one kernel per value, as any list in a job file is an axis."""
    import itertools

    if not (isinstance(kernel, dict) and "tree" in kernel):
        return [kernel]
    axes = [[(k, v) for v in kernel[k]] for k in RECIPE_AXES if isinstance(kernel.get(k), list)]
    if not axes:
        return [kernel]
    return [{**kernel, **dict(combo)} for combo in itertools.product(*axes)]


def kernel_of(kernel, where: str = "job") -> tuple[str | dict, str]:
    """`kernel` as written (a path, debian:RELEASE, {image, cmdline} or a recipe) -> (image or recipe,
    cmdline) in their stored form (paths made absolute); JobError in one line naming the key."""
    from perflab.execution.vm.kernel import DEBIAN, debian_package

    if isinstance(kernel, str) and kernel.endswith((".yaml", ".yml")) and os.path.isfile(os.path.expanduser(kernel)):
        from perflab.execution.vm.recipe import read_recipe_file

        try:
            kernel = read_recipe_file(os.path.expanduser(kernel))     # --kernel recipe.yaml
        except UsageProblem as e:
            raise JobError(f"{where}: {e}") from None
    cmdline = ""
    if isinstance(kernel, dict):
        unknown = [k for k in kernel if k not in KERNEL_KEYS]
        if unknown and "tree" not in kernel:
            raise JobError(f"{where}: key 'kernel.{unknown[0]}' is unknown; valid: {', '.join(KERNEL_KEYS)} "
                           "(or a recipe: tree, ref, patches, config, fragments, cc, kcflags, name, cmdline)")
        cmdline = kernel.get("cmdline") or ""
        if not isinstance(cmdline, str) or "\n" in cmdline:
            raise JobError(f"{where}: key 'kernel.cmdline' = {cmdline!r}: expected one line of kernel options")
        cmdline = " ".join(cmdline.split())
        if "tree" in kernel:
            from perflab.execution.vm.recipe import recipe_of

            try:
                return recipe_of(kernel, where).keys(), cmdline
            except UsageProblem as e:
                raise JobError(str(e)) from None
        kernel = kernel.get("image")
    if not isinstance(kernel, str) or not kernel.strip():
        raise JobError(f"{where}: key 'kernel' = {kernel!r}: expected the path of a kernel image (bzImage, vmlinuz) "
                       "or debian:RELEASE")
    if kernel.startswith(DEBIAN):
        try:
            debian_package(kernel)
        except UsageProblem as e:
            raise JobError(f"{where}: {e}") from None
        return kernel, cmdline
    return os.path.abspath(os.path.expanduser(kernel)), cmdline


def stored_kernel(image: str | dict, cmdline: str) -> str | dict:
    """The job's `kernel` key as stored: the image (or recipe) alone, or with its command line."""
    if isinstance(image, dict):
        return {**image, "cmdline": cmdline} if cmdline else image
    return {"image": image, "cmdline": cmdline} if cmdline else image


def normalize(benchmark: str, kernel, vm, where: str = "job", monitors: dict | None = None) -> tuple[str | dict | None, dict]:
    """(kernel, vm) as written -> their stored form; JobError (one line) naming the key."""
    if kernel is None:
        if vm:
            raise JobError(f"{where}: key 'vm' needs a kernel to boot (key 'kernel' or --kernel PATH)")
        return None, {}
    image, cmdline = kernel_of(kernel, where)
    why = refusal(benchmark, Qemu(kernel=image if isinstance(image, str) else "", vm=vm if isinstance(vm, dict) else {}),
                  monitors, where)
    if why:
        raise JobError(why if why.startswith(where) else f"{where}: {why}")
    try:
        machine = qemu.machine_of(vm, where)
    except UsageProblem as e:
        raise JobError(str(e)) from None
    return stored_kernel(image, cmdline), machine


def file_overrides(path, overrides, keys: dict) -> list[str]:
    """`--set` overrides that put a job file's jobs where the targets' options say (`--kernel`,
    `--vm`, `--on`: their job keys, perflab.execution.targets.option_keys) *before* the file is
    expanded: its points are then worked out with the machine's CPUs (`nr_task: [1, 50%, 100%]`
    in a 1-vCPU guest is one job), as when the file names it itself. A mapping changes only
    what it names of the file's (`--vm` the mode of its `vm:` block)."""
    import json

    import yaml

    if not keys:
        return list(overrides)
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        doc = None            # load_atomic says what is wrong with the file, in one line
    doc = doc if isinstance(doc, dict) else {}
    merged = {k: {**doc[k], **v} if isinstance(v, dict) and isinstance(doc.get(k), dict) else v for k, v in keys.items()}
    return [*overrides, *(f"{k}={json.dumps(v)}" for k, v in merged.items())]

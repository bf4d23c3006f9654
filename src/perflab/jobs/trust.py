"""What of a stored job would run code of its own on this machine (docs/lab.md, Security).

A run that came from elsewhere (an import, another box writing the same store) carries a job
someone else wrote. Most of a job is values perflab's own programs take (a test name, a
number of tasks, a guest's machine); some of it is code that runs here, as this user:

- a kernel recipe (`kernel: {tree: ...}`): the compiler is run (`cc --version`), then the
  tree's own Makefile with the recipe's cc, kcflags and config;
- a `cmd` job on the host: its command and its `prepare`;
- a `kernbench` job of a real `tree:` on the host: that tree's Makefile;
- a job's `cc:`/`cflags:`: the compiler (and what its flags load) that builds perflab's C programs.

`host_code` lists those, each as one short phrase that says exactly what would run; the
caller (`perflab rerun`) refuses a job from elsewhere that has any, unless told to trust it.
It reads the job as stored, before anything is built or checked: nothing of it runs here.
"""

from __future__ import annotations

import shlex

from perflab.core.text import printable
from perflab.jobs.job import AtomicJob

# How much of one value a refusal shows: enough to see what it is, bounded for a hostile one.
SHOWN = 300


def _shown(value) -> str:
    return printable(value, SHOWN)


def _params(job: AtomicJob) -> dict:
    params = dict(job.params) if isinstance(job.params, dict) else {}
    nested = params.get(job.benchmark)       # LKP's `cmd: {command: ...}` form
    return {**params, **nested} if isinstance(nested, dict) else params


def host_code(job: AtomicJob, kernel_replaced: bool = False) -> list[str]:
    """What `job` (as stored) would run on this machine besides perflab's own programs: one
    phrase per item, empty when nothing. `kernel_replaced`: the user gave the kernel
    (`rerun --kernel`), so the job's own kernel key does not count and the job runs in a guest."""
    from perflab.execution.targets.qemu import Qemu

    out: list[str] = []
    target = job.target
    in_guest = kernel_replaced or isinstance(target, Qemu)
    if isinstance(target, Qemu) and target.recipe and not kernel_replaced:
        out.append(_recipe_code(target.recipe))
    elif isinstance(target, Qemu) and str(target.kernel).endswith((".yaml", ".yml")) and not kernel_replaced:
        # A recipe written in a file of this machine (`--kernel recipe.yaml`): read, then built.
        out.append(f"the build of the kernel recipe in {_shown(target.kernel)}")
    params = _params(job)
    if not in_guest and job.benchmark == "cmd":
        words = params.get("argv")
        command = shlex.join(map(str, words)) if isinstance(words, list) else params.get("command")
        if command is not None:
            shell = " (through /bin/sh -c)" if params.get("shell") else ""
            out.append(f"the command {_shown(command)}{shell}")
        if params.get("prepare"):
            out.append(f"the prepare command {_shown(params['prepare'])} (through /bin/sh -c)")
    if not in_guest and job.benchmark == "kernbench" and params.get("tree"):
        target_name = f" {params['target']}" if params.get("target") else ""
        out.append(f"make{_shown(target_name)} with the Makefile of {_shown(params['tree'])}")
    toolchain = target.toolchain
    if toolchain.cc or toolchain.cflags:
        out.append(f"the compiler {_shown(toolchain.cc or 'cc')}"
                   + (f" with flags {_shown(toolchain.cflags)}" if toolchain.cflags else "")
                   + " (building perflab's C programs)")
    return out


def _recipe_code(recipe: dict) -> str:
    """A kernel recipe's build as the commands it runs (execution.vm.recipe.build)."""
    cc = str(recipe.get("cc") or "gcc")
    make = f"make CC={shlex.quote(cc)}"
    if recipe.get("kcflags"):
        make += f" KCFLAGS={shlex.quote(str(recipe['kcflags']))}"
    config = recipe.get("config")
    steps = f"{cc} --version, then {make} " + (f"{config} olddefconfig bzImage" if config and "/" not in str(config)
                                              else "olddefconfig bzImage")
    extra = []
    if config and "/" in str(config):
        extra.append(f"config file {config}")
    if recipe.get("fragments"):
        extra.append("config fragments")
    if recipe.get("patches"):
        extra.append(f"{len(recipe['patches'])} patch(es)")
    tree = f"{recipe.get('tree')} at {recipe.get('ref') or 'HEAD'}"
    return (f"the kernel recipe's build in {_shown(tree)}: {_shown(steps)}"
            + (f" ({', '.join(_shown(e) for e in extra)})" if extra else ""))

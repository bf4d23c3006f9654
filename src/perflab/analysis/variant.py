"""What a stored run measured, decoded once: its variant (issue 44, docs/views.md "Variants").

A run's identity is spread over its parameters (`vm`, `vm_cpus`, `vm_memory_mib`,
`vm_qemu_args`, `cmdline`, `kernel_build`: execution.targets.qemu.Qemu.params), its stored job
(`kernel`: a path, debian:RELEASE, {image, cmdline} or a recipe; `vm`) and its environment facts
(`kernel_release`, `kernel_cmdline`, `workdir_fs`, `cc`, `cflags`, a recipe's `kernel_recipe*`
and `kernel_compiler`). `of(run)` reads them into one `Variant`; every view groups and labels
by it instead of testing strings of its own.

Two relations are drawn from a variant:
- `identity`: what was measured and where. Runs whose identities differ are never pooled.
- `line`: the identity without its history dimension (the commit of a tree, the release of
  one kernel line). A series' points share one line; flavours, recipes, boot options, targets,
  file systems are separate lines, never steps of one (`analysis.series`).

Labels are made in analysis.naming (`variant_labels`): the shortest part that tells the
variants shown apart.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

# Debian's kernel ABI names: 6.1.0-56-rt-amd64, 6.12.117+deb13-cloud-amd64 (version, flavour).
_DEBIAN = re.compile(r"^(\d+\.\d+(?:\.\d+)?-\d+|\d+\.\d+\.\d+\+deb\d+(?:u\d+)?(?:\.\d+)?)-([a-z][a-z0-9-]*)$")
# The architecture a Debian flavour ends in: said once, not on every label ("rt", "cloud").
_ARCH_SUFFIXES = ("-amd64", "-arm64", "-686-pae", "-686")
# Parameters that only change how long a run takes, for runs of benchmarks that are not
# one of perflab's families (imported from other tools); a family declares its own.
EXECUTION_PARAMS = frozenset({"runs", "warmup", "timeout", "quick", "repeat", "repetitions", "only", "prepare"})
HOST, GUEST = "host", "guest"
_SHA_PART = re.compile(r"(?<![0-9a-f])[0-9a-f]{40}(?![0-9a-f])")
DEBIAN, RECIPE, IMAGE = "debian", "recipe", "image"
# The parameters a guest run stores about where it ran (execution.targets.qemu): part of the
# variant's target and kernel, not of what the benchmark measured.
TARGET_PARAMS = ("vm", "vm_cpus", "vm_memory_mib", "vm_qemu_args", "cmdline", "kernel_build")
SSH_MACHINE = "on"   # the job key and parameter of a run on an SSH machine (execution.targets.ssh.ON_KEY)


@dataclass(frozen=True)
class Target:
    """Where a run ran: the host, or a QEMU guest (mode, vCPUs, memory in MiB, extra arguments)."""

    kind: str = HOST
    mode: str = ""
    cpus: int | None = None
    memory_mib: int | None = None
    qemu_args: str = ""

    @property
    def guest(self) -> bool:
        return self.kind == GUEST

    @property
    def icount(self) -> bool:
        return self.mode == "icount"


@dataclass(frozen=True)
class Kernel:
    """The kernel a run measured: its release (version and flavour), where it came from, how it
    was built (a recipe's keys, compiler, flags, config), and the command line it was booted with."""

    release: str = ""
    version: str = ""       # the release without its flavour: 6.1.0-56, 6.12.117+deb13, 6.1.192
    flavour: str = ""       # Debian's: amd64, rt-amd64, cloud-amd64; a built kernel's LOCALVERSION
    origin: str = ""        # DEBIAN, RECIPE, IMAGE (another image file), "" for a host's kernel
    image: str = ""         # the job's kernel image (a path, debian:RELEASE), "" for a recipe
    recipe: str = ""        # a recipe's keys as JSON, without its ref (the tree's commit is history)
    ref: str = ""           # a recipe's ref or built commit
    compiler: str = ""      # a recipe's cc
    kcflags: str = ""
    config: str = ""        # a recipe's config (perflab, defconfig, a file)
    fragments: tuple[str, ...] = ()   # a recipe's config fragments: +OPTION, -OPTION, OPTION=v, file names
    patches: tuple[str, ...] = ()
    build: str = ""         # the `kernel_build` parameter (a recipe's name or key)
    config_hash: str = ""   # of the built .config, when recorded
    cmdline: str = ""       # the boot options the job added (mitigations=off), not the console's

    @property
    def short_flavour(self) -> str:
        """The flavour without the architecture every Debian flavour ends in: rt, cloud; amd64 alone stays."""
        for suffix in _ARCH_SUFFIXES:
            if self.flavour.endswith(suffix) and len(self.flavour) > len(suffix):
                return self.flavour[:-len(suffix)]
        return self.flavour


@dataclass(frozen=True)
class Variant:
    """One run's identity (see the module's docstring)."""

    box: str
    benchmark: str
    params: str                 # what the benchmark measured: its parameters, canonical JSON, without
    #                             the duration parameters and the target's (TARGET_PARAMS)
    target: Target = field(default_factory=Target)
    kernel: Kernel = field(default_factory=Kernel)
    workdir_fs: str = ""
    cc: str = ""                # the compiler of the benchmark's own programs, with its flags
    commit: str = ""
    tag: str = ""

    @property
    def identity(self) -> tuple:
        """Everything but the commit and the tag: runs that differ here are never pooled."""
        return (self.box, self.benchmark, self.params, self.target, self.kernel, self.workdir_fs, self.cc)

    @property
    def measured(self) -> tuple:
        """The identity without the box and the benchmark's parameters: what a comparison's sides differ in."""
        return (self.target, self.kernel, self.workdir_fs, self.cc)

    @property
    def side_key(self) -> tuple:
        """What one side of a comparison is split by: a guest's kernel is what is under test (its
        release is the variant); the host's kernel upgrades are its history, pooled in a side as
        its commits are (docs/views.md)."""
        return self.measured if self.target.guest else self.line

    @property
    def line(self) -> tuple:
        """The identity without its history dimension: a kernel's release within one line of
        releases (Debian's of one flavour), a recipe's commit. A kernel of no known line (an image
        file: a bisection's, a series' build) is the line of its image's path, a commit's
        directory in it (`images/SHA/bzImage`, automate.measurer.KernelBuilds) made any commit."""
        k = self.kernel
        if k.origin == DEBIAN or (k.origin == "" and not self.target.guest):
            kernel_line: tuple = (k.origin, k.flavour, k.cmdline)
        elif k.origin == RECIPE:
            kernel_line = (k.origin, k.recipe, k.cmdline)
        else:
            kernel_line = (k.origin, _SHA_PART.sub("<commit>", k.image), k.cmdline)
        return (self.target, kernel_line, self.workdir_fs, self.cc)


def _text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    return str(value)


def _int(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def split_release(release: str) -> tuple[str, str]:
    """(version, flavour) of a kernel release: Debian's ABI name split at its flavour; another
    release is its own version."""
    m = _DEBIAN.match(release or "")
    return (m.group(1), m.group(2)) if m else (release or "", "")


def _fragments(fragments) -> tuple[str, ...]:
    """A recipe's fragments as words: {CONFIG_X: y} -> +X, n -> -X, else X=value; a file by name."""
    out: list[str] = []
    for f in fragments if isinstance(fragments, list) else []:
        if isinstance(f, dict):
            for k, v in f.items():
                name = str(k).removeprefix("CONFIG_")
                value = str(v)
                out.append(f"+{name}" if value == "y" else f"-{name}" if value == "n" else f"{name}={value}")
        else:
            out.append(str(f).rsplit("/", 1)[-1])
    return tuple(out)


def _kernel(job_kernel, params: dict, env: dict, guest: bool) -> Kernel:
    release = str(env.get("kernel_release") or "")
    version, flavour = split_release(release)
    cmdline = str(params.get("cmdline") or "")
    build = str(params.get("kernel_build") or "")
    if isinstance(job_kernel, dict) and not cmdline:
        cmdline = " ".join(str(job_kernel.get("cmdline") or "").split())
    if not guest:
        return Kernel(release, version, flavour)
    recipe = None
    if isinstance(job_kernel, dict) and "tree" in job_kernel:
        recipe = {k: v for k, v in job_kernel.items() if k != "cmdline"}
    elif env.get("kernel_recipe"):
        try:
            loaded = json.loads(str(env["kernel_recipe"]))
            recipe = loaded if isinstance(loaded, dict) else None
        except ValueError:
            recipe = None
    if recipe is not None:
        name = str(recipe.get("name") or "")
        if name and release.endswith(name):
            version, flavour = release[:-len(name)], name.lstrip("-")
        elif not name:
            version, flavour = release, ""
        ref = str(env.get("kernel_recipe_commit") or recipe.get("ref") or "")
        # A recipe without a name stores its key as kernel_build, and the key hashes the
        # commit: the line is the recipe's keys without the ref instead.
        line = json.dumps({k: v for k, v in recipe.items() if k != "ref"}, sort_keys=True, default=str)
        return Kernel(release, version, flavour, RECIPE, "", line, ref, str(recipe.get("cc") or "gcc"),
                      str(recipe.get("kcflags") or ""), str(recipe.get("config") or ""),
                      _fragments(recipe.get("fragments")),
                      tuple(str(p).rsplit("/", 1)[-1] for p in recipe.get("patches") or () if isinstance(p, str)),
                      build, str(env.get("kernel_built_config_hash") or ""), cmdline)
    image = job_kernel.get("image") if isinstance(job_kernel, dict) else job_kernel
    image = str(image or "")
    # A Debian kernel by release, or any image whose release is Debian's ABI name (a kernel of
    # /boot, a run stored before jobs recorded their kernel): one line per flavour.
    origin = DEBIAN if image.startswith("debian:") or (not image and flavour) or (flavour and "/boot/" in image) \
        else IMAGE
    return Kernel(release, version, flavour, origin, image, cmdline=cmdline,
                  build=build)


def duration_params(benchmark: str) -> frozenset[str]:
    """The parameters `compare` ignores when it matches groups of this benchmark."""
    from perflab import benchmarks

    if benchmark in benchmarks.FAMILIES:
        return benchmarks.duration_params(benchmark)
    return EXECUTION_PARAMS


def _mapping(value) -> dict:
    """A stored mapping (params, environment, job), also when a store hands it over as JSON text."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return dict(value) if isinstance(value, dict) else {}


def of(run) -> Variant:
    """The variant of a stored run (a store row: params, environment, job, box, benchmark, commit, tag)."""
    params, env, job = (_mapping(getattr(run, name, None)) for name in ("params", "environment", "job"))
    vm = job.get("vm") if isinstance(job.get("vm"), dict) else {}
    # A job's kernel is a guest's, but on an SSH machine (`on`) it is the kernel that machine was
    # switched to by kexec (execution.targets.ssh): no guest, none of a guest's defaults.
    guest = "vm" in params or (bool(job.get("kernel")) and not (job.get(SSH_MACHINE) or params.get(SSH_MACHINE)))
    if guest:
        # A guest run stores vCPUs and memory only when not the defaults (execution.targets.qemu:
        # MACHINE_PARAMS, DEFAULT_VM: tcg, 1 vCPU, 512 MiB).
        target = Target(GUEST, str(params.get("vm") or vm.get("mode") or "tcg"),
                        _int(params.get("vm_cpus") or vm.get("cpus")) or 1,
                        _int(params.get("vm_memory_mib") or vm.get("memory")) or 512,
                        _text(params.get("vm_qemu_args") or vm.get("qemu_args")))
    else:
        target = Target()
    benchmark = str(getattr(run, "benchmark", "") or "")
    ignored = duration_params(benchmark)
    measured = {k: v for k, v in params.items() if k not in ignored and k not in TARGET_PARAMS}
    cc = " ".join(w for w in (_text(env.get("cc")), _text(env.get("cflags"))) if w)
    return Variant(str(getattr(run, "box", "") or ""), benchmark,
                   json.dumps(measured, sort_keys=True, default=str), target,
                   _kernel(job.get("kernel"), params, env, guest), _text(env.get("workdir_fs")), cc,
                   str(getattr(run, "commit", "") or ""), str(getattr(run, "tag", "") or ""))


# -- facts that change what a figure means (a comparison's headline says them first) ----------

def measured_differently(base: Variant, head: Variant) -> list[str]:
    """What two sides measured differently, in words (`workdir file system: ext4 (base) against
    tmpfs`): where they ran (host or guest, mode, vCPUs, memory) and the work directory's file
    system. Empty when they agree. Kernels are what comparisons usually compare: not said here."""
    out = []
    bt, ht = base.target, head.target
    if bt.kind != ht.kind:
        out.append(f"ran on {_where(bt)} (base) against {_where(ht)}")
    else:
        if bt.mode != ht.mode:
            out.append(f"VM mode {bt.mode} (base) against {ht.mode}")
        if bt.cpus != ht.cpus:
            out.append(f"guest vCPUs {bt.cpus} (base) against {ht.cpus}")
        if bt.memory_mib != ht.memory_mib:
            out.append(f"guest memory {bt.memory_mib} MiB (base) against {ht.memory_mib} MiB")
    if base.workdir_fs != head.workdir_fs and (base.workdir_fs or head.workdir_fs):
        out.append(f"work directory's file system {base.workdir_fs or 'not recorded'} (base) against "
                   f"{head.workdir_fs or 'not recorded'}")
    return out


def _where(t: Target) -> str:
    return f"a {t.mode} guest" if t.guest else "the host"


def _last(sel) -> Variant:
    """The variant of a selection's last run: decoded already where it keeps them (Selection.variants)."""
    known = getattr(sel, "variants", None)
    return known[sel.runs[-1].id] if isinstance(known, dict) else of(sel.runs[-1])


def sides_differ(selections) -> list[str]:
    """What each head measured differently from the base (`measured_differently` of the sides'
    last runs), one line per head and fact, the head named: a comparison's headline says these
    first, since they change what its figures mean (a tmpfs against ext4, a guest against the host)."""
    if len(selections) < 2 or not selections[0].runs:
        return []
    base = _last(selections[0])
    out = []
    for sel in selections[1:]:
        if sel.runs:
            out += [f"{sel.label} against {selections[0].label}: {line}"
                    for line in measured_differently(base, _last(sel))]
    return out

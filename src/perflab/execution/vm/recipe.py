"""A kernel a job builds itself: a recipe (a git tree, a commit, patches, a config, a compiler,
flags, a name), built once into perflab's cache and booted like any image (docs/vm.md,
"Kernels a job builds").

    kernel:
      tree: ~/src/linux          # a git tree (the user's: read, never written)
      ref: v6.1                  # commit, tag or branch (default HEAD)
      patches: [sleepy.patch]    # git am (a mail) or git apply (a diff), in order
      config: perflab            # perflab's minimal config, a make target (tinyconfig,
                                 # defconfig ...), or a config file
      fragments: [debug.config, {CONFIG_PREEMPT: y}]
      cc: gcc-12                 # or clang-14 (LLVM=1)
      kcflags: -Os -falign-functions=2
      name: -gcc12-Os            # LOCALVERSION: what uname -r and the reports show
      cmdline: mitigations=off   # the guest's command line (not part of the build)

Where it is built, under perflab's cache (`kernel-builds/`), by the one kernel build path
(execution/vm/kbuild.py: locks, a clean checkout, the make process group tied to perflab, an
entry published whole and checked before use): perflab's own clone of the tree (`src-*`: its
objects hard-linked or copied, so a gc in the user's tree cannot take them; the user's
repository gains nothing, not even a worktree entry), checked out at the commit and patched; an
out-of-tree build directory per (tree, config, fragments, compiler, flags), kept, so the next
commit or patch rebuilds what changed; and the result per recipe (image, System.map, .config,
facts.json), keyed by everything that decides it: the commit, the patches' and config files'
contents, the compiler's version, the flags and the name. The same recipe asked again is not
rebuilt. The recipe's values are values: `cc` a compiler's name or path, `kcflags` plain flags,
`config` no option (recipe_of refuses anything else in one line).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from perflab.core import paths
from perflab.core.git import IDENT, BuildFailed, git
from perflab.execution.vm import kbuild
from perflab.core.errors import PerflabError, UsageProblem

RECIPE_KEYS = ("tree", "ref", "patches", "config", "fragments", "cc", "kcflags", "name", "cmdline")
TARGETS = ("tinyconfig", "defconfig", "allnoconfig", "kvm_guest.config")
PERFLAB_CONFIG = "perflab"
TARGET = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*config")
COMPILER = re.compile(r"[A-Za-z0-9_./+][A-Za-z0-9_./+-]*")
FLAG = re.compile(r"[A-Za-z0-9_=.,+:/@%-]+")


@dataclass(frozen=True)
class Recipe:
    tree: str
    ref: str = "HEAD"
    patches: tuple[str, ...] = ()
    config: str = PERFLAB_CONFIG
    fragments: tuple = ()          # file paths, or {CONFIG_X: value} mappings
    cc: str = "gcc"
    kcflags: str = ""
    name: str = ""

    def keys(self) -> dict:
        """The stored form: every key that differs from the defaults."""
        out: dict = {"tree": self.tree}
        for key, default in (("ref", "HEAD"), ("config", PERFLAB_CONFIG), ("cc", "gcc"), ("kcflags", ""), ("name", "")):
            if getattr(self, key) != default:
                out[key] = getattr(self, key)
        if self.patches:
            out["patches"] = list(self.patches)
        if self.fragments:
            out["fragments"] = [dict(f) if isinstance(f, tuple) else f for f in self.fragments]
        return out

    @property
    def llvm(self) -> str:
        """kbuild's LLVM= for a clang: "-14" for clang-14 (so the host tools, the linker and binutils
        are the same version: ld.lld-14 ...), "1" for clang; "" for gcc."""
        name = Path(self.cc).name
        if not name.startswith("clang"):
            return ""
        suffix = name.removeprefix("clang")
        return suffix if suffix.startswith("-") and suffix[1:].isdigit() else "1"


def _path(value, key: str, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise UsageProblem(f"{where}: key 'kernel.{key}' = {value!r}: expected a path")
    return os.path.abspath(os.path.expanduser(value))


def recipe_of(doc: dict, where: str = "job") -> Recipe:
    """A recipe as written -> Recipe (paths made absolute); UsageProblem in one line naming the key."""
    unknown = [k for k in doc if k not in RECIPE_KEYS]
    if unknown:
        raise UsageProblem(f"{where}: key 'kernel.{unknown[0]}' is unknown; a kernel recipe takes "
                           f"{', '.join(RECIPE_KEYS)}")
    tree = _path(doc.get("tree"), "tree", where)
    out: dict = {"tree": tree}
    for key in ("ref", "cc", "kcflags", "name"):
        value = doc.get(key)
        if value is None:
            continue
        if not isinstance(value, (str, int, float)) or isinstance(value, bool) or "\n" in str(value):
            raise UsageProblem(f"{where}: key 'kernel.{key}' = {value!r}: expected one line of text")
        out[key] = str(value).strip()
    if out.get("ref", "").startswith("-"):
        raise UsageProblem(f"{where}: key 'kernel.ref' = {out['ref']!r}: expected a commit, tag or branch")
    # Values, never options, shell or make syntax: kbuild splices CC and KCFLAGS into the shell
    # commands it runs, and make expands a `$` in any variable, so only plain words pass.
    if "cc" in out and not COMPILER.fullmatch(out["cc"]):
        raise UsageProblem(f"{where}: key 'kernel.cc' = {out['cc']!r}: expected a compiler's name or path "
                           "(gcc-12, clang-14, /usr/bin/gcc): no spaces, options or shell syntax")
    if "kcflags" in out and not all(FLAG.fullmatch(word) for word in out["kcflags"].split()):
        bad = next(word for word in out["kcflags"].split() if not FLAG.fullmatch(word))
        raise UsageProblem(f"{where}: key 'kernel.kcflags' = {out['kcflags']!r}: {bad!r} is not a compiler flag "
                           "(letters, digits and - _ = . , + : / @ % only: no quotes, $, or shell syntax)")
    if out.get("name") and not all(c.isalnum() or c in "-_.+" for c in out["name"]):
        raise UsageProblem(f"{where}: key 'kernel.name' = {out['name']!r}: letters, digits and - _ . + only "
                           "(it is the kernel's LOCALVERSION)")
    patches = doc.get("patches") or []
    if not isinstance(patches, list):
        patches = [patches]
    out["patches"] = tuple(_path(p, "patches", where) for p in patches)
    config = doc.get("config", PERFLAB_CONFIG)
    if isinstance(config, str) and config.strip().startswith("-"):
        raise UsageProblem(f"{where}: key 'kernel.config' = {config!r}: expected perflab, a make target or a "
                           "config file, not an option")
    if not isinstance(config, str) or not config.strip():
        raise UsageProblem(f"{where}: key 'kernel.config' = {config!r}: expected perflab, a make target "
                           f"({', '.join(TARGETS)}) or a config file")
    if config == PERFLAB_CONFIG or (not os.path.exists(os.path.expanduser(config)) and _target(config)):
        out["config"] = config
    elif os.path.isfile(os.path.expanduser(config)):
        out["config"] = _path(config, "config", where)
    else:
        raise UsageProblem(f"{where}: key 'kernel.config' = {config!r}: no such file (or: perflab, a make target "
                           f"such as {', '.join(TARGETS)})")
    fragments = doc.get("fragments") or []
    if not isinstance(fragments, list):
        fragments = [fragments]
    frags: list = []
    for f in fragments:
        if isinstance(f, dict):
            bad = [k for k in f if not (isinstance(k, str) and k.startswith("CONFIG_") and k[7:].replace("_", "").isalnum())]
            if bad:
                raise UsageProblem(f"{where}: key 'kernel.fragments': {bad[0]!r} is not a CONFIG_ option")
            frags.append(tuple(sorted((k, _kconfig_value(v)) for k, v in f.items())))
        else:
            frags.append(_path(f, "fragments", where))
    out["fragments"] = tuple(frags)
    return Recipe(**out)


def _target(config: str) -> bool:
    """A make target of the tree's own configs (tinyconfig, x86_64_defconfig, kvm_guest.config): a plain
    word, never an option or make syntax."""
    return TARGET.fullmatch(config) is not None


def read_recipe_file(path: str, need_tree: bool = True) -> dict:
    """A recipe written in a file of its own (`--kernel recipe.yaml`, `perflab kernel build`): its
    mapping, or a job file's `kernel:` mapping; UsageProblem in one line naming the file (and line).
    `need_tree`: False for a series' recipe (the series gives the tree)."""
    import yaml

    from perflab.core import yamlsafe

    try:
        doc = yamlsafe.load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else path
        raise UsageProblem(f"{where}: {getattr(e, 'problem', None) or getattr(e, 'strerror', None) or e}") from None
    if isinstance(doc, dict) and isinstance(doc.get("kernel"), dict):
        doc = doc["kernel"]          # a whole job file: its kernel
    if not isinstance(doc, dict) or (need_tree and "tree" not in doc):
        raise UsageProblem(f"{path}: expected a kernel recipe (a mapping{' with tree:' if need_tree else ''}, "
                           "or a job file whose kernel: is one)")
    return doc


def _kconfig_value(v) -> str:
    if v is True:
        return "y"
    if v is False or v is None:
        return "n"
    return str(v)


def cache_dir() -> Path:
    return paths.cache_home() / "kernel-builds"


def _digest(*parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else str(p).encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def compiler_version(cc: str) -> str:
    try:
        done = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise PerflabError(f"kernel recipe: compiler {cc!r} does not run: {e}") from None
    if done.returncode != 0 or not done.stdout.strip():
        raise PerflabError(f"kernel recipe: compiler {cc!r} does not run (exit {done.returncode})")
    return done.stdout.splitlines()[0].strip()


@dataclass
class Built:
    image: Path
    key: str
    facts: dict = field(default_factory=dict)


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise PerflabError(f"kernel recipe: cannot read {path}: {e.strerror}") from None


def identity(recipe: Recipe) -> tuple[str, str, str]:
    """(commit, compiler version, key): what decides the build, hashed."""
    if not Path(recipe.tree, ".git").exists():
        # -f: Debian's linux-source tree ships a .gitignore that ignores its own top level.
        raise PerflabError(f"kernel recipe: tree {recipe.tree} is not a git repository (commit an unpacked "
                           f"source first: cd {shlex.quote(recipe.tree)} && git init -q && git add -A -f && "
                           "git commit -q -m source)")
    commit = git(recipe.tree, "rev-parse", "--verify", "--quiet", f"{recipe.ref}^{{commit}}", check=False).stdout.strip()
    if not commit:
        raise PerflabError(f"kernel recipe: ref {recipe.ref!r} is not a commit of {recipe.tree}")
    version = compiler_version(recipe.cc)
    files = [_read(p) for p in recipe.patches]
    if recipe.config != PERFLAB_CONFIG and not _target(recipe.config):
        files.append(_read(recipe.config))
    files += [_read(f) for f in recipe.fragments if isinstance(f, str)]
    key = _digest(commit, version, json.dumps(recipe.keys(), sort_keys=True, default=str), *files)
    return commit, version, key


def built(recipe: Recipe, package: bool = False) -> Built | None:
    """The recipe's build in the cache (its image, or with `package` its Debian package), or None."""
    key = identity(recipe)[2]
    return _cached(package_key(key) if package else key, package)


IMAGE = "arch/x86/boot/bzImage"
# A recipe built as a Debian package (kbuild's own `bindeb-pkg`: the image, its modules, config and
# System.map under /boot and /lib/modules, and maintainer scripts that run the machine's
# /etc/kernel/postinst.d hooks: its initramfs made as it makes one for Debian's kernels). The
# entry keeps the linux-image package alone, under this name; its facts name the package.
PACKAGE_FORM = "bindeb-pkg"
DEB = "linux-image.deb"
# What `make bindeb-pkg` runs besides make and the compiler (its Build-Depends are not checked:
# dpkg-buildpackage -d; these are what the build cannot do without).
PACKAGE_TOOLS = (("dpkg-buildpackage", "dpkg-dev"), ("dpkg-architecture", "dpkg-dev"), ("fakeroot", "fakeroot"))


def package_key(key: str) -> str:
    """The cache key of a recipe's package: its image's key and the package form (another entry)."""
    return _digest(key, PACKAGE_FORM)


def package_version(release: str, key: str) -> str:
    """The package's version: the release, then the key (two builds of one release are two versions)."""
    return f"{release}-perflab.{key}"


def missing_package_tools() -> str | None:
    """Why a recipe cannot be built as a Debian package here (a tool missing), or None."""
    for tool, package in PACKAGE_TOOLS:
        if shutil.which(tool) is None:
            return (f"a kernel recipe built as a Debian package (make bindeb-pkg) needs {tool} "
                    f"(Debian package {package})")
    return None


def _cached(key: str, package: bool = False) -> Built | None:
    """The build of `key` when its entry checks out (kbuild.published); a broken one is rebuilt."""
    entry = cache_dir() / (f"deb-{key}" if package else f"image-{key}")
    name = DEB if package else "bzImage"
    facts = kbuild.published(entry, name, {"kernel_recipe_key": key})
    return Built(entry / name, key, facts) if facts is not None else None


def build(recipe: Recipe, jobs: int | None = None, say=lambda line: None, package: bool = False) -> Built:
    """The recipe's image: from the cache, else built by the one build path (execution/vm/kbuild.py:
    locked, a clean checkout, the make process group killed with perflab, published whole) in the
    cache's clone of the tree — minutes the first time; the build directory is kept per tree, config,
    compiler and flags, so a later commit or patch rebuilds what changed.

    `package`: its Debian package instead (`make bindeb-pkg` after the image, in the same build
    directory: an image built before is not built again), an entry of its own (`deb-KEY`, KEY the
    image's key and the form), published whole as an image is; Built.image is the .deb.
    BuildFailed (a PerflabError) in one line with the log's tail when a step fails."""
    if package:
        why = missing_package_tools()
        if why:
            raise PerflabError(why)
    commit, version, image_key = identity(recipe)
    key = package_key(image_key) if package else image_key
    found = _cached(key, package)
    if found is not None:
        return found
    top = cache_dir()
    top.mkdir(parents=True, exist_ok=True)
    checkout = kbuild.Clone(Path(recipe.tree), top / f"src-{_digest(recipe.tree)}")
    out = top / f"out-{_digest(recipe.tree, recipe.config, recipe.fragments, recipe.cc, recipe.kcflags)}"
    label = recipe.name or key

    def patched(src: Path) -> None:
        for patch in recipe.patches:
            mail = _read(patch)[:5] == b"From "
            args = [*IDENT, "am", "-q", "--keep-cr"] if mail else ["apply", "--index"]
            done = git(src, *args, patch, check=False)
            if done.returncode != 0:
                if mail:
                    git(src, "am", "--abort", check=False)
                said = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
                raise PerflabError(f"kernel recipe: patch {patch} does not apply to {commit[:12]}: "
                                   f"{said[0] if said else 'git ' + args[-2] + ' failed'}")

    def steps(run: kbuild.Running) -> None:
        def make(*targets: str) -> None:
            try:
                run.run([*make_argv(recipe, run.src, run.out, jobs), *targets], f"make {' '.join(targets)}")
            except BuildFailed as e:
                raise BuildFailed(f"kernel build of {label} failed ({' '.join(targets)}): {e.why}", e.why) from None

        config = run.out / ".config"
        if recipe.config == PERFLAB_CONFIG:
            from perflab.execution.vm import kconfig

            kconfig.write_config(run.src, config, "tinyconfig")
        elif _target(recipe.config):
            make(recipe.config)
        else:
            shutil.copyfile(recipe.config, config)
        if recipe.fragments:
            with open(config, "a") as f:
                for frag in recipe.fragments:
                    lines = (_read(frag).decode(errors="replace") if isinstance(frag, str)
                             else "".join(f"{k}={v}\n" if v != "n" else f"# {k} is not set\n" for k, v in frag))
                    f.write("\n" + lines + "\n")
        make("olddefconfig")
        make("bzImage")
        if package:
            made_package(run, make)

    def made_package(run: kbuild.Running, make) -> None:
        # bindeb-pkg leaves its packages (and dpkg-buildpackage's .buildinfo, .changes) beside the
        # build directory: each named by the version, which holds the key, so another key's build
        # meanwhile cannot take them; the linux-image one is moved into the build directory.
        release = (run.out / "include" / "config" / "kernel.release").read_text().strip()
        pkgversion = package_version(release, image_key)
        if _enabled(run.out / ".config", "CONFIG_MODULES"):
            make("modules")           # with -j here: dpkg-buildpackage's own make may not get the jobs
        make("bindeb-pkg", f"KDEB_PKGVERSION={pkgversion}", "DPKG_FLAGS=-d")
        made = run.out.parent / f"linux-image-{release}_{pkgversion}_amd64.deb"
        left = [p for p in run.out.parent.glob(f"*_{pkgversion}_*") if p != made]
        for p in left:
            p.unlink(missing_ok=True)
        if made.is_file():
            os.replace(made, run.out / DEB)
            (run.out / "package").write_text(f"linux-image-{release} {pkgversion}\n")

    def facts(out: Path) -> dict:
        release = out / "include" / "config" / "kernel.release"
        named = (out / "package").read_text().split() if package and (out / "package").is_file() else []
        return {
            **({"kernel_package": named[0], "kernel_package_version": named[1]} if len(named) == 2 else {}),
            "kernel_recipe": json.dumps(recipe.keys(), sort_keys=True),
            "kernel_recipe_commit": commit,
            "kernel_compiler": version,
            "kernel_built_config_hash": hashlib.sha256((out / ".config").read_bytes()).hexdigest()[:16],
            "kernel_build_seconds": f"{time.monotonic() - started:.0f}",
            "kernel_build_release": release.read_text().strip() if release.is_file() else "",
            "kernel_build_commands": reproducer(recipe, commit) + (
                f"\nmake O=out CC={shlex.quote(recipe.cc)} LOCALVERSION={shlex.quote(recipe.name)} "
                f"KDEB_PKGVERSION={named[1]} DPKG_FLAGS=-d bindeb-pkg   # ../{named[0]}_{named[1]}_amd64.deb"
                if len(named) == 2 else ""),
        }

    started = time.monotonic()
    entry = top / (f"deb-{key}" if package else f"image-{key}")
    try:
        done = kbuild.build(checkout, commit, out, steps, image=DEB if package else IMAGE, entry=entry,
                            facts=facts, expect={"kernel_recipe_key": key}, prepare=patched, say=say,
                            name=f"kernel {label}" + (" (Debian package)" if package else ""))
    except kbuild.NoImage as e:
        raise BuildFailed(f"kernel build of {label}: {e.why}", e.why) from None
    made = entry / (DEB if package else "bzImage")
    say(f"built {done['kernel_build_release'] or key} in {done['kernel_build_seconds']} s: {made}")
    return Built(made, key, done)


def _enabled(config: Path, option: str) -> bool:
    try:
        return f"\n{option}=y\n" in "\n" + config.read_text(errors="replace")
    except OSError:
        return False


def make_argv(recipe: Recipe, src: Path, out: Path, jobs: int | None) -> list[str]:
    """make's command line for a recipe: its values are checked by recipe_of (no option, no shell, no
    make syntax) and passed as make's own variables, where the command line wins over the Makefile."""
    flags = [f"KCFLAGS={recipe.kcflags}"] if recipe.kcflags else []
    return ["make", "-C", str(src), f"O={out}", f"CC={recipe.cc}", *([f"LLVM={recipe.llvm}"] if recipe.llvm else []),
            f"-j{jobs or os.cpu_count() or 2}", *flags, f"LOCALVERSION={recipe.name}"]


SERIES_KEYS = ("config", "fragments", "cc", "kcflags", "name")


def build_command(recipe: Recipe, jobs: int | None = None, *, typed: bool = False) -> str:
    """A recipe's config, compiler and flags as one shell command that builds the checkout it runs
    in into $KBUILD_OUTPUT (the build of a bisection or a patch series: each commit in turn, one
    output directory kept). The config is made once, when the output directory has none."""
    import sys

    q = shlex.quote
    cc = f"CC={q(recipe.cc)}" + (f" LLVM={recipe.llvm}" if recipe.llvm else "")
    make = f'make O="$KBUILD_OUTPUT" {cc} -j{jobs or os.cpu_count() or 2}'
    config = '"$KBUILD_OUTPUT/.config"'
    if recipe.config == PERFLAB_CONFIG:
        # `typed`: as a person types it (a mail's reproduce steps); else this very perflab, on PATH or not.
        perflab = "perflab" if typed else shlex.join([sys.executable, "-c", "import sys; from perflab.cli import entry; "
                              "sys.argv[0] = 'perflab'; sys.exit(entry())"])
        first = [f"{perflab} kernel config --tree . -o {config}"]
    elif _target(recipe.config):
        first = [f"{make} {q(recipe.config)}"]
    else:
        first = [f"cp {q(recipe.config)} {config}"]
    for f in recipe.fragments:
        first.append(f"cat {q(f)} >> {config}" if isinstance(f, str) else
                     "printf '%s\\n' " + " ".join(q(f"{k}={v}") for k, v in f) + f" >> {config}")
    flags = f" KCFLAGS={q(recipe.kcflags)}" if recipe.kcflags else ""
    return (f'set -e; mkdir -p "$KBUILD_OUTPUT"; test -f {config} || {{ {"; ".join(first)}; }}; '
            f"{make} olddefconfig; {make}{flags} LOCALVERSION={q(recipe.name)} bzImage")


def series_recipe(path: str, tree: str) -> Recipe:
    """A recipe file for a patch series: its config, fragments, cc, kcflags and name; the tree, the
    commits and the patches are the series'. UsageProblem in one line naming a key it cannot take."""
    doc = read_recipe_file(path, need_tree=False)
    given = [k for k in ("tree", "ref", "patches") if k in doc]
    if given:
        raise UsageProblem(f"--recipe {path}: key '{given[0]}': the series gives the tree, the commits and the "
                           f"patches; a recipe for it takes {', '.join(SERIES_KEYS)}")
    if "cmdline" in doc:
        raise UsageProblem(f"--recipe {path}: key 'cmdline': a boot option is the job's (kernel: {{cmdline: ...}})")
    return recipe_of({**doc, "tree": tree}, f"--recipe {path}")


def reproducer(recipe: Recipe, commit: str) -> str:
    """The commands a person would type to build the same kernel (shown with the run)."""
    lines = [f"git -C {shlex.quote(recipe.tree)} worktree add /tmp/build {commit[:12]}", "cd /tmp/build", "mkdir -p out"]
    for p in recipe.patches:
        lines.append(f"git am {shlex.quote(p)}  # or git apply")
    cc = f"CC={shlex.quote(recipe.cc)}" + (f" LLVM={recipe.llvm}" if recipe.llvm else "")
    if recipe.config == PERFLAB_CONFIG:
        lines.append("perflab kernel config --tree . -o out/.config")
    elif _target(recipe.config):
        lines.append(f"make O=out {cc} {recipe.config}")
    else:
        lines.append(f"cp {shlex.quote(recipe.config)} out/.config")
    for f in recipe.fragments:
        lines.append(f"cat {shlex.quote(f)} >> out/.config" if isinstance(f, str)
                     else "printf '%s\\n' " + " ".join(shlex.quote(f"{k}={v}") for k, v in f) + " >> out/.config")
    flags = f" KCFLAGS={shlex.quote(recipe.kcflags)}" if recipe.kcflags else ""
    lines.append(f"make O=out {cc} olddefconfig && make O=out {cc}{flags} LOCALVERSION={shlex.quote(recipe.name)} "
                 f"-j$(nproc) bzImage")
    return "\n".join(lines)


def builds() -> list[tuple[str, Path, int, dict]]:
    """The built kernels in the cache: (key, image, bytes, facts), newest first."""
    out = []
    for d in sorted(cache_dir().glob("image-*"), key=lambda p: p.stat().st_mtime, reverse=True):
        if (d / "bzImage").is_file():
            size = sum(f.stat().st_size for f in d.rglob("*") if f.is_file())
            facts = kbuild.facts_of(d) or {}      # a broken entry is listed (and rebuilt when asked for)
            out.append((d.name.removeprefix("image-"), d / "bzImage", size, facts))
    return out


def prune_builds() -> int:
    """Remove every built kernel and build directory; the bytes freed."""
    freed = 0
    for d in cache_dir().glob("*"):
        if d.is_dir():
            freed += sum(f.stat().st_size for f in d.rglob("*") if f.is_file() and not f.is_symlink())
            shutil.rmtree(d, ignore_errors=True)
    return freed

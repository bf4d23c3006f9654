"""The kernel under test on an SSH machine: installed as its distribution does, switched to by kexec.

`--on BOX --kernel debian:R | RECIPE.yaml | IMAGE` on a machine declared kexec-capable in
perflab's configuration ([machine.BOX] kexec = true; power_cycle, console, boot_timeout):

1. refuse this machine: the far side's boot_id and machine-id must differ from this machine's
   (a loopback destination whose ids cannot be read is refused too);
2. install: debian:R -> the .deb perflab fetched (apt-get download, pinned as `perflab kernel
   fetch` pins it); a recipe -> built here as a Debian package by the one kernel build path
   (execution/vm/recipe.py, kbuild's `bindeb-pkg`, cached by its key and the package form); either
   copied there and `dpkg -i`'d (its postinst makes the initramfs the box's initramfs-tools makes).
   IMAGE -> copied to a directory of ours, with the box's own initrd of that release when /boot
   has one, else none;
3. the machine's default kernel recorded: its release, its /proc/cmdline (the way back boots it
   again with that command line);
4. `kexec -l IMAGE [--initrd=INITRD] --reuse-cmdline`, then `systemctl --no-block kexec` (the
   machine's own userspace stops its services and kexecs);
5. wait (boot_timeout) for SSH with a new boot_id; `uname -r` must be the release asked for (for
   an image, `uname -v` too: the version its header says; so an image of the default kernel's
   release, as a kernel bisection's commits often are, is kexec'ed and told apart from it; a
   package of that release is refused: it would replace the default kernel's files) and
   /proc/cmdline the one reused;
6. after the jobs, the way back: kexec into /boot/vmlinuz-DEFAULT (and its initrd) with the
   recorded command line; when that cannot be loaded or does not come back on the default kernel,
   `systemctl reboot` (the machine's firmware boots its default kernel); when the machine does not
   answer, the power-cycle command. Which way was taken is said on stderr. Then `dpkg --purge` /
   remove what was installed (unless --keep-kernel).

A kernel that does not come up within boot_timeout (or comes up as another release): the
machine's power_cycle command, a wait for its default kernel, what was installed removed, and
TargetDown("kernel did not boot on BOX: ...") with the console text of that boot (what the
console command printed after what it printed before the switch) as the console tail: the run
is stored failed, the other jobs go on. docs/lab.md, "The kernel under test on a box".
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from perflab.core.errors import PerflabError, TargetDown, UsageProblem

BOOT_TIMEOUT = 300.0
LOOPBACK = ("127.", "localhost", "::1", "[::1]")
REMOTE_DIR = "/var/tmp/perflab-kernel"        # what perflab copies there; removed afterwards
CONSOLE_BYTES = 4000                         # of the console command's output, kept as the tail
CONSOLE_OVERLAP = 256                        # chars of the text before the switch found again after it


@dataclass(frozen=True)
class BootControl:
    """How a machine's kernel is switched and brought back: its [machine.NAME] keys."""

    kexec: bool = False
    power_cycle: str | None = None
    console: str | None = None
    boot_timeout: float = BOOT_TIMEOUT


def control_of(settings: dict | None) -> BootControl:
    settings = settings or {}
    return BootControl(bool(settings.get("kexec", False)), settings.get("power_cycle"), settings.get("console"),
                       float(settings.get("boot_timeout", BOOT_TIMEOUT)))


def check_kernel(value, where: str) -> str | dict:
    """A kernel for an SSH machine as written: debian:RELEASE, a recipe (a file RECIPE.yaml, or a
    job's `kernel: {tree: ...}`: its stored keys) or an image file (made absolute); UsageProblem in
    one line naming `where` otherwise."""
    from perflab.execution.vm import kernel as kernels
    from perflab.execution.vm import recipe

    if isinstance(value, str) and value.endswith((".yaml", ".yml")) and Path(value).expanduser().is_file():
        value = recipe.read_recipe_file(str(Path(value).expanduser()))
    if isinstance(value, dict) and "tree" in value:
        if value.get("cmdline"):
            raise UsageProblem(f"{where}: key 'kernel.cmdline': on an SSH machine the kernel under test boots with "
                               "the machine's own command line (kexec --reuse-cmdline)")
        return recipe.recipe_of({k: v for k, v in value.items() if k != "cmdline"}, where).keys()
    if not isinstance(value, str) or not value.strip():
        raise UsageProblem(f"{where} = {value!r}: on an SSH machine the kernel is debian:RELEASE, a kernel recipe "
                           "or an image file")
    if value.startswith(kernels.DEBIAN):
        try:
            kernels.debian_package(value)
        except UsageProblem as e:
            raise UsageProblem(f"{where} = {value!r}: {str(e).partition(': ')[2]}") from None
        return value
    path = Path(value).expanduser()
    if not path.is_file():
        raise UsageProblem(f"{where} = {value!r}: no such kernel image (on an SSH machine: debian:RELEASE, a kernel "
                           "recipe RECIPE.yaml, an image file or a linux-image .deb)")
    if is_package(path.name):
        try:
            package_of(path)
        except PerflabError as e:
            raise UsageProblem(f"{where} = {value!r}: {e}") from None
    return str(path.resolve())


# A package file (`--kernel linux-image-R_V_amd64.deb`, a kernel tree's `make bindeb-pkg`): installed
# with dpkg as Debian's are.
DEB_SUFFIX = ".deb"


@dataclass(frozen=True)
class Package:
    """A kernel's Debian package file, as its control fields say."""

    name: str          # linux-image-RELEASE (kbuild's bindeb-pkg), linux-image-RELEASE-unsigned (Debian's)
    version: str
    release: str       # what `uname -r` says on its kernel


def package_of(deb: Path) -> Package:
    """The kernel package `deb` is: PerflabError in one line naming the file when it is not a
    linux-image package (linux-headers, linux-libc-dev, the -dbg symbols, a metapackage) or dpkg-deb
    cannot read it. The release is the package's name after linux-image- (Debian's unsigned
    packages: without -unsigned), as kbuild and Debian name them."""
    import re

    if shutil.which("dpkg-deb") is None:
        raise PerflabError(f"{deb}: a kernel package is read with dpkg-deb (Debian package dpkg)")
    done = subprocess.run(["dpkg-deb", "--show", "--showformat=${Package}\\n${Version}\\n", str(deb)],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        said = " ".join(done.stderr.split()[-12:]) or f"exit {done.returncode}"
        raise PerflabError(f"{deb}: not a Debian package dpkg-deb can read ({said})")
    name, _, version = done.stdout.strip().partition("\n")
    release = name.removeprefix("linux-image-").removesuffix("-unsigned")
    if (not name.startswith("linux-image-") or name.endswith("-dbg")
            or not re.fullmatch(r"\d+\.\d+[\w.+~-]*", release)):
        raise PerflabError(f"{deb}: package {name or '?'} is not a kernel's linux-image package "
                           "(linux-image-RELEASE: its /boot/vmlinuz-RELEASE, modules and initramfs hooks)")
    return Package(name, version.strip(), release)


def is_package(kernel: str) -> bool:
    """Whether a kernel is a package file (a kernel tree's `--kernel` names the one its build leaves
    by a pattern: '../linux-image-*.deb')."""
    return kernel.endswith(DEB_SUFFIX)


def check_built_kernel(image: str, on: str) -> None:
    """`--kernel` of a kernel tree (bisect, series, robot): the image's path relative to the build
    output directory, or the package the build leaves (PATTERN.deb: on an SSH machine only, with
    dpkg-deb here to read each commit's); UsageProblem in one line before anything is built."""
    parts = Path(image).parts
    # kbuild's bindeb-pkg writes its packages in the output directory's parent: `../` leads a package's pattern.
    if not image or os.path.isabs(image) or ".." in (parts[1:] if is_package(image) else parts):
        raise UsageProblem(f"--kernel {image}: give the image's path relative to the kernel build's output "
                           "directory ($KBUILD_OUTPUT), e.g. arch/x86/boot/bzImage (or, on an SSH machine, the "
                           "package the build leaves: '../linux-image-*.deb')")
    if not is_package(image):
        return
    if not on:
        raise UsageProblem(f"--kernel {image}: a kernel package is installed on an SSH machine (--on MACHINE); "
                           "a VM boots the image: --kernel arch/x86/boot/bzImage")
    if shutil.which("dpkg-deb") is None:
        raise UsageProblem(f"--kernel {image}: each commit's package is read with dpkg-deb here (Debian package dpkg)")


def take_package(out: Path, pattern: str, since: float, into: Path) -> None:
    """The one linux-image package the build left matching `pattern` (relative to `out`, written
    since `since`: one an earlier build left is not this commit's) moved to `into`; the other files
    of that build of the package (linux-headers, linux-libc-dev, .buildinfo, .changes: its version
    in their names) removed. BuildFailed in one line naming the pattern (no match, several) or the
    file (not a linux-image package)."""
    import glob

    from perflab.core.git import BuildFailed

    found = [Path(p) for p in sorted(glob.glob(str(out / pattern)))]
    found = [p for p in found if p.is_file() and p.stat().st_mtime >= since - 1]
    # kbuild's debug symbols (CONFIG_DEBUG_INFO): linux-image-RELEASE-dbg_VERSION_ARCH.deb, not a kernel.
    kernels = [p for p in found if "-dbg_" not in p.name]
    if len(kernels) != 1:
        why = (f"the build left no package matching --kernel {pattern} (relative to $KBUILD_OUTPUT)" if not kernels
               else f"--kernel {pattern} matches {len(kernels)} packages of the build "
                    f"({', '.join(p.name for p in kernels[:3])}): name one")
        raise BuildFailed(f"--build: {why}", why)
    deb = kernels[0]
    try:
        package = package_of(deb)
    except PerflabError as e:
        why = f"--kernel {pattern}: {e}"
        raise BuildFailed(f"--build: {why}", why) from None
    os.replace(deb, into)
    for left in deb.parent.glob(f"*_{package.version}_*"):
        if left.is_file() and left.stat().st_mtime >= since - 1:
            left.unlink(missing_ok=True)


def label(kernel: str | dict) -> str:
    """The kernel in a message or a fact: as written, or a recipe's keys as JSON."""
    return json.dumps(kernel, sort_keys=True) if isinstance(kernel, dict) else kernel


def check_package_tools(kernel: str | dict) -> None:
    """A recipe is built as a Debian package here: PerflabError in one line when a tool is missing."""
    from perflab.execution.vm import recipe

    if isinstance(kernel, dict):
        why = recipe.missing_package_tools()
        if why:
            raise PerflabError(why)


def version_of(image: Path) -> str:
    """What `uname -v` says on the kernel an image boots (its setup header's version string ends
    with it: "RELEASE (BUILDER) #1 SMP ... (DATE)"), or "" when the header does not say it."""
    from perflab.execution.vm import modules

    text = modules.version_string_of(image) or ""
    at = text.find(" #")
    return text[at + 1:].strip() if at >= 0 else ""


def release_of(kernel: str) -> str:
    """The `uname -r` the kernel will say (debian:RELEASE, an image)."""
    from perflab.execution.vm import kernel as kernels
    from perflab.execution.vm import modules

    if kernel.startswith(kernels.DEBIAN):
        return kernel.removeprefix(kernels.DEBIAN)
    release = modules.release_of(Path(kernel))
    if not release:
        raise PerflabError(f"kernel {kernel}: not a bzImage whose header names its release")
    return release


def debian_deb(kernel: str) -> Path:
    """The .deb of debian:RELEASE (pinned uploads checked), downloaded once (execution/vm/kernel.py)."""
    from perflab.execution.vm import kernel as kernels

    return kernels.download_deb(kernels.debian_package(kernel))


@dataclass(frozen=True)
class Install:
    """What goes on the machine: a package file dpkg -i's (and purges after), or an image copied."""

    release: str                              # what `uname -r` will say
    deb: Path | None = None
    package: str | None = None
    image: Path | None = None
    facts: tuple = ()                         # (key, value) facts of the kernel (a recipe's build)
    version: str = ""                         # what `uname -v` will say (an image's header), when known
    version_of_package: str = ""              # a package file's Version (another is installed over one there)


def to_install(kernel: str | dict, say=lambda line: None) -> Install:
    """What `kernel` puts on the machine: a recipe built as a package here (minutes the first time,
    then cached), Debian's package fetched, or the image."""
    from perflab.execution.vm import kernel as kernels
    from perflab.execution.vm import recipe

    if isinstance(kernel, dict):
        built = recipe.build(recipe.recipe_of(kernel), say=say, package=True)
        facts = built.facts
        return Install(facts["kernel_build_release"], deb=built.image, package=facts["kernel_package"],
                       facts=(("kexec_package", facts["kernel_package"]),
                              ("kexec_package_version", facts["kernel_package_version"]),
                              ("kernel_recipe_key", facts["kernel_recipe_key"]),
                              ("kernel_build_commands", facts.get("kernel_build_commands", ""))))
    if kernel.startswith(kernels.DEBIAN):
        return Install(release_of(kernel), deb=debian_deb(kernel), package=kernels.debian_package(kernel))
    if is_package(kernel):
        package = package_of(Path(kernel))
        return Install(package.release, deb=Path(kernel), package=package.name, version_of_package=package.version,
                       facts=(("kexec_package", package.name), ("kexec_package_version", package.version)))
    return Install(release_of(kernel), image=Path(kernel), version=version_of(Path(kernel)))


# -- the machine ----------------------------------------------------------------------

def _ids() -> tuple[str, str]:
    def read(path: str) -> str:
        with contextlib.suppress(OSError):
            return Path(path).read_text().strip()
        return ""
    return read("/proc/sys/kernel/random/boot_id"), read("/etc/machine-id")


# One line each, also when a file is empty or missing.
PROBE = ('echo "$(cat /proc/sys/kernel/random/boot_id)"; echo "$(cat /etc/machine-id 2>/dev/null)"; uname -r; id -u; '
         'echo "$(cat /proc/cmdline)"; uname -v')


def _probe(conn) -> dict:
    lines = conn.run(PROBE, timeout=60).splitlines()
    while len(lines) < 6:
        lines.append("")
    return {"boot_id": lines[0].strip(), "machine_id": lines[1].strip(), "release": lines[2].strip(),
            "uid": lines[3].strip(), "cmdline": lines[4].strip(), "version": lines[5].strip()}


def came_up_as_asked(far: dict, what: Install) -> bool:
    """Whether the machine answered on the kernel installed: its release, and for an image whose
    header says it, its `uname -v` (an image of the default kernel's release, a kernel bisection's
    build, is told from the default kernel the machine may have fallen back to by this)."""
    return far["release"] == what.release and (not what.version or far["version"] == what.version)


def refuse_this_machine(machine, far: dict) -> None:
    """PerflabError when `far` (the machine's ids) may be the machine perflab runs on."""
    boot_id, machine_id = _ids()
    host = machine.destination.rpartition("@")[2]
    if not far["boot_id"] or (host.startswith(LOOPBACK) and not far["machine_id"] and not far["boot_id"]):
        raise PerflabError(f"{machine.on}: its boot_id cannot be read; perflab does not kexec a machine it cannot "
                           "tell from the one it runs on")
    if far["boot_id"] == boot_id or (machine_id and far["machine_id"] == machine_id):
        raise PerflabError(f"{machine.on} is the machine perflab runs on (same boot_id/machine-id): perflab "
                           "does not kexec its own machine")


def refuse_without_sudo(machine, conn) -> None:
    """PerflabError when the machine's user, not root, cannot run a command as root with `sudo -n`:
    found before anything is copied or installed, not taken for a kernel that did not boot."""
    try:
        conn.run("sudo -n true", timeout=60)
    except TargetDown as e:
        raise PerflabError(f"{machine.on}: its user is not root and `sudo -n true` failed ({e.summary}): installing "
                           "and kexec'ing a kernel needs root there, or sudo without a password (docs/lab.md)") from None


def _cmdline_words(text: str) -> list[str]:
    # kexec --reuse-cmdline drops the boot loader's BOOT_IMAGE= (and initrd=) words.
    return [w for w in text.split() if not w.startswith(("BOOT_IMAGE=", "initrd="))]


def console_since(before: str, after: str) -> str:
    """What the console printed after `before`: `after` from the end of the last CONSOLE_OVERLAP
    characters of `before` found in it (a log file's tail that grew), else all of `after` (the
    console command printed nothing before, or its output is of this boot only); its last
    CONSOLE_BYTES."""
    mark = before[-CONSOLE_OVERLAP:]
    if mark:
        at = after.rfind(mark)
        if at >= 0:
            after = after[at + len(mark):]
    return after[-CONSOLE_BYTES:]


class Switch:
    """One switch of `machine` to `kernel` and back (the context manager `under_test`)."""

    def __init__(self, machine, control: BootControl, kernel: str | dict, keep: bool, connect, reconnect,
                 what: Install, say=lambda line: None):
        self.machine, self.control, self.kernel, self.keep = machine, control, kernel, keep
        self.connect, self.reconnect, self.say = connect, reconnect, say
        self.what = what
        self.release = what.release
        self.installed: str | None = None         # the package dpkg -i'd, to purge afterwards
        self.copied = False
        self.new_modules_dir = False              # /lib/modules/RELEASE made by the install
        self.sudo = ""
        self.console_before = ""                  # the console command's text before the last switch
        self.way_back = ""                        # kexec | reboot | power cycle

    def run(self, script: str, timeout: float = 120) -> str:
        return self.connect(self.machine).run(script, timeout=timeout)

    def root(self, script: str, timeout: float = 600) -> str:
        return self.run(f"{self.sudo}sh -c {shlex.quote(script)}", timeout)

    def copy(self, local: Path, remote: str) -> None:
        conn = self.connect(self.machine)
        with open(local, "rb") as f:
            done = subprocess.run(conn.command(f"{self.sudo}sh -c " + shlex.quote(
                f"mkdir -p {REMOTE_DIR} && cat > {shlex.quote(remote)}")), stdin=f, capture_output=True, text=True,
                timeout=1800)
        if done.returncode != 0:
            raise TargetDown(f"target down: cannot copy {local.name} to {self.machine.on}: "
                             f"{' '.join(done.stderr.split()[-30:])}")
        self.copied = True

    # -- install ------------------------------------------------------------------------

    def install(self) -> tuple[str, str | None]:
        """The image and initrd to kexec, on the machine."""
        what = self.what
        if what.deb is not None:
            status = self.run(f"dpkg-query -W -f='${{Status}} ${{Version}}' {shlex.quote(what.package)} 2>/dev/null "
                              "|| true")
            # A kernel tree's commits make packages of one name: another commit's, kept there
            # (--keep-kernel), is installed over.
            there = "install ok installed" in status and (not what.version_of_package
                                                          or status.split()[-1] == what.version_of_package)
            if not there:
                remote = f"{REMOTE_DIR}/{what.package}.deb"
                modules = f"/lib/modules/{self.release}"
                # What depmod and initramfs-tools write there belongs to no package: removed with it
                # when it was not there before.
                self.new_modules_dir = self.run(f"test -e {shlex.quote(modules)} && echo yes || echo no").strip() == "no"
                self.copy(what.deb, remote)
                self.installed = what.package
                self.root(f"DEBIAN_FRONTEND=noninteractive dpkg -i {shlex.quote(remote)} >/dev/null "
                          f"&& rm -f {shlex.quote(remote)}", timeout=1800)
            image = f"/boot/vmlinuz-{self.release}"
            initrd = f"/boot/initrd.img-{self.release}"
            has = self.run(f"test -f {initrd} && echo yes || echo no").strip()
            return image, (initrd if has == "yes" else None)
        digest = hashlib.sha256(what.image.read_bytes()).hexdigest()[:12]
        image = f"{REMOTE_DIR}/vmlinuz-{digest}"
        self.copy(what.image, image)
        initrd = f"/boot/initrd.img-{self.release}"
        has = self.run(f"test -f {initrd} && echo yes || echo no").strip()
        return image, (initrd if has == "yes" else None)

    def remove(self) -> None:
        if self.keep:
            return
        if self.installed:
            self.root(f"DEBIAN_FRONTEND=noninteractive dpkg --purge {self.installed} >/dev/null", timeout=1800)
            self.installed = None
            if self.new_modules_dir:
                self.root(f"rm -rf {shlex.quote(f'/lib/modules/{self.release}')}")
        if self.copied:
            self.root(f"rm -rf {REMOTE_DIR}")
            self.copied = False

    # -- boots --------------------------------------------------------------------------

    def wait_boot(self, old_boot_id: str, deadline: float) -> dict | None:
        """The machine's ids once it answers with a boot_id other than `old_boot_id`; None at the deadline."""
        while time.monotonic() < deadline:
            try:
                conn = self.reconnect(self.machine)
                far = _probe(conn)
                if far["boot_id"] and far["boot_id"] != old_boot_id:
                    return far
            except TargetDown:
                pass
            time.sleep(2)
        return None

    def _console(self) -> str:
        if not self.control.console:
            return ""
        try:
            done = subprocess.run(self.control.console, shell=True, capture_output=True, timeout=60,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return "(the console command did not end within 60 s)"
        return done.stdout.decode(errors="replace").replace("\r", "")

    def mark_console(self) -> None:
        """Remember what the console said so far: the text of the boot that follows is what comes after."""
        self.console_before = self._console()

    def console_text(self) -> str:
        """What the console said since the last switch (mark_console), its last CONSOLE_BYTES."""
        if not self.control.console:
            return ""
        return console_since(self.console_before, self._console())

    def power_cycle(self, old_boot_id: str) -> dict | None:
        """The power-cycle command, then the machine back (on whatever its firmware boots)."""
        if not self.control.power_cycle:
            return None
        subprocess.run(self.control.power_cycle, shell=True, capture_output=True, timeout=300,
                       stdin=subprocess.DEVNULL)
        return self.wait_boot(old_boot_id, time.monotonic() + self.control.boot_timeout)

    def _kexec_back(self, default: str, cmdline: str) -> bool:
        """Load the default kernel (/boot/vmlinuz-DEFAULT, its initrd when /boot has one) with the
        command line it booted with, and start it; False when it cannot be loaded."""
        image, initrd = f"/boot/vmlinuz-{default}", f"/boot/initrd.img-{default}"
        words = " ".join(_cmdline_words(cmdline))
        load = (f"test -f {image} || exit 3; if test -f {initrd}; then i=--initrd={initrd}; else i=; fi; "
                f"kexec -l {image} $i --command-line={shlex.quote(words)}")
        try:
            self.root(load, timeout=300)
        except TargetDown:
            return False
        with contextlib.suppress(TargetDown):
            self.root("systemctl --no-block kexec", timeout=60)
        return True

    def back_to_default(self, default: str, cmdline: str, boot_id: str) -> str:
        """The machine back on its default kernel: by kexec, else `systemctl reboot` (the firmware boots
        the default kernel), else the power-cycle command; which way it took. TargetDown when none did."""
        started = time.monotonic()
        self.mark_console()
        far = None
        way = ""
        if self._kexec_back(default, cmdline):
            way = "kexec"
            far = self.wait_boot(boot_id, time.monotonic() + self.control.boot_timeout)
            if far is not None and far["release"] != default:
                boot_id, far = far["boot_id"], None      # it came back on another kernel: rebooted from there
            elif far is None:
                way = "power cycle"                     # no answer: nothing to ask for a reboot
                far = self.power_cycle(boot_id)
        if far is None and way != "power cycle":
            way = "reboot"
            with contextlib.suppress(TargetDown):
                self.root("systemctl --no-block reboot", timeout=60)
            far = self.wait_boot(boot_id, time.monotonic() + self.control.boot_timeout)
            if far is None:
                way = "power cycle"
                far = self.power_cycle(boot_id)
        if far is None or far["release"] != default:
            said = far["release"] if far else "nothing"
            tried = way if way != "power cycle" or self.control.power_cycle else f"{way}: no power_cycle configured"
            raise TargetDown(f"target down: {self.machine.on} did not come back on its default kernel {default} "
                             f"(it says {said}; tried {tried})", self.console_text())
        self.way_back = way
        self.say(f"{self.machine.on}: back on its default kernel {default} by {way} "
                 f"in {time.monotonic() - started:.0f} s")
        return way


@contextlib.contextmanager
def under_test(machine, control: BootControl, kernel: str | dict, keep: bool, connect, reconnect,
               say=lambda line: None) -> Iterator[dict]:
    """`machine` running `kernel` while inside; back on its default kernel, what was installed
    removed, after. Yields the facts of the switch. TargetDown when the kernel does not boot."""
    requested = time.monotonic()
    what = to_install(kernel, say)           # a recipe's package built before the machine is touched
    shown = label(kernel)
    switch = Switch(machine, control, kernel, keep, connect, reconnect, what, say)
    conn = connect(machine)
    first = _probe(conn)
    if first["uid"] != "0":
        refuse_without_sudo(machine, conn)
    refuse_this_machine(machine, first)
    switch.sudo = "" if first["uid"] == "0" else "sudo -n "
    # The default kernel, recorded before the switch: the way back boots it again with this command line.
    default, default_cmdline = first["release"], first["cmdline"]
    if switch.release == default and what.image is None:
        # A package of the running release would replace the default kernel's files (and its purge
        # remove them). An image is only copied: one of the default's release (a kernel tree's
        # build, each commit of a bisection) is kexec'ed like any other, told apart by `uname -v`.
        raise PerflabError(f"{machine.on} already runs {default}: a package of that release ({shown}) would replace "
                           "its default kernel's files; run on its running kernel (leave --kernel out), or build "
                           "the kernel with a release of its own (LOCALVERSION)")
    try:
        image, initrd = switch.install()
    except TargetDown as e:
        with contextlib.suppress(TargetDown):
            switch.remove()         # a half-installed package purged, what was copied removed
        raise TargetDown(f"kernel did not boot on {machine.on}: {shown} could not be installed: {e.summary}") from None
    try:
        switch.root(f"kexec -l {shlex.quote(image)}" + (f" --initrd={shlex.quote(initrd)}" if initrd else "")
                    + " --reuse-cmdline", timeout=300)
    except TargetDown as e:
        switch.remove()
        raise TargetDown(f"kernel did not boot on {machine.on}: kexec -l of {shown} failed: {e.summary}") from None
    switch.mark_console()
    with contextlib.suppress(TargetDown):
        # The connection may end before its answer does: the wait below tells whether it went down.
        switch.root("systemctl --no-block kexec", timeout=60)
    far = switch.wait_boot(first["boot_id"], time.monotonic() + control.boot_timeout)
    if far is None or not came_up_as_asked(far, what):
        why = (f"no answer over SSH within {control.boot_timeout:g} s" if far is None
               else f"it came back as {far['release']}, not {switch.release}" if far["release"] != switch.release
               else f"it came back as {far['release']} {far['version']!r}, not the image's {what.version!r}")
        console = switch.console_text()
        if far is None:
            far = switch.power_cycle(first["boot_id"])
            if far is None:
                raise TargetDown(f"kernel did not boot on {machine.on}: {shown}: {why}; "
                                 + ("the power-cycle command did not bring it back" if control.power_cycle
                                    else "no power_cycle command is configured to bring it back"), console)
        if far["release"] != default or (far["version"] != first["version"] and first["version"]):
            switch.back_to_default(default, default_cmdline, far["boot_id"])
        with contextlib.suppress(TargetDown):
            switch.remove()
        raise TargetDown(f"kernel did not boot on {machine.on}: {shown}: {why}; the machine is back on {default}",
                         console)
    booted = time.monotonic()
    try:
        if _cmdline_words(far["cmdline"]) != _cmdline_words(first["cmdline"]):
            raise TargetDown(f"kernel did not boot on {machine.on} as asked: its command line is {far['cmdline']!r}, "
                             f"not the reused {first['cmdline']!r}")
        yield {"kexec_kernel": shown, "kexec_release": far["release"], "kexec_default_kernel": default,
               "kexec_default_cmdline": default_cmdline, "kexec_cmdline": far["cmdline"],
               "kexec_boot_seconds": f"{booted - requested:.1f}", "kexec_initrd": initrd or "none",
               "kexec_kept": "yes" if keep else "no", "kexec_version": far["version"], **dict(what.facts)}
    finally:
        switch.back_to_default(default, default_cmdline, far["boot_id"])
        switch.remove()

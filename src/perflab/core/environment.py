"""Box facts: the one place that knows the machine a run executes on.

Every fact is read from the kernel's own files or from the tool concerned;
a fact that cannot be read is recorded as "n/a", never guessed.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import socket
import subprocess
from pathlib import Path

NA = "n/a"


def _read(path: str) -> str:
    try:
        return Path(path).read_text(errors="replace").strip()
    except OSError:
        return NA


def _bracketed(path: str, read=_read) -> str:
    """'always [madvise] never' -> 'madvise' (the selected THP mode)."""
    value = read(path)
    m = re.search(r"\[([^\]]+)\]", value)
    return m.group(1) if m else value


def _cpu_model(read=_read) -> str:
    for line in read("/proc/cpuinfo").splitlines():
        if line.startswith("model name") or line.startswith("Processor"):
            return line.split(":", 1)[1].strip()
    return (platform.processor() if read is _read else "") or NA


def _cpu_vendor(read=_read) -> str:
    """vendor_id (x86: GenuineIntel, AuthenticAMD) or the ARM implementer, from /proc/cpuinfo."""
    for line in read("/proc/cpuinfo").splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("vendor_id", "CPU implementer"):
            return value.strip()
    return NA


def dynamic_loader() -> str | None:
    """This machine's glibc dynamic loader (ld.so), or None."""
    for pattern in ("lib64/ld-linux-*.so.*", "lib/ld-linux-*.so.*", "lib/*-linux-gnu/ld-linux-*.so.*"):
        for path in sorted(Path("/").glob(pattern)):
            if os.access(path, os.X_OK):
                return str(path)
    return None


def hwcaps_from_diagnostics(text: str) -> str:
    """`ld.so --list-diagnostics` -> the glibc-hwcaps subdirectories in use ("x86-64-v3,x86-64-v2")."""
    names = re.search(r'^dl_hwcaps_subdirs="([^"]*)"', text, re.MULTILINE)
    active = re.search(r"^dl_hwcaps_subdirs_active=0x([0-9a-fA-F]+)", text, re.MULTILINE)
    if not names:
        return NA
    subdirs = [s for s in names.group(1).split(":") if s]
    if active:
        mask = int(active.group(1), 16)
        # Bit i stands for the i-th subdirectory of the list (glibc's _dl_hwcaps_subdirs_build_bitmask).
        subdirs = [s for i, s in enumerate(subdirs) if mask >> i & 1]
    return ",".join(subdirs) or "none"


def hwcaps_from_help(text: str) -> str:
    """`ld.so --help` (glibc 2.33+) -> the glibc-hwcaps subdirectories it marks supported."""
    section = text.partition("Subdirectories of glibc-hwcaps directories")[2].partition("\n\n")[0]
    found = re.findall(r"^\s+(\S+) \(supported", section, re.MULTILINE)
    return ",".join(found) or NA


def glibc_hwcaps() -> str:
    """The glibc-hwcaps subdirectories this CPU selects (which optimised libraries and, with
    the CPU's features, which string routines a program runs): "n/a" without glibc 2.33+."""
    loader = dynamic_loader()
    if loader is None:
        return NA
    for option, parse in (("--list-diagnostics", hwcaps_from_diagnostics), ("--help", hwcaps_from_help)):
        try:
            out = subprocess.run([loader, option], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return NA
        if out.returncode == 0:
            found = parse(out.stdout)
            if found != NA:
                return found
    return NA


def _cpu_topology(read=_read) -> tuple[int, int]:
    """(physical cores, hardware threads) from /proc/cpuinfo."""
    text = read("/proc/cpuinfo")
    threads = (os.cpu_count() if read is _read else text.count("\nprocessor") + text.startswith("processor")) or 0
    cores = set()
    phys = core = None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "physical id":
            phys = value.strip()
        elif key == "core id":
            core = value.strip()
        elif not line.strip():
            if core is not None:
                cores.add((phys, core))
            phys = core = None
    if core is not None:
        cores.add((phys, core))
    return (len(cores) or threads, threads)


def _memory_kib(read=_read) -> int | str:
    for line in read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1])
    return NA


def memory_available() -> int | None:
    """MemAvailable of /proc/meminfo in bytes (None when unknown): what a run may still use."""
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemAvailable:"):
            try:
                return int(line.split()[1]) * 1024
            except (ValueError, IndexError):
                return None
    return None


def _governor(read=_read) -> str:
    return read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")


def compiler_version(cc: str | None = None) -> tuple[str, str]:
    """(compiler command, first line of its --version) for $CC, default cc.

    Read once per compiler by cbuild, the one place that runs the compiler.
    """
    from perflab.core import cbuild

    cc = cc or cbuild.cc_command()
    try:
        return cc, cbuild.compiler(cc).version
    except cbuild.BuildError:
        return cc, NA


def _libc() -> str:
    name, ver = platform.libc_ver()
    return f"{name} {ver}".strip() or NA


def _aslr(read=_read) -> str:
    value = read("/proc/sys/kernel/randomize_va_space")
    meaning = {"0": "off", "1": "conservative", "2": "full"}.get(value)
    return f"{value} ({meaning})" if meaning else value


def git_state(repo: str) -> dict:
    """Commit and dirty flag of the system under test at `repo`; the repository (the main working
    tree of a linked worktree, which is then kept as `worktree`) and its origin URL (`remote`)."""
    from perflab.core.errors import PerflabError

    path = Path(repo)
    if not path.is_dir():
        raise PerflabError(f"--repo {repo}: no such directory")
    try:
        commit = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=30)
        if commit.returncode != 0:
            raise PerflabError(f"--repo {repo}: not a git repository with commits ({commit.stderr.strip().splitlines()[-1] if commit.stderr.strip() else 'git rev-parse failed'})")
        status = subprocess.run(["git", "-C", str(path), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise PerflabError("git is not installed; --repo needs it") from None
    here = str(path.resolve())
    state = {"commit": commit.stdout.strip(), "dirty": bool(status.stdout.strip()), "repo": here}
    # A linked worktree (the robot's and bisect's scratch trees are deleted after the run):
    # the repository is the main working tree; the worktree is kept beside it.
    listed = subprocess.run(["git", "-C", here, "worktree", "list", "--porcelain"], capture_output=True, text=True,
                            timeout=30).stdout.split("\n\n")[0].splitlines()
    main = listed[0].removeprefix("worktree ") if listed and listed[0].startswith("worktree ") else ""
    if main and "bare" not in listed and os.path.realpath(main) != here:
        state.update(repo=os.path.realpath(main), worktree=here)
    remote = subprocess.run(["git", "-C", here, "config", "--get", "remote.origin.url"], capture_output=True,
                            text=True, timeout=30).stdout.strip()
    if remote:
        state["remote"] = re.sub(r"(://[^/@:]*):[^/@]*@", r"\1@", remote)   # never a password
    return state


# The files a machine's facts are read from (`machine_facts`): a far machine's agent reads them.
MACHINE_FILES = ("/proc/cmdline", "/proc/cpuinfo", "/proc/meminfo", "/sys/kernel/mm/transparent_hugepage/enabled",
                 "/sys/kernel/mm/transparent_hugepage/defrag", "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
                 "/proc/sys/kernel/randomize_va_space", "/proc/loadavg")


def machine_facts(read=_read) -> dict:
    """The facts of a machine read from its kernel's files: this one's, or, with `read` (path ->
    text, NA when it cannot be read), a machine reached over SSH, through its agent."""
    cores, threads = _cpu_topology(read)
    return {
        "kernel_cmdline": read("/proc/cmdline"),
        "cpu_model": _cpu_model(read),
        "cpu_vendor": _cpu_vendor(read),
        "cpu_cores": cores,
        "cpu_threads": threads,
        "memory_kib": _memory_kib(read),
        "thp_enabled": _bracketed("/sys/kernel/mm/transparent_hugepage/enabled", read),
        "thp_defrag": _bracketed("/sys/kernel/mm/transparent_hugepage/defrag", read),
        "cpufreq_governor": _governor(read),
        "aslr": _aslr(read),
    }


def capture(box: str | None = None, cc: str | None = None) -> dict:
    """The facts of this machine now, as a flat dict of JSON-able values."""
    uname = os.uname()
    compiler, compiler_ver = compiler_version(cc)
    try:
        load = "%.2f %.2f %.2f" % os.getloadavg()
    except OSError:
        load = NA
    return {
        "testbox": box or socket.gethostname(),
        "hostname": socket.gethostname(),
        "kernel_release": uname.release,
        "kernel_version": uname.version,
        "arch": uname.machine,
        **machine_facts(),
        "cc": compiler,
        "cc_version": compiler_ver,
        "libc": _libc(),
        "glibc_hwcaps": glibc_hwcaps(),
        "python": platform.python_version(),
        "loadavg_start": load,
    }


def diff(a: dict, b: dict) -> list[tuple[str, object, object]]:
    keys = sorted(set(a) | set(b))
    return [(k, a.get(k, NA), b.get(k, NA)) for k in keys if a.get(k, NA) != b.get(k, NA)]

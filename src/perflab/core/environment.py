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


def _bracketed(path: str) -> str:
    """'always [madvise] never' -> 'madvise' (the selected THP mode)."""
    value = _read(path)
    m = re.search(r"\[([^\]]+)\]", value)
    return m.group(1) if m else value


def _cpu_model() -> str:
    for line in _read("/proc/cpuinfo").splitlines():
        if line.startswith("model name") or line.startswith("Processor"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or NA


def _cpu_topology() -> tuple[int, int]:
    """(physical cores, hardware threads) from /proc/cpuinfo."""
    threads = os.cpu_count() or 0
    cores = set()
    phys = core = None
    for line in _read("/proc/cpuinfo").splitlines():
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


def _memory_kib() -> int | str:
    for line in _read("/proc/meminfo").splitlines():
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


def _governor() -> str:
    return _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")


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


def _aslr() -> str:
    value = _read("/proc/sys/kernel/randomize_va_space")
    meaning = {"0": "off", "1": "conservative", "2": "full"}.get(value)
    return f"{value} ({meaning})" if meaning else value


def git_state(repo: str) -> dict:
    """Commit and dirty flag of the system under test at `repo`."""
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
    return {"commit": commit.stdout.strip(), "dirty": bool(status.stdout.strip()), "repo": str(path.resolve())}


def capture(box: str | None = None, cc: str | None = None) -> dict:
    """The facts of this machine now, as a flat dict of JSON-able values."""
    uname = os.uname()
    cores, threads = _cpu_topology()
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
        "kernel_cmdline": _read("/proc/cmdline"),
        "cpu_model": _cpu_model(),
        "cpu_cores": cores,
        "cpu_threads": threads,
        "memory_kib": _memory_kib(),
        "thp_enabled": _bracketed("/sys/kernel/mm/transparent_hugepage/enabled"),
        "thp_defrag": _bracketed("/sys/kernel/mm/transparent_hugepage/defrag"),
        "cpufreq_governor": _governor(),
        "aslr": _aslr(),
        "cc": compiler,
        "cc_version": compiler_ver,
        "libc": _libc(),
        "python": platform.python_version(),
        "loadavg_start": load,
    }


def diff(a: dict, b: dict) -> list[tuple[str, object, object]]:
    keys = sorted(set(a) | set(b))
    return [(k, a.get(k, NA), b.get(k, NA)) for k in keys if a.get(k, NA) != b.get(k, NA)]

"""Debian kernels to boot: fetch a `linux-image-*-unsigned` package once and keep its vmlinuz.

`apt-get download` fetches the package into a cache directory
($XDG_CACHE_HOME/perflab/kernels/, default ~/.cache/perflab/kernels/) and unpacks the
package's boot/ directory (vmlinuz, config, System.map) and the modules a guest may
load (MODULE_DIRS: virtio, 9p, file systems and what they depend on; ~50 of the
package's 390 MB). A second call finds the unpacked kernel and downloads nothing; a
kernel fetched before modules were kept gets them added.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from perflab.core.errors import PerflabError

# The two kernels of the 6.1 line Debian 12 ships as packages (issue 20's measurements).
DEFAULT_PACKAGE = "linux-image-6.1.0-47-amd64-unsigned"
OTHER_PACKAGE = "linux-image-6.1.0-50-amd64-unsigned"


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "perflab" / "kernels"


def _release(package: str) -> str:
    """'linux-image-6.1.0-47-amd64-unsigned' -> '6.1.0-47-amd64'."""
    name = package.removeprefix("linux-image-").removesuffix("-unsigned")
    return name


# The parts of lib/modules/RELEASE/kernel/ a guest loads from (perflab.execution.vm.modules):
# the virtio transports and disk, 9p, the file systems, and the libraries and crypto they need.
MODULE_DIRS = ("fs", "net/9p", "drivers/virtio", "drivers/block", "lib", "crypto", "arch/x86/crypto")


def cached(package: str = DEFAULT_PACKAGE) -> Path | None:
    """The unpacked vmlinuz of `package` (with its modules) if it was fetched before, else None."""
    path = cache_dir() / package / "boot" / f"vmlinuz-{_release(package)}"
    modules = cache_dir() / package / "lib" / "modules" / _release(package) / "kernel"
    return path if path.is_file() and modules.is_dir() else None


def _members() -> list[str]:
    out = ["./boot/*"]
    out += [f"./lib/modules/*/kernel/{d}/*" for d in MODULE_DIRS]
    return out + ["./lib/modules/*/modules.*"]


def fetch(package: str = DEFAULT_PACKAGE) -> Path:
    """The vmlinuz of a Debian kernel package, downloading and unpacking it the first time.

    Raises PerflabError (one line) when apt-get/dpkg-deb are missing or the download fails.
    """
    found = cached(package)
    if found:
        return found
    for tool, pkg in (("apt-get", "apt"), ("dpkg-deb", "dpkg")):
        if shutil.which(tool) is None:
            raise PerflabError(f"cannot fetch kernel {package}: {tool} not found (Debian package {pkg})")
    target = cache_dir() / package
    target.parent.mkdir(parents=True, exist_ok=True)
    # Download and unpack into a scratch directory beside the target, then rename it into
    # place: an interrupted fetch never leaves a half-unpacked kernel where `cached` looks.
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{package}.") as scratch:
        # apt-get download drops privileges to _apt where it can; a directory it may write avoids a warning.
        os.chmod(scratch, 0o755)
        done = subprocess.run(["apt-get", "download", package], cwd=scratch, capture_output=True,
                              text=True, stdin=subprocess.DEVNULL)
        debs = list(Path(scratch).glob(f"{package}_*.deb"))
        if done.returncode != 0 or not debs:
            lines = [line for line in (done.stderr or done.stdout).splitlines() if line.startswith("E:")]
            why = lines[0] if lines else f"apt-get download exited {done.returncode}"
            raise PerflabError(f"cannot fetch kernel package {package}: {why} (run apt-get update?)")
        unpack = Path(scratch) / "unpacked"
        unpack.mkdir()
        tar = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(debs[0])], stdout=subprocess.PIPE)
        extracted = subprocess.run(["tar", "-x", "-C", str(unpack), "--wildcards", *_members()],
                                   stdin=tar.stdout, capture_output=True, text=True)
        tar.stdout.close()
        if tar.wait() != 0 or extracted.returncode != 0:
            raise PerflabError(f"cannot unpack {debs[0].name}: {extracted.stderr.strip() or 'dpkg-deb failed'}")
        # The package file's name (its exact version) is the kernel's provenance; the 70 MB .deb is not kept.
        (unpack / "package").write_text(debs[0].name + "\n")
        if (target / "boot").is_dir() and not (target / "lib").exists():
            os.rename(unpack / "lib", target / "lib")   # a kernel fetched before modules were kept
        elif target.exists():                        # fetched meanwhile by another process
            return cached(package) or target
        else:
            os.rename(unpack, target)
    found = cached(package)
    if found is None:
        raise PerflabError(f"kernel package {package} has no boot/vmlinuz-{_release(package)}")
    return found


def config_of(kernel: Path) -> Path | None:
    """The kernel's .config when it sits beside it (Debian's boot/config-RELEASE, or a build tree's .config)."""
    name = kernel.name
    candidates = []
    if name.startswith("vmlinuz-"):
        candidates.append(kernel.with_name("config-" + name.removeprefix("vmlinuz-")))
    # arch/x86/boot/bzImage -> the build tree's .config three levels up
    if name == "bzImage" and len(kernel.parents) >= 3:
        candidates.append(kernel.parents[2] / ".config")
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    return None


def config_hash(kernel: Path) -> str | None:
    """sha256 (first 16 hex digits) of the kernel's config file when one is found beside it."""
    config = config_of(kernel)
    if config is None:
        return None
    return hashlib.sha256(config.read_bytes()).hexdigest()[:16]

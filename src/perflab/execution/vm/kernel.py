"""Debian kernels to boot: fetch a `linux-image-*-unsigned` package once and keep its vmlinuz.

`apt-get download` fetches the package into a cache directory
($XDG_CACHE_HOME/perflab/kernels/, default ~/.cache/perflab/kernels/) and unpacks the
package's boot/ directory (vmlinuz, config, System.map) and the modules a guest may
load (MODULE_DIRS: virtio, 9p, file systems and what they depend on; ~50 of the
package's 390 MB). A second call finds the unpacked kernel and downloads nothing; a
kernel fetched before modules were kept gets them added.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from perflab.core import paths
from perflab.core.errors import PerflabError, UsageProblem
from perflab.core.steps import step

# The two kernels of the 6.1 line Debian 12 ships as packages (issue 20's measurements).
DEFAULT_PACKAGE = "linux-image-6.1.0-47-amd64-unsigned"
OTHER_PACKAGE = "linux-image-6.1.0-50-amd64-unsigned"

# The exact builds of those two that perflab's tests were green with: Debian version and the
# .deb's sha256 (`apt-cache show PACKAGE`). apt checks a download against the archive's
# signed index; this also checks that it is *this* file, so the kernels a new machine boots
# in the tests are the ones they were written against. A new Debian upload of the same ABI
# is refused in one line until the pin is moved here, deliberately (docs/dependencies.md).
PINNED = {
    DEFAULT_PACKAGE: ("6.1.170-3", "cb9a263a6d0d2debe8ac20eadc1065ffb8b22d27f4a6471ac1c0314db341dfb0"),
    OTHER_PACKAGE: ("6.1.176-1", "439422e41d2dbb840b60b81e3bf5e5955bfa56b7a8c268aec83c9ff882d421e6"),
}

# What the package's own DEBIAN/md5sums says of the vmlinuz of those uploads (`dpkg-deb -I DEB
# md5sums`): a kernel fetched before perflab kept that list (MD5SUMS) is still checked.
PINNED_IMAGE_MD5 = {
    DEFAULT_PACKAGE: "83d46ed6d7230a1bbcb73eb1dadb086b",
    OTHER_PACKAGE: "ccd20ad436e97475e366b6a0b69fcc4e",
}
# Kept beside the unpacked kernel at fetch: the package's md5sums lines of the files unpacked.
MD5SUMS = "md5sums"


def cache_dir() -> Path:
    return paths.cache_home() / "kernels"


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
    if not (path.is_file() and modules.is_dir()):
        return None
    if package in PINNED:
        # A kernel unpacked from another upload than the pinned one is not the tested kernel.
        recorded = cache_dir() / package / "package"
        try:
            name = recorded.read_text().strip()
        except OSError:
            return None
        if name != _deb_name(package):
            return None
    return path


def _deb_name(package: str) -> str:
    """The file name apt gives the pinned upload of `package`."""
    version = PINNED[package][0]
    return f"{package}_{version.replace(':', '%3a')}_amd64.deb"


def _members() -> list[str]:
    out = ["./boot/*"]
    out += [f"./lib/modules/*/kernel/{d}/*" for d in MODULE_DIRS]
    return out + ["./lib/modules/*/modules.*"]


def fetch(package: str = DEFAULT_PACKAGE, replace_damaged: bool = False) -> Path:
    """The vmlinuz of a Debian kernel package, downloading and unpacking it the first time.

    A cached image that is not what the package holds (`damage`) is refused, saying how to
    fetch it again; `replace_damaged` (`perflab kernel fetch`) fetches it again instead.
    Raises PerflabError (one line) when apt-get/dpkg-deb are missing or the download fails.
    """
    found = cached(package)
    damaged = damage(package) if found else None
    if found and not damaged:
        return found
    if damaged and not replace_damaged:
        name = DEBIAN + _release(package)
        raise PerflabError(f"damaged cached image {found}: {damaged}; refetch with `perflab kernel fetch {name}`")
    target = cache_dir() / package
    target.parent.mkdir(parents=True, exist_ok=True)
    # Download and unpack into a scratch directory beside the target, then rename it into
    # place: an interrupted fetch never leaves a half-unpacked kernel where `cached` looks.
    with paths.temporary_directory(target) as scratch:
        debs = [_download(package, Path(scratch))]
        unpack = Path(scratch) / "unpacked"
        unpack.mkdir()
        with step(f"unpacking {debs[0].name}"):
            names = _unpack(debs[0], unpack)
        # The package file's name (its exact version) is the kernel's provenance; the 70 MB .deb is not kept.
        (unpack / "package").write_text(debs[0].name + "\n")
        # The package's own checksums of what was unpacked, to check the image against later.
        (unpack / MD5SUMS).write_text(_package_md5sums(debs[0], set(names)))
        if target.exists() and (cached(package) is None or damage(package)):
            # Another upload than the pinned one, or one fetched before modules were kept:
            # moved aside, then replaced whole.
            stale = Path(scratch) / "stale"
            os.rename(target, stale)
        if not target.exists():
            os.rename(unpack, target)
        # else: fetched meanwhile by another process
    found = cached(package)
    if found is None:
        raise PerflabError(f"kernel package {package} has no boot/vmlinuz-{_release(package)}")
    return found


def _download(package: str, scratch: Path) -> Path:
    """`apt-get download` of `package` (its pinned upload, checked) into `scratch`: the .deb; PerflabError
    in one line when it cannot be fetched. The one download of a Debian kernel package: unpacked for
    a guest (fetch), installed on an SSH machine as it is (download_deb)."""
    for tool, pkg in (("apt-get", "apt"), ("dpkg-deb", "dpkg")):
        if shutil.which(tool) is None:
            raise PerflabError(f"cannot fetch kernel {package}: {tool} not found (Debian package {pkg})")
    # apt-get download drops privileges to _apt where it can; a directory it may write avoids a warning.
    os.chmod(scratch, 0o755)
    wanted = f"{package}={PINNED[package][0]}" if package in PINNED else package
    with step(f"fetching {wanted} (apt-get download)"):
        done = subprocess.run(["apt-get", "download", wanted], cwd=scratch, capture_output=True,
                              text=True, stdin=subprocess.DEVNULL)
    debs = list(scratch.glob(f"{package}_*.deb"))
    if done.returncode != 0 or not debs:
        lines = [line for line in (done.stderr or done.stdout).splitlines() if line.startswith("E:")]
        why = lines[0] if lines else f"apt-get download exited {done.returncode}"
        if package in PINNED:
            why += f" (perflab pins {wanted}: perflab.execution.vm.kernel.PINNED)"
        raise PerflabError(f"cannot fetch kernel package {package}: {why} (run apt-get update?)")
    if package in PINNED:
        _check_pinned(package, debs[0])
    return debs[0]


def download_deb(package: str) -> Path:
    """The .deb of `package` itself (to install on a machine), downloaded once into the cache beside
    its unpacked kernel (`deb/`), renamed into place whole."""
    top = cache_dir() / package / "deb"
    found = sorted(top.glob(f"{package}_*.deb"))
    if found:
        return found[0]
    top.mkdir(parents=True, exist_ok=True)
    with paths.temporary_directory(top / "fetch") as scratch:
        deb = _download(package, Path(scratch))
        os.rename(deb, top / deb.name)
    return top / deb.name


def _unpack(deb: Path, into: Path) -> list[str]:
    """Every file name of the package's data (tar names: ./boot/...), those `_members` matches
    unpacked into `into`, in one pass: dpkg-deb decompresses the data once (a listing pass, then
    an extracting one, did it twice: ~3.5 s of CPU a kernel). A pattern may match nothing (the
    cloud kernels build no 9p)."""
    extract = {"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}   # Python >= 3.11.4
    patterns = _members()
    names: list[str] = []
    with tempfile.TemporaryFile() as errors:
        data = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE, stderr=errors)
        try:
            with tarfile.open(fileobj=data.stdout, mode="r|") as archive:
                for member in archive:
                    names.append(member.name)
                    if any(fnmatch.fnmatchcase(member.name, p) for p in patterns):
                        archive.extract(member, into, **extract)
        except (tarfile.TarError, OSError) as e:
            data.kill()
            raise PerflabError(f"cannot unpack {deb.name}: {e}") from None
        finally:
            data.stdout.close()
            failed = data.wait() != 0
        if failed:
            errors.seek(0)
            said = errors.read().decode(errors="replace").strip()
            raise PerflabError(f"cannot unpack {deb.name}: {said.splitlines()[-1] if said else 'dpkg-deb failed'}")
    return names


def _package_md5sums(deb: Path, unpacked: set[str]) -> str:
    """The .deb's DEBIAN/md5sums lines of the files in `unpacked` (tar names: ./boot/...)."""
    done = subprocess.run(["dpkg-deb", "--info", str(deb), "md5sums"], capture_output=True, text=True)
    if done.returncode != 0:
        raise PerflabError(f"cannot read the checksums of {deb.name}: {done.stderr.strip() or 'dpkg-deb failed'}")
    kept = [line for line in done.stdout.splitlines()
            if len(line.split(None, 1)) == 2 and "./" + line.split(None, 1)[1].strip() in unpacked]
    return "".join(line + "\n" for line in kept)


def bzimage_damage(path: Path) -> str | None:
    """Why a bzImage is cut short, by its own boot header (Documentation/arch/x86/boot.rst): the
    setup sectors and the protected-mode part (syssize, 16-byte units) it says follow; None
    when the file is whole or is no bzImage (an ELF vmlinux, another format: not judged)."""
    try:
        with open(path, "rb") as f:
            head = f.read(0x260)
            size = os.fstat(f.fileno()).st_size
    except OSError as e:
        return f"cannot read it ({e.strerror})"
    if len(head) < 0x206 or head[0x202:0x206] != b"HdrS":
        return None
    setup_sects = head[0x1F1] or 4
    syssize = int.from_bytes(head[0x1F4:0x1F8], "little")
    needed = (setup_sects + 1) * 512 + syssize * 16
    if size < needed:
        return f"it is {size} bytes, its boot header says at least {needed} (cut short)"
    return None


# damage() of an image already read in this process, by (path, size, mtime): a job asks for its
# image several times (its checks, its share key, its boot).
_JUDGED: dict[tuple, str | None] = {}


def damage(package: str) -> str | None:
    """Why the cached image of `package` is not the package's (cut short, changed), or None.

    Checked against the package's own md5sums kept at fetch (or, for a pinned upload fetched
    before they were kept, PINNED_IMAGE_MD5), and the bzImage's header; about 20 ms, once per
    process and state of the file."""
    path = cache_dir() / package / "boot" / f"vmlinuz-{_release(package)}"
    try:
        st = path.stat()
    except OSError:
        return f"{path.name} is missing"
    try:
        sums = (cache_dir() / package / MD5SUMS).stat()
        listed = (sums.st_size, sums.st_mtime_ns)
    except OSError:
        listed = None
    key = (str(path), st.st_size, st.st_mtime_ns, st.st_ino, listed)
    if key not in _JUDGED:
        _JUDGED[key] = _damage(package, path)
    return _JUDGED[key]


def _damage(package: str, path: Path) -> str | None:
    cut = bzimage_damage(path)
    if cut:
        return cut
    expected = PINNED_IMAGE_MD5.get(package)
    try:
        for line in (cache_dir() / package / MD5SUMS).read_text().splitlines():
            digest, _, name = line.partition(" ")
            if name.strip() == f"boot/{path.name}":
                expected = digest
    except OSError:
        pass
    if expected is None:
        return None               # fetched before checksums were kept, no pin: the header only
    with open(path, "rb") as f:
        actual = hashlib.md5(f.read(), usedforsecurity=False).hexdigest()
    if actual != expected:
        return f"its md5 {actual} is not the package's {expected}"
    return None


def _check_pinned(package: str, deb: Path) -> None:
    version, sha256 = PINNED[package]
    digest = hashlib.sha256()
    with open(deb, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != sha256:
        raise PerflabError(f"{deb.name}: sha256 {digest.hexdigest()} is not the pinned {sha256} of {package} "
                           f"{version}; not unpacked")


def config_of(kernel: Path) -> Path | None:
    """The kernel's .config when it sits beside it (Debian's boot/config-RELEASE, or a build tree's .config)."""
    name = kernel.name
    candidates = []
    if name.startswith("vmlinuz-"):
        candidates.append(kernel.with_name("config-" + name.removeprefix("vmlinuz-")))
    # A kernel kept with its config (a bisection's built images: DIR/bzImage beside DIR/.config).
    candidates.append(kernel.with_name(".config"))
    # arch/x86/boot/bzImage -> the build tree's .config, four levels up (BUILD/arch/x86/boot/bzImage)
    if name == "bzImage" and len(kernel.parents) >= 4:
        candidates.append(kernel.parents[3] / ".config")
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    return None


def preempt_rt(kernel: Path) -> bool:
    """Whether the kernel is a PREEMPT_RT one, by the config beside it (Debian's -rt flavour)."""
    config = config_of(Path(kernel))
    try:
        return config is not None and "\nCONFIG_PREEMPT_RT=y\n" in config.read_text(errors="replace")
    except OSError:
        return False


def config_hash(kernel: Path) -> str | None:
    """sha256 (first 16 hex digits) of the kernel's config file when one is found beside it."""
    config = config_of(kernel)
    if config is None:
        return None
    return hashlib.sha256(config.read_bytes()).hexdigest()[:16]


def system_map(image: Path) -> Path | None:
    """The System.map of a kernel image, where a build or a package leaves it: beside the image
    (System.map, or System.map-RELEASE beside vmlinuz-RELEASE), or at the top of the build
    tree of arch/x86/boot/bzImage. None when there is none, or only Debian's placeholder
    (which says the real one is in the -dbg package)."""
    image = Path(image).resolve()
    release = image.name.split("-", 1)[1] if image.name.startswith("vmlinuz-") and "-" in image.name else None
    candidates = [image.parent / "System.map", *([image.parent / f"System.map-{release}"] if release else [])]
    if image.parent.name == "boot" and image.parent.parent.name == "x86" and len(image.parents) > 3:
        candidates.append(image.parents[3] / "System.map")
    for path in candidates:
        try:
            with open(path, errors="replace") as f:
                head = f.read(1 << 16)
        except OSError:
            continue
        lines = [line.split() for line in head.splitlines()[:-1]]
        if sum(1 for w in lines if len(w) == 3 and w[1] in "tTwW" and w[0].strip("0f")) >= 3:
            return path
    return None


# `kernel: debian:RELEASE` (and `--kernel debian:RELEASE`): Debian's kernel of that release, fetched
# by `apt-get download` as the tests fetch theirs. RELEASE is what `uname -r` says in it:
# 6.1.0-56-amd64, 6.1.0-56-cloud-amd64, 6.1.0-56-rt-amd64, 6.12.117+deb12-amd64.
DEBIAN = "debian:"
# Matched whole (fullmatch), ASCII only: `$` also matches before a final newline, and \w any
# script's letters; a name with either reached apt-get (issue 45, D3).
_DEBIAN_RELEASE = re.compile(r"[0-9]+\.[0-9]+[A-Za-z0-9_.+~-]*-amd64")


def debian_package(kernel: str) -> str:
    """'debian:6.1.0-56-amd64' -> 'linux-image-6.1.0-56-amd64-unsigned'; UsageProblem for a name
    that is not a Debian kernel release."""
    release = kernel.removeprefix(DEBIAN)
    if not _DEBIAN_RELEASE.fullmatch(release):
        raise UsageProblem(f"kernel {kernel!r}: expected debian:RELEASE, RELEASE as `uname -r` says it "
                           "(debian:6.1.0-56-amd64, debian:6.1.0-56-rt-amd64, debian:6.12.117+deb12-amd64)")
    return f"linux-image-{release}-unsigned"


def image(kernel: str) -> Path:
    """The image file a job's `kernel` names: a path as it is; debian:RELEASE fetched (once) and unpacked
    into perflab's cache. PerflabError in one line when it cannot be fetched."""
    if kernel.startswith(DEBIAN):
        return fetch(debian_package(kernel))
    cut = bzimage_damage(Path(kernel)) if Path(kernel).is_file() else None
    if cut:
        raise PerflabError(f"damaged kernel image {kernel}: {cut}")
    return Path(kernel)


def fetched() -> list[tuple[str, Path, int, str | None]]:
    """The Debian kernels in the cache: (debian:RELEASE, image, bytes on disk, why it is damaged
    or None), by name."""
    out = []
    for package in sorted(p.name for p in cache_dir().glob("linux-image-*-unsigned") if p.is_dir()):
        path = cached(package)
        if path is None:
            continue
        size = sum(f.stat().st_size for f in (cache_dir() / package).rglob("*") if f.is_file())
        out.append((DEBIAN + _release(package), path, size, damage(package)))
    return out


def remove(kernel: str) -> int:
    """Remove a fetched Debian kernel from the cache; the bytes freed (0 when it was not there)."""
    target = cache_dir() / debian_package(kernel)
    if not target.is_dir():
        return 0
    size = sum(f.stat().st_size for f in target.rglob("*") if f.is_file())
    shutil.rmtree(target)
    return size

"""Debian kernels in perflab's cache: names checked whole, images checked against their package
(issue 45, D3 and D4).

D3: `debian:6.1.0-47-amd64` followed by a newline passed the name check (`$` matches before a
final newline) and reached apt-get. D4: a truncated cached vmlinuz booted, and failed as "stopped
before perflab's init ran (QEMU exited with 0)"; `kernel list` listed it as good. The image is
now checked against the package's own md5sums (kept at fetch; for the pinned uploads, their
vmlinuz's md5 is pinned too) and against its boot header, before anything boots.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import assert_one_line_error
from perflab.execution.vm import kernel

PACKAGE = kernel.DEFAULT_PACKAGE
RELEASE = "debian:6.1.0-47-amd64"
CACHED = kernel.cached(PACKAGE)
needs_cached = pytest.mark.skipif(CACHED is None, reason="needs the pinned Debian kernel: python tools/fetch_kernel.py")


@pytest.mark.parametrize("name", [f"{RELEASE}\n", f"{RELEASE}\r", f"{RELEASE}\nx", "debian:6.1.0-47-amd64 ",
                                  "debian:６.1.0-47-amd64", "debian:6.1.0-47-ａmd64"])
def test_a_debian_name_with_a_trailing_newline_or_other_script_is_refused(name):
    with pytest.raises(Exception, match="expected debian:RELEASE"):
        kernel.debian_package(name)


def test_a_debian_name_with_a_newline_is_refused_before_apt_get(cli):
    proc = cli("kernel", "fetch", f"{RELEASE}\n", check=False)
    assert_one_line_error(proc, "expected debian:RELEASE")
    proc = cli("run", "cmd", "--kernel", f"{RELEASE}\n", "--", "true", check=False)
    assert_one_line_error(proc, "expected debian:RELEASE")


def _copy_of_the_cache(cache: Path) -> Path:
    """The pinned kernel's boot/ directory and its recorded package name in a cache of the test's
    own (modules left empty: nothing here boots)."""
    src = kernel.cache_dir() / PACKAGE
    dst = cache / "perflab" / "kernels" / PACKAGE
    shutil.copytree(src / "boot", dst / "boot")
    (dst / "lib" / "modules" / "6.1.0-47-amd64" / "kernel").mkdir(parents=True)
    shutil.copy2(src / "package", dst / "package")
    return dst / "boot" / "vmlinuz-6.1.0-47-amd64"


@needs_cached
def test_a_truncated_cached_image_is_refused_before_booting_and_marked_in_the_list(cli, tmp_path):
    cache = tmp_path / "own-cache"
    image = _copy_of_the_cache(cache)
    env = {"XDG_CACHE_HOME": str(cache)}
    listed = cli("kernel", "list", env=env).stdout
    assert RELEASE in listed and "DAMAGED" not in listed, listed

    data = image.read_bytes()
    image.write_bytes(data[: len(data) // 2])
    listed = cli("kernel", "list", env=env).stdout
    line = next(line for line in listed.splitlines() if line.startswith(RELEASE))
    assert "DAMAGED: it is" in line and "cut short" in line and f"perflab kernel fetch {RELEASE}" in line, line

    proc = cli("run", "cmd", "--kernel", RELEASE, "--vm", "tcg", "--runs", "1", "--", "true", check=False,
               env=env, timeout=300)
    assert_one_line_error(proc, f"damaged cached image {image}", "cut short", f"refetch with `perflab kernel fetch {RELEASE}`")
    assert not cli.db.exists() or cli.sql("SELECT count(*) FROM run") == [(0,)]


@needs_cached
def test_a_changed_cached_image_of_full_length_is_refused_by_its_checksum(tmp_path, monkeypatch):
    cache = tmp_path / "own-cache"
    image = _copy_of_the_cache(cache)
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    assert kernel.damage(PACKAGE) is None
    data = bytearray(image.read_bytes())
    data[-100] ^= 0xFF
    image.write_bytes(bytes(data))
    assert "is not the package's 83d46ed6d7230a1bbcb73eb1dadb086b" in kernel.damage(PACKAGE)
    with pytest.raises(Exception, match="damaged cached image .*refetch with `perflab kernel fetch debian:6.1.0-47-amd64`"):
        kernel.image(RELEASE)
    # The checksums kept at fetch (the package's md5sums lines) win over the pin.
    (image.parents[1] / kernel.MD5SUMS).write_text(f"{__import__('hashlib').md5(bytes(data)).hexdigest()}  "
                                                   f"boot/{image.name}\n")
    assert kernel.damage(PACKAGE) is None


def test_a_bzimage_cut_short_is_known_by_its_header(tmp_path):
    whole = tmp_path / "bzImage"
    header = bytearray(0x260)
    header[0x1F1] = 3                                        # setup sectors
    header[0x1F4:0x1F8] = (1000).to_bytes(4, "little")       # 16-byte units of the kernel proper
    header[0x202:0x206] = b"HdrS"
    whole.write_bytes(bytes(header) + b"\0" * ((3 + 1) * 512 + 16000 - len(header)))
    assert kernel.bzimage_damage(whole) is None
    whole.write_bytes(whole.read_bytes()[:3000])
    assert "it is 3000 bytes, its boot header says at least 18048" in kernel.bzimage_damage(whole)
    other = tmp_path / "vmlinux"
    other.write_bytes(b"\x7fELF" + b"\0" * 100)
    assert kernel.bzimage_damage(other) is None              # not a bzImage: not judged


@pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="needs dpkg-deb (Debian package dpkg)")
def test_the_packages_own_checksums_of_what_was_unpacked_are_kept(tmp_path):
    """At fetch, the .deb's DEBIAN/md5sums lines of the unpacked files are what `damage` checks
    against: read from a real package built here by dpkg-deb."""
    import hashlib
    import subprocess

    root = tmp_path / "pkg"
    (root / "boot").mkdir(parents=True)
    (root / "DEBIAN").mkdir()
    (root / "boot" / "vmlinuz-9.9.9-amd64").write_bytes(b"image")
    (root / "usr").mkdir()
    (root / "usr" / "other").write_bytes(b"other")
    (root / "DEBIAN" / "control").write_text("Package: k\nVersion: 1\nArchitecture: amd64\nMaintainer: t <t@e.org>\n"
                                             "Description: t\n")
    (root / "DEBIAN" / "md5sums").write_text(f"{hashlib.md5(b'image').hexdigest()}  boot/vmlinuz-9.9.9-amd64\n"
                                             f"{hashlib.md5(b'other').hexdigest()}  usr/other\n")
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", str(root), str(tmp_path / "k.deb")], check=True,
                   capture_output=True)
    kept = kernel._package_md5sums(tmp_path / "k.deb", {"./boot/vmlinuz-9.9.9-amd64"})
    assert kept == f"{hashlib.md5(b'image').hexdigest()}  boot/vmlinuz-9.9.9-amd64\n"

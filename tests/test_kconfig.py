"""`perflab kernel check` and `perflab kernel config` (issue 20, item 6).

The check runs on the config Debian ships with its kernel (tools/fetch_kernel.py keeps boot/config-*
beside the vmlinuz) and on configs written here; generating a config needs a kernel tree
(linux-source-6.1 unpacked, as tools/bench/kernel_bisect.py does, or PERFLAB_LINUX_TREE).
"""

from __future__ import annotations

import os
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from conftest import PERFLAB, assert_one_line_error
from perflab.execution.vm import kconfig, kernel

DEBIAN = kernel.cached(kernel.DEFAULT_PACKAGE)
_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "perflab"
# $PERFLAB_LINUX_TREE, else a whole tree unpacked in the cache, else what of one tools/test.sh unpacks
# for kconfig (its Kconfig, Makefile and Kbuild files, scripts/, the configs: the same config).
TREE = Path(os.environ.get("PERFLAB_LINUX_TREE") or next(
    (t for t in (_CACHE / "linux/linux-source-6.1", _CACHE / "kconfig-tree/linux-source-6.1")
     if (t / "Makefile").is_file()), _CACHE / "kconfig-tree/linux-source-6.1"))


def _full() -> str:
    return "".join(f"CONFIG_{n}=y\n" for n in kconfig.NAMES)


def test_a_config_with_every_option_passes_and_one_lacking_some_is_named_in_one_line(cli, tmp_path):
    good = tmp_path / "good.config"
    good.write_text(_full())
    out = cli("kernel", "check", good)
    assert "has all" in out.stdout
    bad = tmp_path / "bad.config"
    bad.write_text(_full().replace("CONFIG_9P_FS=y", "CONFIG_9P_FS=m").replace("CONFIG_FUTEX=y\n", "")
                   .replace("CONFIG_SMP=y", "# CONFIG_SMP is not set"))
    proc = cli("kernel", "check", bad, check=False)
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert len(lines) == 1 and "lacks 3 of" in lines[0]
    assert "CONFIG_FUTEX" in lines[0] and "CONFIG_SMP" in lines[0] and "CONFIG_9P_FS=m" in lines[0]


def test_not_a_config_is_a_one_line_error(cli, tmp_path):
    junk = tmp_path / "junk"
    junk.write_bytes(b"\x00\x01 no config here")
    assert_one_line_error(cli("kernel", "check", junk, check=False), "no kernel configuration found")
    assert_one_line_error(cli("kernel", "check", tmp_path / "nope", check=False), "no such file")
    assert_one_line_error(cli("kernel", "config", "--tree", tmp_path, "-o", tmp_path / "x", check=False),
                          "not a kernel source tree")
    assert not (tmp_path / "x").exists()


@pytest.mark.skipif(not DEBIAN, reason="needs a Debian kernel: python tools/fetch_kernel.py")
def test_the_debian_kernel_is_read_through_the_config_beside_it_and_its_modules_named(cli):
    proc = cli("kernel", "check", DEBIAN, check=False)
    line, = proc.stdout.splitlines()
    assert proc.returncode == 0 and f"config-{DEBIAN.name.removeprefix('vmlinuz-')}" in line
    # Debian builds virtio and 9p as modules, which the guest loads itself (issue 34: the check
    # said "perflab's initramfs loads none", while it loads them): named as such, not lacking.
    assert "has all" in line and "as modules the guest loads" in line
    assert "CONFIG_9P_FS=m" in line and "CONFIG_VIRTIO_PCI=m" in line and "CONFIG_SERIAL_8250 " not in line


def test_ikconfig_is_read_from_an_image(tmp_path):
    import gzip
    import lzma

    vmlinux = b"\x7fELF" + b"\0" * 100 + b"IKCFG_ST" + gzip.compress(_full().encode()) + b"IKCFG_ED" + b"\0" * 64
    image = tmp_path / "bzImage"
    image.write_bytes(b"MZ\0\0" + b"\x90" * 512 + lzma.compress(vmlinux) + b"\0" * 32)
    text, where = kconfig.config_text(image)
    assert where.endswith("(IKCONFIG)") and kconfig.missing(kconfig.parse(text)) == []


@pytest.mark.skipif(not (TREE / "Makefile").is_file(), reason=f"needs a kernel tree at {TREE} "
                    "(apt-get install linux-source-6.1 flex bison; tools/test.sh unpacks it)")
def test_kernel_config_writes_a_config_with_every_option_from_tinyconfig(cli, tmp_path):
    out = tmp_path / "min.config"
    cli("kernel", "config", "--tree", TREE, "-o", out, timeout=600)
    config = kconfig.parse(out.read_text())
    assert kconfig.missing(config) == [] and config["CONFIG_IKCONFIG"] == "y"
    assert config.get("CONFIG_MODULES", "n") == "n"       # tinyconfig's base: no modules
    assert "has all" in cli("kernel", "check", out).stdout
    assert not (TREE / ".config").exists()                # the tree is left as it was


def _check_in_child(path: Path) -> tuple[subprocess.CompletedProcess, int]:
    """`perflab kernel check PATH` in a child; (its result, its peak resident memory in bytes)."""
    code = ("import resource, subprocess, sys; "
            f"p = subprocess.run({[PERFLAB, 'kernel', 'check']!r} + [sys.argv[1]], capture_output=True, text=True, "
            "timeout=120); "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); "
            "sys.stderr.write(p.stderr); sys.exit(p.returncode)")
    proc = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=150)
    return proc, int(proc.stdout.strip().splitlines()[-1]) * 1024


def _gzip_of_zeros(path: Path, size: int) -> None:
    out = zlib.compressobj(1, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(1 << 20)
    with open(path, "wb") as f:
        for _ in range(size >> 20):
            f.write(out.compress(block))
        f.write(out.flush())


def test_hostile_images_are_read_in_bounded_memory_and_time(tmp_path):
    """Issue 31 M2/M3: a 4 GB sparse file and a gzip of 1 GB of zeros took 4.2 GB of memory; 300 KB of
    gzip signatures 90 s. Each is now a one-line refusal in bounded memory (200 MB; ~40 MB measured);
    tools/bench/kernel_check_bounds.py measures the time (goal 5 s each)."""
    sparse = tmp_path / "sparse"
    with open(sparse, "wb") as f:
        f.truncate(4 << 30)
    bomb = tmp_path / "bomb.gz"
    _gzip_of_zeros(bomb, 1 << 30)
    signatures = tmp_path / "signatures"
    signatures.write_bytes(b"\x1f\x8b\x08" * 1_000_000)
    for path in (sparse, bomb, signatures):
        proc, peak = _check_in_child(path)
        assert_one_line_error(proc, str(path), "no kernel configuration found")
        assert peak < 200 << 20, f"{path.name}: {peak >> 20} MB"


def test_what_is_not_a_file_is_named_so(cli, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert_one_line_error(cli("kernel", "check", fifo, check=False), "not a regular file")
    assert_one_line_error(cli("kernel", "check", "/dev/null", check=False), "not a regular file")

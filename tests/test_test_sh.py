"""tools/test.sh, the script CI runs: what it leaves behind when it stops early."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TEST_SH = ROOT / "tools" / "test.sh"
TARBALL = Path("/usr/src/linux-source-6.1.tar.xz")


def _missing_packages() -> list[str]:
    """The Debian packages test.sh would install first (a test must not run apt-get)."""
    names = re.search(r'^PACKAGES="([^"]*)"', TEST_SH.read_text(), re.M).group(1).split()
    return [p for p in names if "install ok installed" not in subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", p], capture_output=True, text=True).stdout]


def _processes_naming(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.skipif(not TARBALL.exists() or not Path("/usr/bin/dpkg-query").exists(),
                    reason="no linux-source-6.1 tarball (Debian package linux-source-6.1) to unpack")
def test_a_failed_install_leaves_no_kernel_tree_unpacking_behind(tmp_path):
    """The kernel tree's unpack (tar, ~30 s of a CPU) runs in the background beside the Python
    install. A script's background jobs ignore SIGINT and outlive it: an install that failed
    (set -e) or a Ctrl-C left tar unpacking 1.4 GB into the cache after test.sh had exited,
    on a machine about to measure. Here the install fails at once (no Python 3.11)."""
    if missing := _missing_packages():
        pytest.skip(f"test.sh would install {' '.join(missing)} first")
    env = {**os.environ, "PYTHON": "false", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    # Files, not pipes: a pipe stays open in whatever test.sh left running, and run() would wait for it.
    with open(tmp_path / "out", "wb") as out, open(tmp_path / "err", "wb") as err:
        done = subprocess.run(["sh", str(TEST_SH)], env=env, stdout=out, stderr=err, timeout=300,
                              stdin=subprocess.DEVNULL)
    left = _processes_naming(str(tmp_path / "cache"))
    said = (tmp_path / "err").read_text(errors="replace")
    try:
        assert done.returncode != 0 and "needs Python >= 3.11" in said, said
        assert left == [], "still running after test.sh exited: " + ", ".join(
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            for pid in left if Path(f"/proc/{pid}").exists())
        assert not list((tmp_path / "cache" / "perflab" / "kconfig-tree").glob(".unpack.*"))    # nothing half-unpacked kept
    finally:
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(tmp_path / "cache", ignore_errors=True)

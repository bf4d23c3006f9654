"""tools/fetch_plotly.py: the pinned plotly.js bundle is installed only when its tarball matches.

Tarballs are built here and fetched through file:// URLs (the same urllib path as HTTPS,
without a network); the real registry download is what tools/install.sh does.
"""

from __future__ import annotations

import base64
import hashlib
import io
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "tools" / "fetch_plotly.py"
JS = b"/**\n* plotly.js (cartesian - minified) v9.9.9\n*/\nvar Plotly = {};\n"


def _tgz(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _integrity(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def _fetch(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=60)


def _one_line(proc, status, *needles):
    assert proc.returncode == status, proc
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


@pytest.fixture
def tarball(tmp_path):
    data = _tgz({"package/plotly-cartesian.min.js": JS, "package/LICENSE": b"The MIT License\n"})
    path = tmp_path / "bundle.tgz"
    path.write_bytes(data)
    return path, _integrity(data)


def test_installs_a_matching_tarball_once(tmp_path, tarball):
    path, integrity = tarball
    dest = tmp_path / "share" / "perflab" / "plotly-cartesian.min.js"
    proc = _fetch("--dest", dest, "--url", path.as_uri(), "--integrity", integrity)
    _one_line(proc, 0, "installed", str(dest), "integrity checked")
    assert dest.read_bytes() == JS
    assert (dest.parent / "plotly-cartesian.LICENSE").read_bytes().startswith(b"The MIT License")
    # Installed: a second run does not download (the URL no longer exists).
    path.unlink()
    _one_line(_fetch("--dest", dest, "--url", path.as_uri(), "--integrity", integrity), 0, "already installed")
    # perflab's page carries what was installed.
    from perflab.report.html import bundle_banner

    assert bundle_banner(dest.read_text()) == "plotly.js (cartesian - minified) v9.9.9"


def test_integrity_mismatch_is_not_installed(tmp_path, tarball):
    path, integrity = tarball
    corrupted = tmp_path / "corrupted.tgz"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    corrupted.write_bytes(bytes(data))
    dest = tmp_path / "out" / "plotly-cartesian.min.js"
    proc = _fetch("--dest", dest, "--url", corrupted.as_uri(), "--integrity", integrity)
    _one_line(proc, 1, "integrity mismatch", "not installed", "full bundle")
    assert not dest.parent.exists()
    # The pinned integrity (the registry's) refuses a tarball that is not the registry's.
    _one_line(_fetch("--dest", dest, "--url", path.as_uri()), 1, "integrity mismatch")
    assert not dest.exists()
    # A failed update keeps the bundle installed earlier, and says so.
    _fetch("--dest", dest, "--url", path.as_uri(), "--integrity", integrity)
    (dest.parent / "plotly-cartesian.min.js.integrity").unlink()
    _one_line(_fetch("--dest", dest, "--url", corrupted.as_uri(), "--integrity", integrity), 1,
              "integrity mismatch", "stays")
    assert dest.read_bytes() == JS


def test_unreachable_and_malformed(tmp_path):
    dest = tmp_path / "plotly-cartesian.min.js"
    _one_line(_fetch("--dest", dest, "--url", (tmp_path / "nowhere.tgz").as_uri()), 2, "cannot fetch", "nowhere.tgz")
    for name, data, needle in (("notgz.tgz", b"<html>proxy error</html>", "not a readable .tgz"),
                               ("empty.tgz", _tgz({"package/README.md": b"x"}), "holds no package/plotly-cartesian"),
                               ("other.tgz", _tgz({"package/plotly-cartesian.min.js": b"alert(1)"}), "banner")):
        path = tmp_path / name
        path.write_bytes(data)
        _one_line(_fetch("--dest", dest, "--url", path.as_uri(), "--integrity", _integrity(data)), 1, needle)
        assert not dest.exists()

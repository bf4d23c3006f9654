#!/usr/bin/env python3
"""Install the cartesian plotly.js bundle that `perflab report html` inlines.

The page draws only scatter and box traces. The plotly Python package ships the full
plotly.js bundle (4.8 MB, every trace type), most of a report's size and of the time a
browser takes to open it; npm's `plotly.js-cartesian-dist-min` (1.5 MB: scatter, box,
bar, histogram, heatmap, contour, pie, violin ...) is the same plotly.js release built
with the cartesian traces only. It is not kept in this repository: this script
fetches the pinned tarball from the npm registry over HTTPS (Python's urllib: npm is not
on a plain Debian machine), checks it against the registry's pinned sha512 integrity,
and writes the minified file (and its licence) where perflab looks for it:
<venv>/share/perflab/plotly-cartesian.min.js (perflab.report.html.CARTESIAN_BUNDLE).

Without it (pip install alone, or the registry unreachable) the report inlines the
plotly package's full bundle. A download that does not match the integrity is not
installed. Every failure is one line on stderr; the exit status is 0 when the bundle
is installed (or already was), 1 on an integrity or format failure, 2 when the
registry could not be reached. tools/install.sh runs it and goes on either way.

    .venv/bin/python tools/fetch_plotly.py [--dest FILE] [--url URL --integrity sha512-...]
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import os
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

PACKAGE, VERSION = "plotly.js-cartesian-dist-min", "4.1.1"
URL = f"https://registry.npmjs.org/{PACKAGE}/-/{PACKAGE}-{VERSION}.tgz"
# `npm view plotly.js-cartesian-dist-min@4.1.1 dist.integrity`
INTEGRITY = "sha512-o8GrFeusncwBIxbBynRJpY4pkgVB6caM+JLpwrLYbbsO7dZ8FJ+SVN2Fr+L7kiG/Z6w4P5O0Jus/Qr5EefHVeg=="
MEMBER, LICENSE = "package/plotly-cartesian.min.js", "package/LICENSE"
MAX_BYTES = 20_000_000   # the tarball is 0.5 MB; anything far larger is not it
BANNER = b"plotly.js"    # the minified file opens with its banner comment naming plotly.js and the version


class Failed(Exception):
    def __init__(self, message: str, status: int = 1):
        super().__init__(message)
        self.status = status


def integrity_of(data: bytes) -> str:
    """The Subresource-Integrity string npm records for a tarball: sha512-<base64 digest>."""
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode("ascii")


def download(url: str, timeout: float) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            data = response.read(MAX_BYTES + 1)
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", None) or e
        raise Failed(f"cannot fetch {url}: {reason}", status=2) from None
    if len(data) > MAX_BYTES:
        raise Failed(f"{url}: more than {MAX_BYTES} bytes; not the plotly.js tarball")
    return data


def extract(url: str, data: bytes) -> tuple[bytes, bytes | None]:
    """(the minified bundle, its LICENSE) from the npm tarball's bytes."""
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            bundle = tar.extractfile(MEMBER)
            if bundle is None:
                raise KeyError(MEMBER)
            js = bundle.read()
            try:
                lic = tar.extractfile(LICENSE)
                licence = lic.read() if lic else None
            except KeyError:
                licence = None
    except KeyError:
        raise Failed(f"{url}: the tarball holds no {MEMBER}") from None
    except (tarfile.TarError, OSError, EOFError) as e:
        raise Failed(f"{url}: not a readable .tgz ({e})") from None
    if BANNER not in js[:200]:
        raise Failed(f"{url}: {MEMBER} does not start with plotly.js's banner")
    return js, licence


def write_atomically(path: Path, data: bytes) -> None:
    """The whole file or none: a reader never sees half a bundle."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def install(dest: Path, url: str, integrity: str, timeout: float) -> str:
    stamp = dest.with_name(dest.name + ".integrity")
    try:
        if dest.is_file() and stamp.read_text().strip() == integrity:
            return f"{dest} is already installed ({PACKAGE} {VERSION})"
    except OSError:
        pass
    data = download(url, timeout)
    got = integrity_of(data)
    if got != integrity:
        raise Failed(f"{url}: integrity mismatch (expected {integrity[:24]}..., got {got[:24]}...); not installed")
    js, licence = extract(url, data)
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(dest, js)
        if licence:
            write_atomically(dest.with_name(dest.name.removesuffix(".min.js") + ".LICENSE"), licence)
        write_atomically(stamp, (integrity + "\n").encode())
    except OSError as e:
        raise Failed(f"{dest}: cannot write: {e.strerror or e}") from None
    return f"installed {dest} ({PACKAGE} {VERSION}, {len(js) / 1e6:.1f} MB, integrity checked)"


def default_dest() -> Path:
    try:
        from perflab.report.html import CARTESIAN_BUNDLE
    except ImportError:   # perflab not installed in this interpreter: the same place, by hand
        return Path(sys.prefix) / "share" / "perflab" / "plotly-cartesian.min.js"
    return CARTESIAN_BUNDLE


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dest", type=Path, help="file to write (default: <venv>/share/perflab/plotly-cartesian.min.js)")
    ap.add_argument("--url", default=URL, help="tarball to fetch (default: the pinned npm registry URL)")
    ap.add_argument("--integrity", default=INTEGRITY, help="expected sha512 integrity of the tarball")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for the registry")
    args = ap.parse_args(argv)
    dest = args.dest or default_dest()
    try:
        print(f"fetch_plotly: {install(dest, args.url, args.integrity, args.timeout)}", file=sys.stderr)
        return 0
    except Failed as e:
        fallback = (f"the earlier {dest} stays" if dest.is_file()
                    else "perflab report html inlines the plotly package's full bundle instead")
        print(f"fetch_plotly: {' '.join(str(e).split())}; {fallback}", file=sys.stderr)
        return e.status


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Fetch and cache a Debian kernel for perflab's VM executor; print the vmlinuz path.

    python tools/fetch_kernel.py                      # linux-image-6.1.0-47-amd64-unsigned
    python tools/fetch_kernel.py --both               # and linux-image-6.1.0-50-amd64-unsigned
    python tools/fetch_kernel.py linux-image-...-unsigned

`apt-get download` into $XDG_CACHE_HOME/perflab/kernels/ (default ~/.cache/perflab/kernels/),
boot/ unpacked from the package (perflab.execution.vm.kernel). Idempotent: a kernel
fetched before is printed without downloading. A failure is one line on stderr, exit 1.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

try:
    from perflab.execution.vm import kernel
except ImportError:     # run from a checkout without the package installed
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    from perflab.execution.vm import kernel

from perflab.core.errors import PerflabError


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("packages", nargs="*", help=f"kernel packages (default {kernel.DEFAULT_PACKAGE})")
    parser.add_argument("--both", action="store_true", help=f"also {kernel.OTHER_PACKAGE}")
    args = parser.parse_args()
    packages = args.packages or [kernel.DEFAULT_PACKAGE]
    if args.both:
        packages += [p for p in (kernel.DEFAULT_PACKAGE, kernel.OTHER_PACKAGE) if p not in packages]
    for package in packages:
        try:
            print(kernel.fetch(package))
        except PerflabError as e:
            print(f"fetch_kernel: {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

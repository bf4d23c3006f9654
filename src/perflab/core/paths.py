"""Where perflab keeps what it can make again: $XDG_CACHE_HOME/perflab (default ~/.cache/perflab).

Each cache is a directory under it, named by its owner: cbuild/ (compiled programs),
vm/ (initramfs archives), kernels/ (Debian kernel packages), vmlinux/ (decompressed kernels).
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_home() -> Path:
    """perflab's cache root, read from the environment at each call (tests and CI set it)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "perflab"

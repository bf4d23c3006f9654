"""Sizes as people write them in job files: 4096, '4k', '512M', '1.5G' (K, M, G, T, P are powers of 1024)."""

from __future__ import annotations

import re

_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(?:i?b)?\s*", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}
EXAMPLE = "e.g. 4096, 512k, 64M or 4G; K, M, G, T are powers of 1024"


def parse_size(value) -> int:
    """Bytes of a size written as a number of bytes or with a binary suffix; ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a size ({EXAMPLE})")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"{value!r} is not a size: it is negative")
        return value
    m = _SIZE.fullmatch(str(value))
    if not m:
        raise ValueError(f"{str(value)[:40]!r} is not a size ({EXAMPLE})")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def human(nbytes: float) -> str:
    """1536 -> '1.5K', 4 << 30 -> '4G'."""
    for unit, scale in (("T", 1 << 40), ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g}{unit}"
    return f"{int(nbytes)}"

"""Which buffer sizes the memory-latency walk visits: chosen from the caches the machine reports.

LMbench's lat_mem_rd walks every size from 512 bytes to the largest (64 MB),
about forty of them, and its summary reads three: the 1 KB point ("L1 $"),
the 0.125 MB point ("L2 $") and the largest ("Main mem"). Most of those sizes
carry no information: between two cache sizes the latency is flat. This
module picks the sizes that do, from the cache sizes in sysfs
(/sys/devices/system/cpu/cpu0/cache/index*/{level,type,size}):

- the summary's points: L1 at 1 KB (inside every data cache there is), L2 at
  LMbench's 128 KB when that lies beyond L1 and inside L2 (as on nearly every
  x86 machine since 2008), else the size halfway (geometrically, rounded
  down to a KB) between the L1 and L2 sizes, so that "L2 $" is an L2 figure on machines
  with a 128 KB L1 or a small L2 too; main memory at the largest size;
- the sparse curve (job key `mem_curve: sparse`, the default): 1 KB, half and
  twice each cache size, and the largest size; lat_mem then measures half-way
  sizes where neighbouring latencies differ by more than 30% (lat_mem -B);
- the full curve (`mem_curve: full`): every power of two and 1.5 times one
  from 1 KB to the largest size, as lat_mem_rd walks.
"""

from __future__ import annotations

import math
from pathlib import Path

SYSFS = Path("/sys/devices/system/cpu/cpu0/cache")
KB = 1024
LMBENCH_L1 = 1 * KB
LMBENCH_L2 = 128 * KB
CURVES = ("sparse", "full", "none")


def parse_size(text: str) -> int | None:
    """sysfs's "32K", "1024K", "32768K", "8M" -> bytes; None for anything else."""
    text = text.strip().upper()
    scale = {"K": KB, "M": KB * KB, "G": KB ** 3}.get(text[-1:], 1)
    digits = text[:-1] if text[-1:] in "KMG" else text
    return int(digits) * scale if digits.isdigit() and int(digits) > 0 else None


def cache_sizes(root: Path = SYSFS) -> list[tuple[int, int]]:
    """(level, bytes) of each data or unified cache of CPU 0, by level; [] when sysfs says nothing."""
    found: dict[int, int] = {}
    for index in sorted(root.glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text())
            size = parse_size((index / "size").read_text())
        except (OSError, ValueError):
            continue
        if kind in ("Data", "Unified") and size:
            found[level] = max(found.get(level, 0), size)
    return sorted(found.items())


def summary_sizes(caches: list[tuple[int, int]]) -> tuple[int, int]:
    """The (L1, L2) points of the summary for these caches."""
    sizes = dict(caches)
    l1, l2 = sizes.get(1), sizes.get(2)
    first = LMBENCH_L1 if not l1 or l1 >= 2 * LMBENCH_L1 else max(l1 // 2, 256)
    if not l1 or not l2 or l1 < LMBENCH_L2 <= l2 // 2:
        return first, LMBENCH_L2
    return first, math.isqrt(l1 * l2) // KB * KB


def sparse_sizes(caches: list[tuple[int, int]], largest: int) -> list[int]:
    """1 KB, half and twice each cache's size, and the largest size: sorted, in bytes."""
    sizes = {LMBENCH_L1, largest}
    for _, size in caches:
        sizes.update((size // 2, size * 2))
    return sorted(s for s in sizes if LMBENCH_L1 <= s <= largest)


def full_sizes(largest: int) -> list[int]:
    """Every power of two and 1.5 times one from 1 KB to the largest size."""
    sizes, p = [], LMBENCH_L1
    while p <= largest:
        sizes += [p] + ([p * 3 // 2] if p * 3 // 2 <= largest else [])
        p *= 2
    return sorted(set(sizes + [largest]))


def curve_sizes(curve: str, caches: list[tuple[int, int]], largest: int) -> list[int]:
    if curve == "full":
        return full_sizes(largest)
    if curve == "sparse":
        return sparse_sizes(caches, largest)
    return []


def curve_metric(size: int) -> str:
    """The stored name of one curve point: mem.curve_1k, mem.curve_48k, mem.curve_2m, mem.curve_1536k."""
    if size % (KB * KB) == 0:
        return f"mem.curve_{size // (KB * KB)}m"
    if size % KB == 0:
        return f"mem.curve_{size // KB}k"
    return f"mem.curve_{size}b"

"""How variants stand against the fastest one, as hyperfine's summary says it."""

from __future__ import annotations


def relative_to_fastest(means: list[float]) -> tuple[int, list[float]]:
    """(index of the smallest mean, each mean divided by it)."""
    fastest = min(range(len(means)), key=lambda i: means[i])
    return fastest, [m / means[fastest] if means[fastest] > 0 else float("inf") for m in means]

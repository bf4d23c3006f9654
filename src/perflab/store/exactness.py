"""Whether a stored sample is exact: the one decoder from what the store keeps to the assumption.

A sample knows whether it is exact by construction (perflab.core.model.Sample.exact: an
instruction count, or instruction-time in a QEMU guest under icount). The store keeps no
column for it - its schema and exports are compatibility surfaces - but what it does keep
says it, as every earlier version of perflab wrote it: a unit marked " (icount)", a unit
that counts instructions, or a metric named for valgrind's counts. exact_as_stored reads
that once, here, for the store's reading side (StoredSample.exact), a bisection record
written before records said it, and files imported from other tools; perflab.stats only
ever sees the bool.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

# What the unit of an instruction-time figure carries: the Qemu target appends it to the unit of
# every sample a guest under icount produced ("ns (icount)"), the honest word for its unit.
ICOUNT_MARK = "(icount)"
# What the store appends to the unit of a sample made exact that the rules below would not
# read as exact (a family's own Metric(exact=True) in a unit of its own): the flag survives.
EXACT_MARK = "(exact)"
# Units of instruction counts.
INSTRUCTION_UNITS = ("instructions", "instruction", "instr", "ir")
# Metrics counted by valgrind's tools: every one of their figures is deterministic.
INSTRUCTION_NAME_PREFIXES = ("valgrind.", "cachegrind.", "callgrind.")
# System-wide hardware counters count every process and interrupt on the machine: never exact,
# whatever their name says (perf-stat.instructions).
NOT_EXACT_PREFIXES = ("perf-stat.",)


@lru_cache(maxsize=1 << 16)
def exact_as_stored(metric: str | None, unit: str | None) -> bool:
    """Whether a sample stored as (metric, unit) is exact by construction.

    Cached: a store holds far fewer distinct pairs than rows, and readers ask row by row."""
    u = (unit or "").strip().lower()
    if ICOUNT_MARK in u or EXACT_MARK in u:
        return True
    name = (metric or "").lower()
    if name.startswith(NOT_EXACT_PREFIXES):
        return False
    if u in INSTRUCTION_UNITS or u.startswith("instructions"):
        return True
    return name == "instructions" or name.endswith(".instructions") or name.startswith(INSTRUCTION_NAME_PREFIXES)


def stored_unit(metric: str, unit: str, exact: bool) -> str:
    """The unit a sample is stored with, so that exact_as_stored reads its `exact` back: its own,
    or, for an exact figure the rules would take for a statistical one, marked " (exact)"."""
    if exact and not exact_as_stored(metric, unit):
        return f"{unit} {EXACT_MARK}" if unit else EXACT_MARK
    return unit


class StoredSample(NamedTuple):
    """One sample row as the store returns it (Queries.samples), with its assumption.

    A tuple of the seven stored columns, as rows always were (code and tests unpack them);
    `exact` is decoded from the row's metric and unit when asked."""

    run_id: int
    metric: str
    value: float
    unit: str
    direction: int
    repetition: int
    process: int | None

    @property
    def exact(self) -> bool:
        return exact_as_stored(self.metric, self.unit)

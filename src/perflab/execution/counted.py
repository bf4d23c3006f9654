"""Instructions counted per function, stored under one set of names whoever counted them.

QEMU's counting plugin in a VM guest (the insn-profile monitor: the guest kernel's functions,
all of user space as one row) and valgrind on this machine (`measure: instructions`: the
process's own functions) both give exact counts per function; both are stored as
`insn-profile.instructions` (the window's whole) and `insn-profile.self.FUNCTION`, the
functions under a floor together as `insn-profile.self.[other]`, so that the parts add up to
the whole and `perflab report profile` diffs either alike (docs/vm.md, docs/instructions.md).
"""

from __future__ import annotations

from perflab.core.model import INFORMATIONAL, Sample, metric_name

TOTAL = "insn-profile.instructions"
USER = "insn-profile.user"           # a guest's user space, as one row
KERNEL = "insn-profile.kernel"
PREFIX = "insn-profile.self."
OTHER = "[other]"                    # functions under the floor, together
UNIT = "instructions"


def function_samples(functions: dict[str, int], total: int, floor_percent: float, exact: bool) -> list[Sample]:
    """`functions` (name -> instructions of the window) from `floor_percent` of `total` up, the
    rest and what no function holds as [other]; nothing when there is nothing counted."""
    if not total:
        return []

    def sample(metric: str, value: float) -> Sample:
        return Sample(metric, float(value), UNIT, INFORMATIONAL, exact=exact)

    out = []
    other = total - sum(functions.values())     # counted but in no function (user space is its own row)
    for name, n in sorted(functions.items(), key=lambda kv: (-kv[1], kv[0])):
        if n * 100.0 >= floor_percent * total and name != OTHER:
            out.append(sample(metric_name(PREFIX, name), n))
        else:
            other += n
    if other > 0:
        out.append(sample(PREFIX + OTHER, other))
    return out

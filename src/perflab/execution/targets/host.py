"""This machine: processes start through the host executor, as they always did."""

from __future__ import annotations

from dataclasses import dataclass, field

from perflab.execution.targets import INSTRUCTION_COUNTS, Target, Toolchain


@dataclass(frozen=True)
class Host(Target):
    """The running kernel on this machine; it offers everything a family may need."""

    kind = "host"
    lacks = {INSTRUCTION_COUNTS: "this machine's CPU runs it natively (boot a kernel under vm mode icount)"}
    toolchain: Toolchain = field(default_factory=Toolchain)
    fulfils_far = False       # the monitors read this machine's files and run its perf here

    def describe(self) -> str:
        return "this machine"

"""Where a job's processes run: the execution-target layer (docs/architecture.md).

A target is a place a process can run: this machine (`Host`), a kernel booted in QEMU
(`Qemu`). The runner's loop asks a job's target the same questions whatever it is, and
knows none by name.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BootFailure:
    """A target that never came up (a kernel that panicked, hung or is not a kernel): what was
    tried, in one line, and the console's last lines."""

    message: str
    console_tail: str = ""

    def __str__(self) -> str:
        return self.message

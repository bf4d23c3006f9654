"""A target in one module, as the next one is added (docs/architecture.md, "How to add a target"):
this machine's processes started through a wrapper command (job key `wrap: "env X=1"`, option
`--wrap`). tests/test_targets.py registers it (perflab.execution.targets.register) and runs it
through the one runner and every command that runs jobs; nothing else in perflab names it."""

from __future__ import annotations

import contextlib
import shlex
import shutil
from dataclasses import dataclass, field
from typing import ClassVar

from perflab.core.errors import UsageProblem
from perflab.execution.targets import INSTRUCTION_COUNTS, Place, Target, TargetOption, Toolchain

WRAP_OPTION = TargetOption("--wrap", "wrap", "COMMAND",
                           "Start the job's processes on this machine through COMMAND (a test's target).")


@dataclass(frozen=True)
class Wrapped(Target):
    kind = "wrapped"
    job_keys: ClassVar[tuple[str, ...]] = ("wrap",)
    options: ClassVar[tuple[TargetOption, ...]] = (WRAP_OPTION,)
    lacks = {INSTRUCTION_COUNTS: "this machine's CPU runs its processes natively"}
    fulfils_far = False       # its processes are this machine's: the monitors read its files here
    wrap: str = ""
    toolchain: Toolchain = field(default_factory=Toolchain)

    @classmethod
    def from_keys(cls, doc: dict, toolchain: Toolchain) -> Wrapped | None:
        return cls(wrap=doc["wrap"], toolchain=toolchain) if doc.get("wrap") else None

    @classmethod
    def check_key(cls, key: str, value, where: str) -> None:
        words = shlex.split(value) if isinstance(value, str) else []
        if not words or shutil.which(words[0]) is None:
            raise UsageProblem(f"{where} {value!r}: expected a command on PATH to start the processes through")

    def keys(self) -> dict:
        return {"wrap": self.wrap, **self.toolchain.keys()}

    def describe(self) -> str:
        return f"this machine through {self.wrap}"

    def params(self, params: dict) -> dict:
        return {**params, "wrap": self.wrap}

    @contextlib.contextmanager
    def open(self, openings, execute):
        words = shlex.split(self.wrap)
        words[0] = shutil.which(words[0]) or words[0]      # the launcher execs a path, not a name

        def run(spec, wrapper=(), **kwargs):
            return execute(spec, wrapper=(*words, *wrapper), **kwargs)

        yield Place(run, {"wrapped_by": self.wrap})

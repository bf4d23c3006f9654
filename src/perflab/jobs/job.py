"""The atomic job: one point of a benchmark matrix, as a typed value with one JSON form.

An atomic job names a benchmark family and its raw parameters, and how to run
them (runs, warm-up, timeout, monitors, tag, comment). The same value runs
locally, under bisection and on a lab worker, and every run stores it as JSON
(`run.job`): `perflab rerun` and exports read it back.

The stored JSON is kept exactly as it was written: `from_dict(d).to_dict() ==
d` with the same key order, also for keys this class does not model (a lab
job's "source" and "lab") and for older runs that lack some keys. That is why
the key order travels with the value (`key_order`).

A job is validated once, where it is made (perflab.jobs.resolve): the family
object and its parsed parameters then travel with it (`family`, `parsed`),
outside its JSON form and its equality.

A job may name a kernel to boot and run in (`kernel`, with the machine in `vm`:
mode, cpus, memory, qemu_args; docs/vm.md), and may count its processes'
instructions under valgrind (`measure`, `measure_children`, `measure_function`;
docs/instructions.md). These keys are written only when set, so a job without
them has the JSON form it always had.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields, replace
from typing import Any

# The keys of the stored JSON that are fields of AtomicJob, in the order `perflab run FAMILY`
# options and the lmbench suite have always written them.
KEYS = ("benchmark", "params", "runs", "warmup", "timeout", "tag", "comment", "monitors")
# Keys written only when set (a job that runs in a VM guest; one counted under valgrind), after the others.
OPTIONAL_KEYS = ("kernel", "vm", "measure", "measure_children", "measure_function")
# The order job file expansion has always written (params last).
FILE_ORDER = ("benchmark", "runs", "warmup", "timeout", "tag", "comment", "monitors", "params")

_DEFAULTS = {"params": {}, "runs": None, "warmup": 0, "timeout": None, "tag": None, "comment": None,
             "monitors": {}}


@dataclass(frozen=True)
class AtomicJob:
    benchmark: str
    params: dict = field(default_factory=dict)      # raw, as written (e.g. nr_task "50%"), JSON-able
    runs: int | None = None                         # None: the family's default for these parameters
    warmup: int = 0
    timeout: float | None = None                    # None: the family's default
    tag: str | None = None
    comment: str | None = None
    monitors: dict = field(default_factory=dict)    # validated monitors mapping (perflab.monitors)
    kernel: str | None = None                       # a kernel image to boot and run the job in (absolute path)
    vm: dict = field(default_factory=dict)          # the guest machine: mode, cpus, memory, qemu_args
    # Count instructions under valgrind (docs/instructions.md): "instructions" or "cache";
    # follow the children it execs; count one function alone.
    measure: str | None = None
    measure_children: bool = False
    measure_function: str | None = None
    # Keys of the stored JSON that are not fields here (a lab job's "source", "lab"), in order.
    extra: dict = field(default_factory=dict)
    # The order of the keys in the JSON form; empty: KEYS, then `extra`.
    key_order: tuple[str, ...] = field(default=(), compare=False, repr=False)
    # Set once the parameters were validated (perflab.jobs.resolve): the Family and its Params.
    family: Any = field(default=None, compare=False, repr=False)
    parsed: Any = field(default=None, compare=False, repr=False)

    @classmethod
    def from_dict(cls, doc: dict) -> AtomicJob:
        """A stored or built job dict -> the job (nothing validated; the dict is copied)."""
        if not isinstance(doc, dict) or not isinstance(doc.get("benchmark"), str):
            raise ValueError(f"not an atomic job (no 'benchmark' name): {doc!r}")
        doc = copy.deepcopy(doc)
        # Values are kept as written (a stored null stays null), so the JSON form comes back unchanged.
        known = {k: doc[k] for k in (*KEYS, *OPTIONAL_KEYS) if k in doc}
        extra = {k: v for k, v in doc.items() if k not in KEYS and k not in OPTIONAL_KEYS}
        return cls(**known, extra=extra, key_order=tuple(doc))

    def to_dict(self) -> dict:
        """The JSON form: the keys it was made with, in their order, then any set since."""
        order = self.key_order or (*KEYS, *self.extra)
        out = {}
        for key in order:
            if key in KEYS or (key in OPTIONAL_KEYS and getattr(self, key)):
                out[key] = copy.deepcopy(getattr(self, key))
            elif key in self.extra:
                out[key] = copy.deepcopy(self.extra[key])
        # A field given a value after the job was read from a dict that lacked it (a rerun's --tag
        # on an old run) is written after the others, as adding a key to the dict always did.
        for key in KEYS:
            if key not in out and getattr(self, key) != _DEFAULTS.get(key):
                out[key] = copy.deepcopy(getattr(self, key))
        for key in OPTIONAL_KEYS:
            if key not in out and getattr(self, key):
                out[key] = copy.deepcopy(getattr(self, key))
        for key, value in self.extra.items():
            if key not in out:
                out[key] = copy.deepcopy(value)
        return out

    @property
    def in_guest(self) -> bool:
        """Whether the job runs in a VM guest booted from `kernel`."""
        return bool(self.kernel)

    @property
    def resolved(self) -> bool:
        """Whether the parameters were validated and parsed (perflab.jobs.resolve)."""
        return self.parsed is not None

    def with_(self, **changes) -> AtomicJob:
        """A copy with some job keys changed (tag, comment, runs, monitors, ...); `extra` keys by name too.

        The family and parsed parameters stay: only `params` would need validating again, and
        it cannot be changed here.
        """
        if "params" in changes or "benchmark" in changes:
            raise ValueError("a job's benchmark or parameters change only by building a new job")
        names = {f.name for f in fields(self)}
        extra = {k: v for k, v in changes.items() if k not in names}
        if extra:
            changes = {k: v for k, v in changes.items() if k in names}
            changes["extra"] = {**self.extra, **extra}
        return replace(self, **changes)

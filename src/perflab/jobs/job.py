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

Where its processes run is one typed `target` (perflab.execution.targets: this machine,
`Host`, or a kernel booted in QEMU, `Qemu`: the `kernel` and `vm` keys; docs/vm.md), with
the compiler and flags its C programs are built with (`cc`, `cflags`); what watches them is
a typed tuple of `instruments` (perflab.execution.instruments: valgrind's counts, the
`measure`, `measure_children` and `measure_function` keys; docs/instructions.md). The job
file's keys and the stored JSON are the compatibility surface: they are read into the typed
values and written back from them, only when set, so a job without them has the JSON form
it always had.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields, replace
from typing import Any

from perflab.benchmarks.measured import Valgrind
from perflab.execution.instruments import Instrument
from perflab.execution.targets import Target, Toolchain, WithTargetKeys, registered_keys, registered_target
from perflab.execution.targets.host import Host
from perflab.execution.targets.qemu import Qemu

# The keys of the stored JSON that are fields of AtomicJob, in the order `perflab run FAMILY`
# options and the lmbench suite have always written them.
KEYS = ("benchmark", "params", "runs", "warmup", "timeout", "tag", "comment", "monitors")
# Keys written only when set (a job that runs in a VM guest; one counted under valgrind; the
# compiler of its programs), after the others: the typed target's and instruments' keys.
# A registered target's own keys (an SSH machine's `on`) come after them.
OPTIONAL_KEYS = WithTargetKeys("kernel", "vm", "measure", "measure_children", "measure_function", "cc", "cflags")
MEASURE_KEYS = ("measure", "measure_children", "measure_function")
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
    target: Target = field(default_factory=Host)    # where its processes run, its programs' compiler
    instruments: tuple[Instrument, ...] = ()        # what watches them besides the monitors
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
        known = {k: doc[k] for k in KEYS if k in doc}
        target, leftover = target_of(doc)
        extra = {k: v for k, v in doc.items() if (k not in KEYS and k not in OPTIONAL_KEYS) or k in leftover}
        return cls(**known, target=target, instruments=instruments_of(doc), extra=extra, key_order=tuple(doc))

    def modelled(self) -> dict:
        """The JSON keys of the typed target and instruments, as they are written (only those set)."""
        out = {**self.target.keys()}
        for instrument in self.instruments:
            out.update(instrument.keys())
        return {k: v for k, v in out.items() if v}

    def to_dict(self) -> dict:
        """The JSON form: the keys it was made with, in their order, then any set since."""
        order = self.key_order or (*KEYS, *self.extra)
        modelled = self.modelled()
        out = {}
        for key in order:
            if key in KEYS:
                out[key] = copy.deepcopy(getattr(self, key))
            elif key in modelled:
                out[key] = copy.deepcopy(modelled[key])
            elif key in self.extra:
                out[key] = copy.deepcopy(self.extra[key])
        # A field given a value after the job was read from a dict that lacked it (a rerun's --tag
        # on an old run) is written after the others, as adding a key to the dict always did.
        for key in KEYS:
            if key not in out and getattr(self, key) != _DEFAULTS.get(key):
                out[key] = copy.deepcopy(getattr(self, key))
        # Then the target's and instruments' keys (kernel, vm, measure..., then cc and cflags, as a
        # job file's expansion always wrote them; a new target's own keys after those), then the
        # keys this class does not model (a lab job's "source").
        for key in (*OPTIONAL_KEYS, *modelled):
            if key not in out and key in modelled:
                out[key] = copy.deepcopy(modelled[key])
        for key, value in self.extra.items():
            if key not in out:
                out[key] = copy.deepcopy(value)
        return out

    # Read-only views of the JSON keys the typed target and instruments are written as.
    @property
    def kernel(self) -> str | None:
        return self.target.kernel if isinstance(self.target, Qemu) else None

    @property
    def vm(self) -> dict:
        return self.target.vm if isinstance(self.target, Qemu) else {}

    @property
    def valgrind(self) -> Valgrind | None:
        return next((i for i in self.instruments if isinstance(i, Valgrind)), None)

    @property
    def measure(self) -> str | None:
        return self.valgrind.mode if self.valgrind else None

    @property
    def measure_children(self) -> bool:
        return bool(self.valgrind and self.valgrind.children)

    @property
    def measure_function(self) -> str | None:
        return self.valgrind.function if self.valgrind else None

    @property
    def watching(self) -> tuple[Instrument, ...]:
        """Every instrument that watches the job's processes: its own, then its monitors."""
        from perflab.monitors.instrument import Monitors

        return (*self.instruments, *((Monitors(self.monitors),) if self.monitors else ()))

    @property
    def needs(self) -> frozenset[str]:
        """What the job needs of its target: its family's needs and its instruments'."""
        return frozenset(self.family.needs).union(*(i.needs() for i in self.watching))

    @property
    def in_guest(self) -> bool:
        """Whether the job runs in a VM guest booted from `kernel`."""
        return isinstance(self.target, Qemu)

    @property
    def resolved(self) -> bool:
        """Whether the parameters were validated and parsed (perflab.jobs.resolve)."""
        return self.parsed is not None

    def with_(self, **changes) -> AtomicJob:
        """A copy with some job keys changed (tag, comment, runs, monitors, ...); `extra` keys by name
        too, and the keys of the target and instruments (kernel, vm, measure, cc ...) as the JSON names them.

        The family and parsed parameters stay: only `params` would need validating again, and
        it cannot be changed here.
        """
        if "params" in changes or "benchmark" in changes:
            raise ValueError("a job's benchmark or parameters change only by building a new job")
        keyed = {k: changes.pop(k) for k in list(changes) if k in OPTIONAL_KEYS}
        doc = {**self.modelled(), **keyed}
        if any(k in keyed for k in registered_keys()):
            # Where the job runs changes (its compiler stays): a host or a guest, by the keys.
            changes.setdefault("target", target_of(doc)[0])
        elif "cc" in keyed or "cflags" in keyed:
            changes.setdefault("target", replace(self.target, toolchain=target_of(doc)[0].toolchain))
        if any(k in keyed for k in MEASURE_KEYS):
            changes.setdefault("instruments", (*[i for i in self.instruments if not isinstance(i, Valgrind)],
                                               *instruments_of(doc)))
        names = {f.name for f in fields(self)}
        extra = {k: v for k, v in changes.items() if k not in names}
        if extra:
            changes = {k: v for k, v in changes.items() if k in names}
            changes["extra"] = {**self.extra, **extra}
        return replace(self, **changes)


def target_of(doc: dict) -> tuple[Target, set[str]]:
    """The typed target of a job's keys (kernel, vm, cc, cflags; a registered target's own, such as
    `on`), and the keys it does not take, kept as written so the JSON form comes back unchanged: a
    `vm` block without a kernel (refused where the job is resolved), a `cc` or `cflags` written
    empty (no compiler named)."""
    leftover = {k for k in ("cc", "cflags") if k in doc and not doc[k]}
    toolchain = Toolchain(doc.get("cc") or None, doc.get("cflags") or None)
    # The registered targets, in order, each reading its own keys; none: this machine. Other
    # targets' keys written with it (a kernel with `on`; a `vm` without a kernel) are kept as
    # written and refused where the job is made.
    target = registered_target(doc, toolchain) or Host(toolchain=toolchain)
    taken = target.keys()        # an SSH machine's kernel under test is its own
    return target, leftover | {k for k in registered_keys() if doc.get(k) and k not in target.job_keys
                               and k not in taken}


def instruments_of(doc: dict) -> tuple[Instrument, ...]:
    """The typed instruments of a job's keys: valgrind when it says `measure` (or one of its options)."""
    if not any(doc.get(k) for k in MEASURE_KEYS):
        return ()
    return (Valgrind(doc.get("measure"), doc.get("measure_children") or False, doc.get("measure_function")),)

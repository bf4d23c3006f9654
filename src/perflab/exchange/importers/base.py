"""What every importer shares: the context of one file, JSON navigation that
names the missing key, the rules a measured value must obey, and the hand-over
of runs and samples to the store.

An importer reads a document (perflab.exchange.importers.source.Document, streamed item
by item) and hands runs in the shape of a perflab export (see perflab.exchange.transfer)
to Context.run / Context.begin + Context.add, which pass them to a sink (the
store's ImportWriter): one checker and one writer serve every format.

Whether an imported sample is exact by construction is what its format's own words say
(Go's `instructions/op`, a perflab export's `ns (icount)`): importers keep those words as
the sample's unit and name, and perflab.store.exactness, the one decoder, reads them.
"""

from __future__ import annotations

import datetime as dt
import uuid as uuidlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from perflab.core.errors import PerflabError
# The rules live beside transfer, which checks exports by them too; importers take them from here.
from perflab.exchange.rules import (COUNT, CPU_TIME, DURATION, EXIT_STATUS, FINITE, METRIC_RULES,  # noqa: F401
                                    RATE, SIZE, Rule)
from perflab.exchange.rules import FLOAT_MAX as _FLOAT_MAX

# uuid5 namespace of imported runs: the same file imported twice with the same
# --tag and --box gives the same uuids, so the second import adds nothing.
NAMESPACE = uuidlib.UUID("6f0c2a8e-4d59-5b7e-9a51-0e1f2d3c4b5a")
DEFAULT_BOX = "imported"


_NUMBER_TYPES = (int, float)  # exact types: a JSON true/false is a bool, never a number here


def check_values(values: list, path: str, rule: Rule, allow_null: bool = False) -> None:
    """Every item of a JSON list obeys `rule`; the first that does not is a
    Problem naming its index ("key 'results[0].times[1]': -0.5 is not a
    positive duration"). One pass, no copy: lists of a million times are common,
    so the usual rules are tested inline rather than through Rule.accepts."""
    low = max(rule.minimum, -_FLOAT_MAX)
    if rule.integral:
        # Exit statuses: JSON integers (null where allowed); anything else is looked at below.
        for v in values:
            if not (type(v) is int and -_FLOAT_MAX <= v <= _FLOAT_MAX or v is None and allow_null):
                break
        else:
            return
    elif rule.open_min:
        for v in values:
            if not ((type(v) is float or type(v) is int) and low < v <= _FLOAT_MAX or v is None and allow_null):
                break
        else:
            return
    else:
        for v in values:
            if not ((type(v) is float or type(v) is int) and low <= v <= _FLOAT_MAX or v is None and allow_null):
                break
        else:
            return
    for i, v in enumerate(values):
        if type(v) in _NUMBER_TYPES and rule.accepts(v):
            continue
        if v is None and allow_null:
            continue
        if type(v) not in _NUMBER_TYPES:
            raise Problem(f"key '{path}[{i}]' is {_kind_name(v)}, expected a number")
        raise Problem(f"key '{path}[{i}]': {rule.why_not(v)}")


def check_value(value, path: str, rule: Rule) -> float:
    """One JSON value that must be a number obeying `rule`, as a float."""
    if type(value) not in _NUMBER_TYPES:
        raise Problem(f"key '{path}' is {_kind_name(value)}, expected a number")
    if not rule.accepts(value):
        raise Problem(f"key '{path}': {rule.why_not(value)}")
    return float(value)


class Problem(Exception):
    """What is wrong with a file of a known format.

    The message completes "FILE: looks like <format> but ...", e.g.
    "key 'results[0].times' is missing". `line` names a line of a text format.
    """

    def __init__(self, message: str, line: int | None = None):
        super().__init__(message)
        self.line = line


class ImportFailed(PerflabError):
    """A file that cannot be imported; nothing of it is written."""


MISSING = object()


class Node:
    """A JSON value with the path that leads to it, for messages like
    "key 'benchmarks[2].stats.mean' is missing"."""

    __slots__ = ("value", "path")

    def __init__(self, value, path: str = ""):
        self.value = value
        self.path = path

    def _child_path(self, key) -> str:
        if isinstance(key, int):
            return f"{self.path}[{key}]"
        return f"{self.path}.{key}" if self.path else str(key)

    def has(self, key: str) -> bool:
        return isinstance(self.value, dict) and key in self.value and self.value[key] is not None

    def get(self, key: str, kind=None, default=MISSING) -> "Node":
        """The child `key`; a missing (or null) key is a Problem unless a default is given."""
        if not isinstance(self.value, dict):
            raise Problem(f"{self._where()} is {_kind_name(self.value)}, expected an object")
        if key not in self.value or self.value[key] is None:
            if default is not MISSING:
                return Node(default, self._child_path(key))
            raise Problem(f"key '{self._child_path(key)}' is missing")
        child = Node(self.value[key], self._child_path(key))
        if kind is not None:
            child.expect(kind)
        return child

    def expect(self, kind) -> "Node":
        ok = {
            "object": lambda v: isinstance(v, dict),
            "list": lambda v: isinstance(v, list),
            "string": lambda v: isinstance(v, str),
            "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
            "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        }[kind]
        if not ok(self.value):
            raise Problem(f"key '{self.path}' is {_kind_name(self.value)}, expected {_article(kind)}")
        return self

    def items(self) -> Iterator["Node"]:
        self.expect("list")
        return (Node(v, self._child_path(i)) for i, v in enumerate(self.value))

    def number(self, key: str | None = None, rule: Rule = FINITE) -> float:
        """A number obeying `rule` (the node itself, or its child `key`)."""
        node = self if key is None else self.get(key)
        return check_value(node.value, node.path, rule)

    def text(self, key: str, default=MISSING) -> str:
        if default is not MISSING and not self.has(key):
            return default
        return self.get(key, "string").value

    def _where(self) -> str:
        return f"key '{self.path}'" if self.path else "the document"


def _kind_name(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    return type(value).__name__


def _article(kind: str) -> str:
    return {"object": "an object", "list": "a list", "string": "a string", "number": "a number", "int": "an integer"}[kind]


class Sink:
    """Where the runs of an import go (the store's ImportWriter; a list in tests).

    add_run takes a run dictionary without its samples and returns a handle;
    add_samples takes [metric, value, unit, direction, repetition] rows of it.
    """

    def add_run(self, run: dict) -> int:  # pragma: no cover - an interface
        raise NotImplementedError

    def add_samples(self, handle: int, rows: Iterable[tuple]) -> None:  # pragma: no cover
        raise NotImplementedError


@dataclass
class Context:
    """One file being imported, the options that apply to all its runs, and
    the sink its runs go to."""

    path: str
    digest: str  # sha256 of the file's bytes
    mtime: dt.datetime  # UTC, naive: when the file was written, the best guess of when it ran
    sink: Sink
    fmt: str = ""
    tag: str | None = None
    box: str | None = None
    warnings: list[str] = field(default_factory=list)
    _count: int = 0

    @property
    def source(self) -> str:
        return Path(self.path).name

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def begin(
        self,
        *,
        benchmark: str,
        name: str,
        params: dict,
        facts: dict | None = None,
        hostname: str | None = None,
        started: dt.datetime | None = None,
        finished: dt.datetime | None = None,
        commit: str | None = None,
        dirty: bool | None = None,
        status: str = "finished",
        error: str | None = None,
        comment: str | None = None,
    ) -> int:
        """Hand one run (without samples) to the sink; returns the handle its samples go to."""
        index = self._count
        self._count += 1
        box = self.box or hostname or DEFAULT_BOX
        key = f"{self.fmt}:{self.digest}:{index}:{self.tag or ''}:{box}"
        environment = {"testbox": box, **(facts or {}), "imported_from": self.fmt, "source_file": self.source}
        started = started or self.mtime
        return self.sink.add_run({
            "uuid": str(uuidlib.uuid5(NAMESPACE, key)),
            "testbox": box,
            "benchmark": benchmark,
            "name": name,
            "params": params,
            "tag": self.tag,
            "commit": commit,
            "dirty": dirty,
            "started": started,
            "finished": finished or started,
            "status": status,
            "comment": comment,
            "error": error,
            "environment": environment,
            "failures": [],
        })

    def add(self, handle: int, rows: Iterable[tuple]) -> None:
        """Samples of a run begun with `begin`: (metric, value, unit, direction, repetition) rows."""
        self.sink.add_samples(handle, rows)

    def run(self, *, samples: Iterable[tuple], **fields) -> None:
        """A whole run: `begin` with `fields`, then its samples (a list or a generator)."""
        self.add(self.begin(**fields), samples)


def utc_naive(value: dt.datetime, naive_is_local: bool) -> dt.datetime:
    """A datetime as the store keeps it (UTC, naive).

    A naive input is taken as local time of this machine when naive_is_local
    (pyperf writes datetime.now()), else as UTC.
    """
    if value.tzinfo is None:
        if not naive_is_local:
            return value
        value = value.astimezone()
    return value.astimezone(dt.UTC).replace(tzinfo=None)


def parse_time(text, where: str, naive_is_local: bool = False) -> dt.datetime:
    if not isinstance(text, str):
        raise Problem(f"key '{where}' is {_kind_name(text)}, expected a date")
    try:
        value = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise Problem(f"key '{where}' is {text[:40]!r}, which is not an ISO date") from None
    return utc_naive(value, naive_is_local)


def scalar_facts(prefix: str, mapping: dict, skip=()) -> dict:
    """A tool's own facts, kept under its prefix ("pyperf.cpu_freq"); nested
    objects are flattened one level ("pytest-benchmark.cpu.brand_raw")."""
    out = {}
    for key, value in mapping.items():
        if key in skip or value is None:
            continue
        if isinstance(value, dict):
            for sub, inner in value.items():
                # Long lists (a CPU's flags) would swamp every environment diff.
                if inner is None or isinstance(inner, dict) or isinstance(inner, list) and len(inner) > 16:
                    continue
                out[f"{prefix}.{key}.{sub}"] = inner
        else:
            out[f"{prefix}.{key}"] = value
    return out

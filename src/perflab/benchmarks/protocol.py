"""The one output protocol of perflab's C programs, and its one parser.

Every C program (on the runtime in core/c/perflab.h) prints its results as
lines on stdout:

    {"metric": "hackbench.time", "value": 0.5, "unit": "s"}

optionally with more keys after these three (will-it-scale's "event", "ops",
...). A metric may stand on several lines (samples, one per thread or per
interval), in order. `read` turns the text into Lines, or raises ItemFailed
(or the family's subclass) naming the program and the offending line, so
that garbage output is one clean line in the run's failures. Families then
keep only what they derive from the raw figures.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from perflab.benchmarks.base import ItemFailed

CORE_KEYS = ("metric", "value", "unit")


@dataclass(frozen=True)
class Line:
    metric: str
    value: float          # an int when the program printed a whole number
    unit: str
    extra: dict = field(default_factory=dict)   # keys beyond metric, value and unit


def read(item: str, text: str, expected: Mapping[str, str] | None = None,
         failure: type[ItemFailed] = ItemFailed) -> list[Line]:
    """The program's lines, in order; `failure` naming `item` and the line for anything else.

    `expected` (metric -> unit), when given, is every metric the program may
    print: another name, or a unit other than the one listed, is garbage.
    No line at all is garbage too.
    """
    lines = []
    for number, raw in enumerate(text.splitlines(), 1):
        raw = raw.strip()
        if not raw:
            continue
        where = f"{item}: output line {number} {raw[:80]!r}"
        try:
            doc = json.loads(raw)
        except ValueError:
            raise failure(f"{where} is not JSON") from None
        if not isinstance(doc, dict):
            raise failure(f"{where} is not a JSON object")
        metric, value, unit = doc.get("metric"), doc.get("value"), doc.get("unit")
        if not isinstance(metric, str) or (expected is not None and metric not in expected):
            raise failure(f"{where} names no figure of {item}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise failure(f"{where}: the value is not a finite number")
        wanted = expected[metric] if expected is not None else unit
        if not isinstance(unit, str) or unit != wanted:
            raise failure(f"{where}: unit {unit!r}, expected {wanted!r}")
        lines.append(Line(metric, value, unit, {k: v for k, v in doc.items() if k not in CORE_KEYS}))
    if not lines:
        raise failure(f"{item}: printed no figures")
    return lines


class Figures:
    """A program's lines by metric, for a family that reads named raw figures."""

    def __init__(self, item: str, text: str, expected: Mapping[str, str], failure: type[ItemFailed] = ItemFailed):
        self.item = item
        self.failure = failure
        self.lines = read(item, text, expected, failure)

    def all(self, metric: str) -> list:
        return [line.value for line in self.lines if line.metric == metric]

    def one(self, metric: str):
        """The value of a metric the program prints once; `failure` when it is missing or repeated."""
        values = self.all(metric)
        if len(values) != 1:
            raise self.failure(f"{self.item}: printed {metric} {len(values)} times, expected once")
        return values[0]

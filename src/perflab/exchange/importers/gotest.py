"""Go `testing` benchmark output (`go test -bench`), benchstat's input format.

Read as golang.org/x/perf/benchfmt reads it:
- a configuration line `key: value` (key starts with a lower-case letter and
  holds no space or upper-case letter) applies to every result after it until
  the key is set again; `go test` writes goos, goarch, pkg and cpu;
- a result line is `BenchmarkName[-N] iterations value unit [value unit ...]`
  where -N is GOMAXPROCS (absent when it is 1);
- every other line (PASS, ok, log output, `go test -v` name-only lines) is
  ignored. A line that starts like a result but does not parse is an error
  naming its line number.

One run per (configuration, name, GOMAXPROCS); each result line is one
repetition; each unit is one metric, `gotest.<unit>`, value as written.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from perflab.exchange.importers.base import COUNT, DURATION, FINITE, RATE, SIZE, Context, Problem, Rule
from perflab.core.model import HIGHER_IS_BETTER, INFORMATIONAL, LOWER_IS_BETTER

NAME = "gotest"
LABEL = "Go benchmark output"
KIND = "text"

_CONFIG = re.compile(r"^([a-z][^\sA-Z:]*):(?:[ \t]+(.*))?$")
# "Benchmark" not followed by a lower-case letter; a name never ends with ":"
# (so a log line "Benchmark: done" is not taken for a result).
_RESULT_START = re.compile(r"^Benchmark(?![a-z])\S*(?<!:)(?:\s|$)")
_PROCS = re.compile(r"^(.*)-(\d+)$")
_GO_CONFIG_KEYS = ("goos", "goarch", "pkg", "cpu")

TIME_UNITS = {"ns", "us", "µs", "ms", "s", "sec"}
SIZE_UNITS = {"B", "KB", "MB", "GB", "kB", "KiB", "MiB", "GiB", "bytes"}


def direction(unit: str) -> int:
    """Which way is better for a Go benchmark unit.

    A rate (`MB/s`, `ops/s`) is higher-is-better; a cost per something whose
    numerator is a time, a size or allocations (`ns/op`, `sec/op`, `B/op`,
    `allocs/op`, `ns/insert`) is lower-is-better; anything else (a custom
    `b.ReportMetric` unit such as `fields/op`) is informational: perflab shows
    it but calls no regression on it. benchstat itself does not know
    directions; these are the conventions of its units package (benchunit)
    and of the Go performance dashboard.
    """
    num, _, den = unit.partition("/")
    if den in ("s", "sec"):
        return HIGHER_IS_BETTER
    if den and (num in TIME_UNITS or num in SIZE_UNITS or num == "allocs"):
        return LOWER_IS_BETTER
    return INFORMATIONAL


def value_rule(unit: str) -> Rule:
    """What a value of a Go unit can be: a time per operation is a duration
    (Go prints it from a positive elapsed time), a rate, a size or allocation
    count per operation cannot be negative (`0 B/op` is common); a custom unit
    (`b.ReportMetric`) can be anything finite."""
    num, _, den = unit.partition("/")
    if den in ("s", "sec"):
        return RATE
    if den and num in TIME_UNITS:
        return DURATION
    if den and (num in SIZE_UNITS or num == "allocs"):
        return SIZE if num in SIZE_UNITS else COUNT
    return FINITE


def sniff(text: str) -> int:
    score = 0
    for line in text.splitlines()[:2000]:
        if _RESULT_START.match(line) and len(line.split()) >= 2:
            score += 3
        elif line.split(":", 1)[0] in _GO_CONFIG_KEYS and _CONFIG.match(line):
            score += 1
        if score >= 6:
            break
    return score


def _parse_result(line: str, number: int) -> tuple[str, int, list[tuple[float, str]]] | None:
    fields = line.split()
    name = fields[0]
    if len(fields) == 1:
        return None  # `go test -v` prints the name alone before running it
    if not re.fullmatch(r"\d+", fields[1]):
        raise Problem(f"line {number} ({_short(line)}) has {fields[1]!r} where the iteration count should be "
                      "(expected 'BenchmarkName N value unit [value unit ...]')", line=number)
    rest = fields[2:]
    if not rest:
        raise Problem(f"line {number} ({_short(line)}) has an iteration count but no 'value unit' pair", line=number)
    if len(rest) % 2:
        raise Problem(f"line {number} ({_short(line)}) has a value without a unit "
                      "(expected 'BenchmarkName N value unit [value unit ...]')", line=number)
    pairs = []
    for i in range(0, len(rest), 2):
        raw, unit = rest[i], rest[i + 1]
        try:
            value = float(raw)
        except ValueError:
            raise Problem(f"line {number} ({_short(line)}) has {raw!r} where a number should be (before unit {unit!r})", line=number) from None
        rule = value_rule(unit)
        if not rule.accepts(value):
            raise Problem(f"line {number} ({_short(line)}): {raw} {unit} is not "
                          + ("a finite number" if not math.isfinite(value) else rule.what), line=number)
        if any(unit == u for _, u in pairs):
            raise Problem(f"line {number} ({_short(line)}) gives unit {unit!r} twice", line=number)
        pairs.append((value, unit))
    return name, int(fields[1]), pairs


def _short(line: str) -> str:
    text = " ".join(line.split())
    return repr(text if len(text) <= 60 else text[:57] + "...")


def parse(lines: Iterable[str], ctx: Context) -> None:
    """Read the output line by line; each run is handed over at its first result
    line and its samples as they come."""
    config: dict[str, str] = {}
    handles: dict[tuple, int] = {}
    counts: dict[tuple, int] = {}  # result lines per run
    names: dict[tuple, str] = {}
    failed: list[str] = []
    for number, line in enumerate(lines, start=1):
        if _RESULT_START.match(line):
            fields = line.split()
            if len(fields) >= 2 and fields[1].startswith("---"):
                failed.append(f"line {number}: {fields[0]} {fields[1]}")  # e.g. "--- FAIL: BenchmarkX"
                continue
            parsed = _parse_result(line, number)
            if parsed is None:
                continue
            full, _iterations, pairs = parsed
            m = _PROCS.match(full)
            base, procs = (m.group(1), int(m.group(2))) if m else (full, 1)
            key = (tuple(sorted(config.items())), base, procs)
            if key not in handles:
                names[key] = base + (f"-{procs}" if procs != 1 else "")
                handles[key] = _begin(ctx, config, base, procs, names[key])
                counts[key] = 0
            rep = counts[key]
            counts[key] += 1
            ctx.add(handles[key], [(f"gotest.{unit}", value, unit, direction(unit), rep) for value, unit in pairs])
            continue
        m = _CONFIG.match(line)
        if m:
            key, value = m.group(1), (m.group(2) or "").strip()
            if key == "panic":
                failed.append(f"line {number}: panic: {value[:60]}")
                continue
            if value:
                config[key] = value
            else:
                config.pop(key, None)
        elif line.startswith("--- FAIL") or line.startswith("FAIL"):
            failed.append(f"line {number}: {line.strip()[:60]}")
    if failed:
        ctx.warn("the output reports failures, not imported: " + "; ".join(failed[:5]) + (" ..." if len(failed) > 5 else ""))
    if not handles:
        raise Problem("it has no benchmark result line ('BenchmarkName N value unit ...')")
    single = [names[key] for key, n in counts.items() if n == 1]
    if single:
        ctx.warn(f"{len(single)} of {len(handles)} benchmarks have one result line only (n=1): {_names(single)}; "
                 "run `go test -count 10` for comparisons that can reach significance")


def _begin(ctx: Context, cfg: dict[str, str], base: str, procs: int, name: str) -> int:
    params = {"pkg": cfg.get("pkg", ""), "name": base, "gomaxprocs": procs}
    if not params["pkg"]:
        del params["pkg"]
    facts = {f"gotest.{k}": v for k, v in cfg.items() if k not in ("pkg", "commit")}
    if "cpu" in cfg:
        facts["cpu_model"] = cfg["cpu"]
    return ctx.begin(benchmark="gotest", name=name, params=params, facts=facts, commit=cfg.get("commit"))


def _names(names: list[str]) -> str:
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")

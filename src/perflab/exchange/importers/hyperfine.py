"""hyperfine `--export-json`: one run per command, one sample per timed run.

The metric names are those `perflab run cmd` records (perflab.benchmarks.cmd),
and the parameters have the same keys, so an imported hyperfine run of a
command is matched with native runs of the same command by `perflab compare`.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain, count, repeat
from operator import truediv

from perflab.core.model import EXIT, MAXRSS, WALL
from perflab.exchange.importers.base import DURATION, EXIT_STATUS, SIZE, Context, Problem, check_values
from perflab.exchange.importers.source import Document
from perflab.core.model import INFORMATIONAL, LOWER_IS_BETTER

NAME = "hyperfine"
LABEL = "hyperfine JSON"
KIND = "json"

# Keys of a native cmd run's parameters: a hyperfine parameter of the same
# name is kept as "hyperfine.NAME" so that it cannot change their meaning.
_CMD_PARAMS = {"command", "shell", "runs", "warmup", "prepare", "timeout", "metrics"}


def sniff(doc) -> int:
    if not isinstance(doc, dict) or "results" not in doc:
        return 0
    score = 2
    results = doc["results"]
    if isinstance(results, list) and results and isinstance(results[0], dict):
        score += sum(k in results[0] for k in ("command", "times", "mean", "stddev"))
    return score


def parse(doc: Document, ctx: Context) -> None:
    if doc.count("results") == 0:
        doc.root.get("results", "list")
        raise Problem("key 'results' is an empty list: there is nothing to import")
    for res in doc.items("results"):
        command = res.get("command", "string").value
        times = res.get("times", "list").value
        if not times:
            raise Problem(f"key '{res.path}.times' is an empty list")
        check_values(times, f"{res.path}.times", DURATION)
        exit_codes = res.get("exit_codes", "list", default=None).value
        if exit_codes is not None:
            if len(exit_codes) != len(times):
                raise Problem(f"key '{res.path}.exit_codes' has {len(exit_codes)} entries for {len(times)} times")
            check_values(exit_codes, f"{res.path}.exit_codes", EXIT_STATUS, allow_null=True)
        memory = res.get("memory_usage_byte", "list", default=None).value
        if memory is not None:
            if len(memory) != len(times):
                raise Problem(f"key '{res.path}.memory_usage_byte' has {len(memory)} entries for {len(times)} times")
            check_values(memory, f"{res.path}.memory_usage_byte", SIZE)
        params = {"command": command, "shell": False, "runs": len(times), "metrics": []}
        parameters = res.get("parameters", "object", default={}).value
        for key, value in parameters.items():
            params[f"hyperfine.{key}" if key in _CMD_PARAMS else key] = value
        ctx.run(benchmark="cmd", name=command, params=params, samples=_samples(times, exit_codes, memory))


def _samples(times: list, exit_codes: list | None, memory: list | None) -> Iterator[tuple]:
    """The rows of one command, all checked already, built by itertools (a
    million rows in a fraction of a second); one metric after another: rows
    are independent, so their order does not matter to the store."""
    parts = [zip(repeat(WALL), times, repeat("s"), repeat(LOWER_IS_BETTER), count())]
    if exit_codes is not None:
        if None in exit_codes:  # hyperfine writes null for a run killed by a signal
            parts.append((EXIT, code, "", INFORMATIONAL, i) for i, code in enumerate(exit_codes) if code is not None)
        else:
            parts.append(zip(repeat(EXIT), exit_codes, repeat(""), repeat(INFORMATIONAL), count()))
    if memory is not None:
        kib = map(truediv, memory, repeat(1024.0))
        parts.append(zip(repeat(MAXRSS), kib, repeat("KiB"), repeat(LOWER_IS_BETTER), count()))
    return chain.from_iterable(parts)

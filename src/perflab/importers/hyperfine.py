"""hyperfine `--export-json`: one run per command, one sample per timed run.

The metric names are those `perflab run cmd` records (perflab.benchmarks.cmd),
and the parameters have the same keys, so an imported hyperfine run of a
command is matched with native runs of the same command by `perflab compare`.
"""

from __future__ import annotations

from perflab.benchmarks.cmd import EXIT, MAXRSS, WALL
from perflab.importers.base import Context, Node, Problem
from perflab.model import INFORMATIONAL, LOWER_IS_BETTER

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


def parse(doc, ctx: Context) -> list[dict]:
    root = Node(doc)
    results = root.get("results", "list").items()
    if not results:
        raise Problem("key 'results' is an empty list: there is nothing to import")
    runs = []
    for res in results:
        command = res.get("command", "string").value
        times = res.get("times", "list").items()
        if not times:
            raise Problem(f"key '{res.path}.times' is an empty list")
        exit_codes = res.get("exit_codes", "list", default=None).value
        if exit_codes is not None and len(exit_codes) != len(times):
            raise Problem(f"key '{res.path}.exit_codes' has {len(exit_codes)} entries for {len(times)} times")
        memory = res.get("memory_usage_byte", "list", default=None).value
        if memory is not None and len(memory) != len(times):
            raise Problem(f"key '{res.path}.memory_usage_byte' has {len(memory)} entries for {len(times)} times")
        samples = []
        for i, t in enumerate(times):
            samples.append([WALL, t.number(), "s", LOWER_IS_BETTER, i])
            if exit_codes is not None:
                code = Node(exit_codes[i], f"{res.path}.exit_codes[{i}]")
                # hyperfine writes null for a run killed by a signal.
                if code.value is not None:
                    samples.append([EXIT, code.number(), "", INFORMATIONAL, i])
            if memory is not None:
                rss = Node(memory[i], f"{res.path}.memory_usage_byte[{i}]").number()
                samples.append([MAXRSS, rss / 1024.0, "KiB", LOWER_IS_BETTER, i])
        params = {"command": command, "shell": False, "runs": len(times), "metrics": []}
        parameters = res.get("parameters", "object", default={}).value
        for key, value in parameters.items():
            params[f"hyperfine.{key}" if key in _CMD_PARAMS else key] = value
        runs.append(ctx.run(benchmark="cmd", name=command, params=params, samples=samples))
    return runs

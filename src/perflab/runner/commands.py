"""Runs of the `cmd` family: several commands interleaved A B A B ...

Interleaving makes slow drift of the machine (thermal, background load)
hit every command alike instead of biasing the one measured last.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

from perflab.benchmarks.cmd import Command, execute, run_shell
from perflab.errors import PerflabError
from perflab.runner.recorder import RunFailed, RunRecorder, recording, start_run
from perflab.store import Store


@dataclass
class CommandRun:
    command: Command
    recorder: RunRecorder
    walls: list[float]


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(),
        TextColumn("ETA"), TimeRemainingColumn(), console=console, auto_refresh=False, transient=True,
    )


def run_commands(
    store: Store,
    commands: list[Command],
    *,
    runs: int,
    warmup: int = 0,
    prepare: str | None = None,
    timeout: float | None = None,
    ignore_failure: bool = False,
    tag: str | None = None,
    box: str | None = None,
    repo: str | None = None,
    comment: str | None = None,
    name: str | None = None,
    console: Console | None = None,
) -> list[CommandRun]:
    console = console or Console(stderr=True)
    for _ in range(warmup):
        for cmd in commands:
            _run_one(cmd, prepare, timeout, warmup=True)

    results = [
        CommandRun(cmd, start_run(
            store, benchmark="cmd", name=name or cmd.display,
            params={"command": cmd.display, "shell": cmd.shell, "runs": runs, "warmup": warmup,
                    "prepare": prepare, "timeout": timeout,
                    "metrics": [[m.name, m.pattern, m.unit, m.direction] for m in cmd.metrics]},
            box=box, tag=tag, repo=repo, comment=comment,
        ), [])
        for cmd in commands
    ]
    progress = None
    began = time.monotonic()
    try:
        with recording([r.recorder for r in results]):
            for repetition in range(runs):
                for r in results:
                    try:
                        ex = _run_one(r.command, prepare, timeout)
                        samples = ex.samples(r.command.metrics)
                    except PerflabError as e:
                        if r.recorder.samples == 0:
                            # Bad input found before anything was measured: write nothing.
                            for other in results:
                                if other.recorder.samples == 0:
                                    store.delete_run(other.recorder.run_id)
                            results = [x for x in results if x.recorder.samples > 0]
                        raise
                    r.recorder.add_samples(repetition, samples)
                    r.walls.append(ex.wall)
                    if ex.exit_status != 0 and not ignore_failure:
                        why = "timed out after %gs" % timeout if ex.timed_out else f"exited with status {ex.exit_status}"
                        tail = ex.stderr_tail.strip().splitlines()[-5:]
                        raise RunFailed(f"{r.command.display!r} {why}" + (": " + " | ".join(tail) if tail else ""))
                # After the first round we know how long the whole thing takes.
                if progress is None and repetition == 0 and runs > 1:
                    per_round = time.monotonic() - began
                    if per_round * runs > 1.0:
                        progress = _progress(console)
                        progress.start()
                        task = progress.add_task(" vs ".join(r.command.display[:30] for r in results), total=runs)
                if progress is not None:
                    progress.update(task, completed=repetition + 1)
                    progress.refresh()
    finally:
        if progress is not None:
            progress.stop()
    return results


def _run_one(cmd: Command, prepare: str | None, timeout: float | None, warmup: bool = False):
    if prepare:
        prep = run_shell(prepare, timeout)
        if prep.exit_status != 0:
            tail = " | ".join(prep.stderr_tail.strip().splitlines()[-3:])
            raise RunFailed(f"--prepare {prepare!r} exited with status {prep.exit_status}" + (f": {tail}" if tail else ""))
    return execute(cmd, timeout)

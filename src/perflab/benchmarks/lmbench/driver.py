"""Run the LMbench-class suite: build each C program, run it in separate
processes, parse its JSON lines and store every sample as it arrives.

One `perflab run lmbench` is one run. Each selected program runs once per
round, in `processes` rounds (all programs in round 1, then all in round 2,
...; a program the mode caps at fewer processes sits out the later rounds), so that per-process effects (address layout, page placement, the CPU a
process lands on) are part of the spread and slow drift of the machine hits
every program alike. A program that cannot be built, crashes, exits non-zero,
exceeds its timeout or prints something that is not one of its figures is
recorded as a failure of that program (named) and skipped from then on; the
rest of the suite goes on and the run ends "partial".
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from perflab.benchmarks import cbuild
from perflab.benchmarks.lmbench import catalog
from perflab.errors import UsageProblem
from perflab.model import Sample
from perflab.runner.recorder import RunFailed, RunRecorder, recording, start_run
from perflab.store import Store

SOURCE_DIR = Path(__file__).parent / "c"
FLAGS = cbuild.DEFAULT_FLAGS
TINY_ENV = "PERFLAB_LMBENCH_TINY"        # tiny sizes and counts: the test suite's knob
TIMEOUT_ENV = "PERFLAB_LMBENCH_TIMEOUT"  # seconds per program execution (overrides the mode's)
STDERR_TAIL = 5


@dataclass(frozen=True)
class Mode:
    name: str
    processes: int      # separate executions of every program
    samples: int        # samples per figure per execution
    target_ms: float    # length of one timed sample
    timeout: float      # seconds one execution of one program may take
    extra: tuple[str, ...] = ()
    # programs run in fewer processes than `processes` (never fewer than two)
    process_caps: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        # every figure's samples come from at least two separate processes
        for program, cap in self.process_caps:
            if cap < 2:
                raise ValueError(f"mode {self.name}: {program} capped at {cap} process(es); at least 2")

    def processes_of(self, program: str) -> int:
        return min(self.processes, dict(self.process_caps).get(program, self.processes))


# lat_fs in --quick: two processes, not four.  Its sample is at least one batch
# of 1,000 files whatever the target length, and creating a file on a slow disk
# costs up to a millisecond, so four processes alone took 40 s of a 75 s run.
QUICK = Mode("quick", processes=4, samples=3, target_ms=10, timeout=120, process_caps=(("lat_fs", 2),))
FULL = Mode("full", processes=5, samples=5, target_ms=50, timeout=900)
TINY = Mode("tiny", processes=2, samples=1, target_ms=0.5, timeout=120, extra=("-T",))


def mode_for(quick: bool) -> Mode:
    if os.environ.get(TINY_ENV, "") not in ("", "0"):
        return TINY
    return QUICK if quick else FULL


def parse_only(values: Iterable[str]) -> list[str]:
    """--only values (repeatable and/or comma-separated) -> categories in suite order.

    An unknown category raises UsageProblem listing the valid ones.
    """
    wanted: list[str] = []
    for value in values:
        for part in value.split(","):
            part = part.strip()
            if not part:
                continue
            if part not in catalog.CATEGORIES:
                raise UsageProblem(f"--only: unknown category {part!r}; valid categories: {', '.join(catalog.CATEGORIES)}")
            wanted.append(part)
    return [c for c in catalog.CATEGORIES if c in wanted]


@dataclass
class SuiteResult:
    recorder: RunRecorder
    mode: Mode
    programs: list[str]
    failures: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def run_id(self) -> int:
        return self.recorder.run_id

    @property
    def samples(self) -> int:
        return self.recorder.samples


class ProgramFailed(Exception):
    """One execution of one program went wrong; the message names the program."""


def _tmp_filesystem(path: str) -> str:
    """File system type of the mount holding `path` (from /proc/mounts), or n/a."""
    best, fstype = "", "n/a"
    try:
        real = os.path.realpath(path)
        with open("/proc/mounts") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3:
                    mount = parts[1].replace("\\040", " ")
                    if (real == mount or real.startswith(mount.rstrip("/") + "/")) and len(mount) >= len(best):
                        best, fstype = mount, parts[2]
    except OSError:
        pass
    return fstype


def _describe_exit(program: str, returncode: int, stderr: str) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        why = f"killed by {name}"
    else:
        why = f"exited with status {returncode}"
    tail = [line.strip() for line in stderr.splitlines() if line.strip()][-STDERR_TAIL:]
    return f"{program}: {why}" + (": " + " | ".join(tail) if tail else "")


def execute(program: str, binary: Path, args: list[str], timeout: float, cwd: str) -> str:
    """Run one execution of a program in its own process group; its stdout.

    Raises ProgramFailed on a crash, a non-zero exit or a timeout (the whole
    process group is killed: a ring of lat_ctx processes goes with it).
    """
    try:
        proc = subprocess.Popen([str(binary), *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, cwd=cwd, start_new_session=True, text=True,
                                errors="replace")
    except OSError as e:
        raise ProgramFailed(f"{program}: cannot start {binary}: {e.strerror or e}") from None
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        tail = [line.strip() for line in (err or "").splitlines() if line.strip()][-STDERR_TAIL:]
        raise ProgramFailed(f"{program}: timed out after {timeout:g} s (killed)" + (": " + " | ".join(tail) if tail else "")) from None
    except BaseException:
        # Ctrl-C or SIGTERM while it runs: leave nothing behind.
        _kill_group(proc)
        proc.wait()
        raise
    if proc.returncode != 0:
        raise ProgramFailed(_describe_exit(program, proc.returncode, err or ""))
    return out


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def parse_output(program: str, text: str) -> list[Sample]:
    """A program's JSON lines -> samples, with the catalog's unit and direction.

    Anything that is not one of the program's own figures in its unit, with a
    finite value, is garbage: ProgramFailed naming the program and the line.
    """
    expected = {m: catalog.FIGURES[m] for m in catalog.metrics_of_program(program)}
    samples = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        where = f"{program}: output line {number} {line[:80]!r}"
        try:
            doc = json.loads(line)
        except ValueError:
            raise ProgramFailed(f"{where} is not JSON") from None
        if not isinstance(doc, dict):
            raise ProgramFailed(f"{where} is not a JSON object")
        metric, value, unit = doc.get("metric"), doc.get("value"), doc.get("unit")
        figure = expected.get(metric) if isinstance(metric, str) else None
        if figure is None:
            raise ProgramFailed(f"{where} names no figure of {program}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ProgramFailed(f"{where}: the value is not a finite number")
        if unit != figure.unit:
            raise ProgramFailed(f"{where}: unit {unit!r}, expected {figure.unit!r}")
        samples.append(Sample(metric, float(value), figure.unit, figure.direction))
    if not samples:
        raise ProgramFailed(f"{program}: printed no figures")
    return samples


def _progress(console: Console) -> Progress:
    return Progress(TextColumn("lmbench {task.description:<22}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=console, transient=True, disable=not console.is_terminal)


def run_suite(
    store: Store,
    *,
    quick: bool = False,
    categories: list[str] | None = None,
    tag: str | None = None,
    box: str | None = None,
    repo: str | None = None,
    comment: str | None = None,
    console: Console | None = None,
) -> SuiteResult:
    """Build and run the selected programs; store every sample of one run."""
    console = console or Console(stderr=True)
    selected = categories or list(catalog.CATEGORIES)
    programs = catalog.programs_of(selected)
    mode = mode_for(quick)
    timeout = float(os.environ.get(TIMEOUT_ENV) or mode.timeout)
    cc = cbuild.cc_command()
    tmp_parent = tempfile.gettempdir()

    facts = {"cc_flags": " ".join(FLAGS), "lmbench_tmpdir": tmp_parent,
             "lmbench_tmpdir_fs": _tmp_filesystem(tmp_parent)}
    try:
        comp = cbuild.compiler(cc)
        facts["cc_path"] = comp.path
    except cbuild.BuildError:
        facts["cc_path"] = "n/a"
    params: dict = {"quick": bool(quick)}
    if categories:
        params["only"] = list(selected)
    if mode is TINY:
        params["tiny"] = True

    rec = start_run(store, benchmark="lmbench", name="lmbench", params=params, box=box, tag=tag,
                    repo=repo, comment=comment, cc=cc, extra_facts=facts)
    result = SuiteResult(rec, mode, programs)
    began = time.monotonic()
    workdir = tempfile.mkdtemp(prefix="perflab-lmbench-")
    progress = _progress(console)

    def fail(program: str, message: str) -> None:
        result.failures[program] = message
        rec.add_failure(program, message)
        progress.console.print(f"[yellow]warning:[/] {escape(message)}", soft_wrap=True, highlight=False)

    try:
        with recording([rec]), progress:
            binaries: dict[str, Path] = {}
            build = progress.add_task("building", total=len(programs))
            for program in programs:
                progress.update(build, description=f"building {program}")
                try:
                    binaries[program] = cbuild.build(program, SOURCE_DIR, cc=cc, flags=FLAGS)
                except cbuild.BuildError as e:
                    fail(program, str(e))
                progress.advance(build)
            progress.remove_task(build)

            task = progress.add_task("", total=sum(mode.processes_of(p) for p in binaries))
            counts: dict[str, int] = defaultdict(int)   # samples stored so far, per metric
            args = ["-n", str(mode.samples), "-t", f"{mode.target_ms:g}", "-d", workdir, *mode.extra]
            for round_no in range(mode.processes):
                for program, binary in binaries.items():
                    if round_no >= mode.processes_of(program):
                        continue
                    if program in result.failures:
                        progress.advance(task)
                        continue
                    progress.update(task, description=f"{program} ({round_no + 1}/{mode.processes_of(program)})")
                    try:
                        samples = parse_output(program, execute(program, binary, args, timeout, workdir))
                    except ProgramFailed as e:
                        fail(program, str(e))
                        progress.advance(task)
                        continue
                    # one repetition per sample index of each metric: (metric, repetition) stays unique
                    by_rep: dict[int, list[Sample]] = defaultdict(list)
                    for s in samples:
                        by_rep[counts[s.metric]].append(s)
                        counts[s.metric] += 1
                    for rep in sorted(by_rep):
                        rec.add_samples(rep, by_rep[rep])
                    missing = [m for m in catalog.metrics_of_program(program) if not any(s.metric == m for s in samples)]
                    if missing:
                        fail(program, f"{program}: printed no value for {', '.join(missing)}")
                    progress.advance(task)
            result.seconds = time.monotonic() - began
            if rec.samples == 0:
                first = next(iter(result.failures.values()), "nothing was run")
                raise RunFailed(f"lmbench: no figure was measured ({len(result.failures)} of {len(programs)} "
                                f"programs failed; first: {first})")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return result

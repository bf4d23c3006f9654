"""The `cmd` family: time any command, as hyperfine does, without a shell.

One repetition is one execution of the command (after the untimed --prepare
command, if any), started by the runner's executor: wall time and the rusage
of the command alone (wait4 in the launcher), stdout and stderr to temporary
files, nothing read while it runs. Extra metrics come from its output
(--metric NAME=REGEX or NAME=json:PATH).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from pydantic import Field, field_validator, model_validator

from perflab.benchmarks.base import STOP, Family, Metric, Params, Session, catalog_of, cpu_time_metrics
from perflab.core.errors import PerflabError, UsageProblem
# LKP's names for what /usr/bin/time reports (perflab.core.model).
from perflab.core.model import EXIT, MAXRSS, SYS, USER, WALL
from perflab.core.model import HIGHER_IS_BETTER, INFORMATIONAL, LOWER_IS_BETTER, Sample
from perflab.core.params import far_machine
from perflab.core.process import ProcessResult, ProcessSpec, in_run_directory

BUILTIN_METRICS = catalog_of(
    Metric(WALL, "s", LOWER_IS_BETTER, "wall-clock time of one execution"),
    *cpu_time_metrics(USER, SYS),
    Metric(MAXRSS, "KiB", LOWER_IS_BETTER, "maximum resident set size of the command alone"),
    Metric(EXIT, "", INFORMATIONAL, "exit status (128+N when killed by signal N)"),
)


@dataclass(frozen=True)
class MetricRule:
    """How to pull one extra metric out of a command's output."""

    name: str
    pattern: str  # a regex, or "json:PATH" for a JSON document/line
    unit: str = ""
    direction: int = LOWER_IS_BETTER

    @classmethod
    def parse(cls, spec: str, units: dict[str, str], higher: set[str]) -> "MetricRule":
        name, sep, pattern = spec.partition("=")
        name = name.strip()
        if not sep or not name or not pattern:
            raise PerflabError(f"--metric {spec!r}: expected NAME=REGEX or NAME=json:PATH")
        if not re.fullmatch(r"[A-Za-z0-9_.\-/%]+", name):
            raise PerflabError(f"--metric {spec!r}: metric name {name!r} may hold only letters, digits and . _ - / %")
        from perflab.store.schema import sample as sample_table

        longest_name, longest_unit = sample_table.c.metric.type.length, sample_table.c.unit.type.length
        if len(name) > longest_name:
            raise UsageProblem(f"--metric {name[:40]!r}...: a metric name is at most {longest_name} characters")
        unit = units.get(name, "")
        if len(unit) > longest_unit:
            raise UsageProblem(f"--unit {name}={unit[:40]!r}: a unit is at most {longest_unit} characters")
        if name in BUILTIN_METRICS:
            raise UsageProblem(f"--metric {spec!r}: {name!r} is a metric perflab records itself "
                               f"({', '.join(BUILTIN_METRICS)}); choose another name")
        if pattern.startswith("json:"):
            _parse_json_path(pattern[5:], spec)
        else:
            try:
                compiled = re.compile(pattern, re.MULTILINE)
            except re.error as e:
                raise PerflabError(f"--metric {spec!r}: invalid regex: {e}") from None
            if compiled.groups > 1:
                raise PerflabError(f"--metric {spec!r}: the regex may have at most one capture group")
        return cls(name, pattern, units.get(name, ""), HIGHER_IS_BETTER if name in higher else LOWER_IS_BETTER)

    def extract(self, output: str) -> float:
        if self.pattern.startswith("json:"):
            raw = _json_lookup(output, self.pattern[5:], self.name)
        else:
            m = re.search(self.pattern, output, re.MULTILINE)
            if not m:
                raise PerflabError(f"metric {self.name}: regex {self.pattern!r} matched nothing in the command's output")
            raw = m.group(1) if m.re.groups else m.group(0)
        try:
            value = float(raw)
        except (TypeError, ValueError):
            raise PerflabError(f"metric {self.name}: {self.pattern!r} found {str(raw)[:60]!r}, which is not a number") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise PerflabError(f"metric {self.name}: {self.pattern!r} found {raw!r}, which is not a finite number")
        return value


_PATH_TOKEN = re.compile(r"\.?([A-Za-z_][\w\-]*)|\[(\d+)\]|\[\"([^\"]+)\"\]")


def _parse_json_path(path: str, spec: str) -> list:
    """'$.a.b[0]' or 'a.b[0]' -> ['a', 'b', 0]."""
    rest = path[1:] if path.startswith("$") else path
    keys, pos = [], 0
    while pos < len(rest):
        m = _PATH_TOKEN.match(rest, pos)
        if not m or m.end() == pos:
            raise PerflabError(f"--metric {spec!r}: cannot parse JSON path at {rest[pos:]!r}")
        keys.append(m.group(1) if m.group(1) is not None else int(m.group(2)) if m.group(2) is not None else m.group(3))
        pos = m.end()
    if not keys:
        raise PerflabError(f"--metric {spec!r}: empty JSON path")
    return keys


def _json_lookup(output: str, path: str, name: str):
    keys = _parse_json_path(path, f"{name}=json:{path}")
    documents = []
    try:
        documents.append(json.loads(output))
    except ValueError:
        # JSON lines: the last line that has the path wins.
        for line in output.splitlines():
            line = line.strip()
            if line.startswith(("{", "[")):
                try:
                    documents.append(json.loads(line))
                except ValueError:
                    pass
    for doc in reversed(documents):
        node = doc
        try:
            for k in keys:
                node = node[k]
        except (KeyError, IndexError, TypeError):
            continue
        return node
    raise PerflabError(f"metric {name}: JSON path {path!r} found nothing in the command's output")


@dataclass
class Command:
    """One command to time."""

    argv: list[str]
    display: str
    shell: bool = False
    metrics: list[MetricRule] = field(default_factory=list)

    @classmethod
    def build(cls, words: list[str], shell: bool, metrics: list[MetricRule]) -> "Command":
        if not words:
            raise PerflabError("empty command: give it after -- or with --cmd")
        if shell:
            text = " ".join(words)
            return cls(["/bin/sh", "-c", text], text, True, metrics)
        if len(words) == 1 and " " in words[0]:
            # `--cmd "sleep 0.1"`: split like a shell would, but run no shell.
            try:
                words = shlex.split(words[0])
            except ValueError as e:
                raise PerflabError(f"command {words[0]!r}: {e}") from None
        exe = words[0]
        if far_machine() is not None:
            # On another machine: its program, found on its PATH there (the launcher execs a path).
            argv = words if os.path.isabs(exe) else ["/bin/sh", "-c", 'exec "$0" "$@"', *words]
            return cls(argv, shlex.join(words), False, metrics)
        local = in_run_directory(exe) if os.path.dirname(exe) else exe   # ./prog: where the run starts
        resolved = shutil.which(local)
        if resolved is None:
            what = "is not executable" if os.path.exists(local) else "not found"
            raise PerflabError(f"command {exe!r} {what} (PATH={os.environ.get('PATH', '')})")
        return cls([resolved if local == exe else exe, *words[1:]], shlex.join(words), False, metrics)


def check_unique(rules: list[MetricRule]) -> None:
    """A repeated --metric name would store every sample twice."""
    seen = set()
    for r in rules:
        if r.name in seen:
            raise UsageProblem(f"--metric {r.name!r} is given twice; each metric name once")
        seen.add(r.name)


class MetricSpec(Params):
    """An extracted metric in a job file: {name, pattern, unit, direction}."""

    name: str
    pattern: str
    unit: str = ""
    direction: int = LOWER_IS_BETTER

    @field_validator("direction")
    @classmethod
    def _direction(cls, v: int) -> int:
        if v not in (LOWER_IS_BETTER, HIGHER_IS_BETTER, INFORMATIONAL):
            raise ValueError("direction must be -1 (lower is better), 1 (higher is better) or 0")
        return v


class CmdParams(Params):
    command: str | None = Field(None, description="the command line (split like a shell would, or run by /bin/sh with shell: true)")
    argv: list[str] | None = Field(None, description="the command as exact words (instead of command)")
    shell: bool = Field(False, description="run it through /bin/sh -c")
    prepare: str | None = Field(None, description="shell command run before every execution (untimed)")
    metrics: list[MetricSpec] = Field(default_factory=list, description="metrics extracted from the output")
    ignore_failure: bool = Field(False, description="keep going when the command exits non-zero")
    name: str | None = Field(None, description="the run's name in the log (default: the command line)")
    cpus: str | None = Field(None, description="bind the command to these CPUs, e.g. 1 or 0,2-3 (sched_setaffinity "
                                               "in the launcher): keeps every run on CPUs of one speed")

    @field_validator("cpus", mode="before")
    @classmethod
    def _cpu_list(cls, v):
        if v is None:
            return None
        text = str(v).strip()
        allowed = os.sched_getaffinity(0)
        wanted = set()
        for part in text.split(","):
            lo, sep, hi = part.strip().partition("-")
            if not lo.isdigit() or (sep and not hi.isdigit()):
                raise ValueError(f"{text!r}: expected a CPU list like 1 or 0,2-3")
            first, last = int(lo), int(hi) if sep else int(lo)
            if last < first:
                raise ValueError(f"{text!r}: range {part.strip()} runs backwards")
            wanted.update(range(first, last + 1))
        if not wanted <= allowed:
            raise ValueError(f"{text!r}: CPU {min(wanted - allowed)} is not among this machine's allowed CPUs "
                             f"({','.join(map(str, sorted(allowed)))})")
        return text

    @field_validator("command", "argv", "prepare", mode="before")
    @classmethod
    def _words_as_text(cls, v):
        # YAML reads `true`, `1` or `yes` as booleans and numbers; in a command line they are words.
        def word(x):
            return ("true" if x else "false") if isinstance(x, bool) else str(x) if isinstance(x, (int, float)) else x
        return [word(x) for x in v] if isinstance(v, list) else word(v)

    @model_validator(mode="after")
    def _check(self) -> "CmdParams":
        if (self.command is None) == (self.argv is None):
            raise ValueError("give the command as `command` (a string) or `argv` (a list of words), one of them")
        if not self.words() or not any(self.words()):
            raise ValueError("empty command")
        rules = self.rules()
        check_unique(rules)
        return self

    def rules(self) -> list[MetricRule]:
        return [MetricRule.parse(f"{m.name}={m.pattern}", {m.name: m.unit},
                                 {m.name} if m.direction == HIGHER_IS_BETTER else set()) for m in self.metrics]

    def words(self) -> list[str]:
        return [self.command] if self.command is not None else list(self.argv or [])


class CmdSession(Session):
    def __init__(self, command: Command, params: CmdParams, job: dict):
        self.command = command
        self.prepare = params.prepare
        self.ignore_failure = params.ignore_failure
        self.cpus = params.cpus
        self.timeout = job.get("timeout")
        super().__init__(
            name=params.name or command.display,
            params={"command": command.display, "shell": command.shell, "runs": job["runs"],
                    "warmup": job.get("warmup", 0), "prepare": params.prepare, "timeout": self.timeout,
                    "metrics": [[m.name, m.pattern, m.unit, m.direction] for m in command.metrics],
                    **({"cpus": params.cpus} if params.cpus else {})},
        )

    def processes(self, repetition: int) -> list[ProcessSpec]:
        specs = []
        if self.prepare:
            specs.append(ProcessSpec(["/bin/sh", "-c", self.prepare], item=f"--prepare {self.prepare!r}",
                                     timeout=self.timeout, capture_stdout=False, record=False))
        specs.append(ProcessSpec(self.command.argv, item=repr(self.command.display), timeout=self.timeout,
                                 capture_stdout=bool(self.command.metrics), cpus=self.cpus))
        return specs

    def judge(self, spec: ProcessSpec, result: ProcessResult) -> str | None:
        if result.interrupted or (spec.record and self.ignore_failure and not result.timed_out):
            return None
        if result.ok:
            return None
        if result.timed_out:
            return f"{spec.item} timed out after {spec.timeout:g}s" + result.stderr_summary()
        return f"{spec.item} exited with status {result.exit_status}" + result.stderr_summary()

    def parse(self, spec: ProcessSpec, result: ProcessResult) -> list[Sample]:
        out = [
            Sample(WALL, result.wall, "s", LOWER_IS_BETTER),
            Sample(USER, result.user, "s", LOWER_IS_BETTER),
            Sample(SYS, result.sys, "s", LOWER_IS_BETTER),
            Sample(MAXRSS, float(result.maxrss_kib), "KiB", LOWER_IS_BETTER),
            Sample(EXIT, float(result.exit_status), "", INFORMATIONAL),
        ]
        if result.exit_status != 0 and not self.ignore_failure:
            return out   # a failed execution is kept with its exit status; its output is not measured
        combined = result.stdout + ("\n" + result.stderr_tail if result.stderr_tail else "")
        out += [Sample(m.name, m.extract(combined), m.unit, m.direction) for m in self.command.metrics]
        return out


class CmdFamily(Family):
    name = "cmd"
    summary = "time any command, as hyperfine does"
    Params = CmdParams
    # duration_params: perflab.benchmarks.DURATION_PARAMS
    failure_policy = STOP
    # secondary_metrics: perflab.benchmarks.SECONDARY_METRICS

    def metrics(self, params: CmdParams) -> dict[str, Metric]:
        extra = {r.name: Metric(r.name, r.unit, r.direction, f"from the output: {r.pattern}") for r in params.rules()}
        return {**BUILTIN_METRICS, **extra}

    def command(self, params: CmdParams) -> Command:
        return Command.build(params.words(), params.shell, params.rules())

    @contextmanager
    def session(self, params: CmdParams, job: dict) -> Iterator[CmdSession]:
        yield CmdSession(self.command(params), params, job)


FAMILY = CmdFamily()

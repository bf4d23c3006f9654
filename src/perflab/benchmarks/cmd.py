"""The `cmd` family: time any command, as hyperfine does, without a shell.

One execution is spawned with posix_spawn, its stdout and stderr go to
temporary files (nothing is read while it runs), and wait4 gives the child's
own rusage. Wall time is measured around spawn..wait4 with a monotonic clock.
"""

from __future__ import annotations

import json
import os
import re
import select
import shlex
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field

from perflab.errors import PerflabError
from perflab.model import HIGHER_IS_BETTER, INFORMATIONAL, LOWER_IS_BETTER, Sample

STDERR_TAIL_BYTES = 2000

# LKP's names for what /usr/bin/time reports.
WALL = "time.elapsed_time"
USER = "time.user_time"
SYS = "time.system_time"
MAXRSS = "time.maximum_resident_set_size"
EXIT = "time.exit_status"


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
        resolved = shutil.which(exe)
        if resolved is None:
            what = "is not executable" if os.path.exists(exe) else "not found"
            raise PerflabError(f"command {exe!r} {what} (PATH={os.environ.get('PATH', '')})")
        return cls([resolved, *words[1:]], shlex.join(words), False, metrics)


@dataclass
class Execution:
    wall: float
    user: float
    sys: float
    maxrss_kib: int
    exit_status: int  # 128+N when killed by signal N, like a shell
    stdout: str
    stderr_tail: str
    timed_out: bool = False

    def samples(self, metrics: list[MetricRule]) -> list[Sample]:
        out = [
            Sample(WALL, self.wall, "s", LOWER_IS_BETTER),
            Sample(USER, self.user, "s", LOWER_IS_BETTER),
            Sample(SYS, self.sys, "s", LOWER_IS_BETTER),
            Sample(MAXRSS, float(self.maxrss_kib), "KiB", LOWER_IS_BETTER),
            Sample(EXIT, float(self.exit_status), "", INFORMATIONAL),
        ]
        combined = self.stdout + ("\n" + self.stderr_tail if self.stderr_tail else "")
        out += [Sample(m.name, m.extract(combined), m.unit, m.direction) for m in metrics]
        return out


def _wait(pid: int, timeout: float | None) -> tuple[int, object, bool]:
    if timeout is None:
        _, status, usage = os.wait4(pid, 0)
        return status, usage, False
    pidfd = os.pidfd_open(pid)
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        timed_out = not poller.poll(timeout * 1000)
        if timed_out:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    finally:
        os.close(pidfd)
    _, status, usage = os.wait4(pid, 0)
    return status, usage, timed_out


def execute(cmd: Command, timeout: float | None = None, capture_stdout: bool | None = None) -> Execution:
    """Run the command once and measure it."""
    want_stdout = bool(cmd.metrics) if capture_stdout is None else capture_stdout
    with tempfile.TemporaryFile() as err, (tempfile.TemporaryFile() if want_stdout else open(os.devnull, "wb")) as out:
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, out.fileno(), 1),
            (os.POSIX_SPAWN_DUP2, err.fileno(), 2),
        ]
        # Encode argv and environment before the clock starts: posix_spawn
        # would otherwise encode them inside the timed interval.
        argv = [os.fsencode(a) for a in cmd.argv]
        env = dict(os.environb)
        start = time.perf_counter()
        try:
            # setpgroup=0: the command gets its own process group, so a timeout
            # kills all it started.
            pid = os.posix_spawn(argv[0], argv, env, file_actions=actions, setpgroup=0)
        except OSError as e:
            raise PerflabError(f"cannot start {cmd.display!r}: {e.strerror}") from None
        try:
            status, usage, timed_out = _wait(pid, timeout)
        except BaseException:
            # Ctrl-C or SIGTERM while waiting: do not leave the command running.
            try:
                os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
            raise
        wall = time.perf_counter() - start
        if os.WIFSIGNALED(status):
            code = 128 + os.WTERMSIG(status)
        else:
            code = os.WEXITSTATUS(status)
        stdout = ""
        if want_stdout:
            out.seek(0)
            stdout = out.read().decode(errors="replace")
        size = err.seek(0, os.SEEK_END)
        err.seek(max(0, size - STDERR_TAIL_BYTES))
        tail = err.read().decode(errors="replace")
    return Execution(wall, usage.ru_utime, usage.ru_stime, usage.ru_maxrss, code, stdout, tail, timed_out)


def run_shell(text: str, timeout: float | None = None) -> Execution:
    """Run a --prepare command through /bin/sh, as hyperfine does."""
    return execute(Command(["/bin/sh", "-c", text], text, True), timeout)

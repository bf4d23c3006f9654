#!/usr/bin/env python3
"""The runner's own cost, against its targets (issue 9).

1. A 10-repetition job of `true` through the job path (`perflab run JOB.yaml`) against
   `perflab run cmd --runs 10 -- true` of the code before the runner existed (a git
   revision checked out under /tmp): whole-command wall time, alternating, median of
   ROUNDS. Target: ratio <= 1.2.
2. The harness's CPU while a will-it-scale testcase runs: perflab's Python process and the
   launcher, sampled from /proc over the timed part. Target: < 1% of one core.

usage: runner_overhead.py [--old REV] [--rounds N] [--wis-seconds S]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PYTHON = REPO / ".venv" / "bin" / "python"
TICK = os.sysconf("SC_CLK_TCK")


def old_checkout(rev: str) -> Path:
    target = Path(tempfile.gettempdir()) / f"perflab-old-{rev}"
    if not (target / "src").is_dir():
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target


def timed(argv: list[str], env: dict) -> float:
    began = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - began


def job_path_vs_old(rev: str, rounds: int) -> None:
    old = old_checkout(rev)
    work = Path(tempfile.mkdtemp(prefix="perflab-overhead-"))
    job = work / "true.yaml"
    job.write_text("benchmark: cmd\nruns: 10\nargv: [true]\n")
    new_env = dict(os.environ, PERFLAB_DB=str(work / "new.db"), PYTHONPATH=str(REPO / "src"))
    old_env = dict(os.environ, PERFLAB_DB=str(work / "old.db"), PYTHONPATH=str(old / "src"))
    entry = "import sys; from perflab.cli import main; sys.exit(main())"
    new_cmd = [str(PYTHON), "-c", entry, "run", str(job)]
    old_cmd = [str(PYTHON), "-c", entry, "run", "cmd", "--runs", "10", "--", "true"]
    new_cmd_cmd = [str(PYTHON), "-c", entry, "run", "cmd", "--runs", "10", "--", "true"]
    for cmd, env in ((new_cmd, new_env), (old_cmd, old_env)):   # create the stores, build the launcher
        timed(cmd, env)
    new, old_t, new_cli = [], [], []
    for i in range(rounds):
        order = [(new_cmd, new_env, new), (old_cmd, old_env, old_t), (new_cmd_cmd, new_env, new_cli)]
        if i % 2:
            order.reverse()
        for cmd, env, acc in order:
            acc.append(timed(cmd, env))
    m_new, m_old, m_cli = statistics.median(new), statistics.median(old_t), statistics.median(new_cli)
    print(f"10 x true, whole command, median of {rounds} alternating rounds:")
    print(f"  job path  (perflab run JOB.yaml)        {m_new * 1e3:8.1f} ms")
    print(f"  run cmd   (this revision)               {m_cli * 1e3:8.1f} ms")
    print(f"  run cmd   (revision {rev[:10]})        {m_old * 1e3:8.1f} ms")
    ratio = m_new / m_old
    print(f"  ratio job path / old run cmd: {ratio:.3f}  (target <= 1.2: {'met' if ratio <= 1.2 else 'NOT met'})")
    shutil.rmtree(work, ignore_errors=True)


def _ticks(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])      # utime + stime
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except FileNotFoundError:
        return []


def harness_cpu(seconds: float) -> None:
    base = [str(PYTHON), "-c", "import sys; from perflab.cli import main; sys.exit(main())", "run"]
    wis = ["will-it-scale", "--test", "getppid1", "--nr-task", "1", "--runs", "1",
           "--duration", str(seconds), "--warmup-time", "0.5"]
    cases = {"will-it-scale process": [*wis, "--mode", "process"],
             "will-it-scale thread": [*wis, "--mode", "thread"],
             "ebizzy -t 2": ["ebizzy", "--nr-threads", "2", "--duration", str(seconds), "--runs", "1"],
             "fio randread": ["fio", "--rw", "randread", "--size", "64M", "--runtime", str(seconds), "--runs", "1"]}
    _harness_cpu(base, cases)


def _harness_cpu(base: list[str], cases: dict[str, list[str]]) -> None:
    work = Path(tempfile.mkdtemp(prefix="perflab-overhead-"))
    env = dict(os.environ, PERFLAB_DB=str(work / "cpu.db"), PYTHONPATH=str(REPO / "src"))
    results = []
    for mode, args in cases.items():
        proc = subprocess.Popen([*base, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        launcher = None
        while launcher is None and proc.poll() is None:
            kids = _children(proc.pid)
            launcher = next((k for k in kids if "launch" in (Path(f"/proc/{k}/exe").resolve().name
                                                             if os.path.exists(f"/proc/{k}") else "")), None)
            time.sleep(0.01)
        start = time.monotonic()
        first = (_ticks(proc.pid), _ticks(launcher))
        last = first
        while proc.poll() is None:
            now = (_ticks(proc.pid), _ticks(launcher))
            if None in now:
                break
            last, end = now, time.monotonic()
            time.sleep(0.05)
        proc.wait()
        used = ((last[0] - first[0]) + (last[1] - first[1])) / TICK
        share = used / (end - start)
        results.append(share)
        print(f"  {mode:22}: perflab + launcher used {used * 1e3:.0f} ms of CPU in {end - start:.1f} s "
              f"= {share * 100:.2f}% of a core (resolution {100 / TICK / (end - start):.2f}%)")
    worst = max(results)
    print(f"  harness CPU while a benchmark runs (worst case): {worst * 100:.2f}% of a core  "
          f"(target < 1%: {'met' if worst < 0.01 else 'NOT met'})")
    shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", default="f81056d", help="the revision before the runner (default: f81056d)")
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--wis-seconds", type=float, default=10)
    a = ap.parse_args()
    job_path_vs_old(a.old, a.rounds)
    print("harness CPU (perflab's Python process + the launcher) while a benchmark runs:")
    harness_cpu(a.wis_seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())

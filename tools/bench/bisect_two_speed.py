#!/usr/bin/env python3
"""How often the bisection names a wrong commit on a two-speed machine, and how often it says so.

The real git (a 16-commit repository made here, nothing built) and the real
bisection (perflab.automate.bisect.Bisection.run), measured through a scripted
Measurer: each commit's level (x1.05 from a random commit on) times the
machine's speed, which switches between 1x and --factor before each run with
probability --switch (this 2-vCPU guest's habit, issue 21 item 5), with
--cov of lognormal noise. No timing is involved, so the figures do not depend
on the machine's load.

Per seed it prints what went wrong; at the end the counts: right (named and
right), WRONG (named, wrong), could-not-confirm (git bisect's candidate right or
wrong), refused. Run it against another tree's code with PYTHONPATH to compare.

    tools/bench/bisect_two_speed.py --seeds 60
    tools/bench/bisect_two_speed.py --seeds 40 --pairing off
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from perflab.automate import bisect
from perflab.automate.measurer import Measured

METRIC = "loop.ms"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def make_repo(path: Path, n: int) -> list[str]:
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "bench@example.com")
    git(path, "config", "user.name", "Bench")
    shas = []
    for i in range(1, n + 1):
        (path / "f").write_text(f"{i}\n")
        git(path, "add", "f")
        git(path, "commit", "-q", "-m", f"commit {i}")
        shas.append(git(path, "rev-parse", "HEAD").strip())
    return shas


class TwoSpeedMachine:
    def __init__(self, shas, slow_at, seed, factor, switch, cov, pct):
        self.level = {s: 10.0 * (1 + pct if i + 1 >= slow_at else 1.0) for i, s in enumerate(shas)}
        self.rng, self.slow, self.place = random.Random(seed), False, ""
        self.factor, self.switch, self.cov = factor, switch, cov

    def measure(self, commit, jobs, *, slot=""):
        out = []
        for job in jobs:
            values = []
            for _ in range(job.runs):
                if self.rng.random() < self.switch:
                    self.slow = not self.slow
                values.append(self.level[commit] * (self.factor if self.slow else 1) * (1 + self.rng.gauss(0, self.cov)))
            out.append(Measured("done", None, [1], {METRIC: values}, job.runs))
        return out

    def summary(self, measured):
        return ""


class NoStore:
    def find_runs(self, **_kw):
        return []

    def samples(self, _ids):
        return []


def trial(tmp: Path, shas, seed: int, args) -> str:
    slow_at = random.Random(seed).randint(2, len(shas))
    rec = bisect.Record(id=f"t{seed:07d}", repo=str(tmp / "repo"), good=shas[0], bad=shas[-1], build="",
                        job=bisect.command_job(["./prog"]), metric=METRIC, tag="t",
                        settings=vars(bisect.Settings(pairing=args.pairing)), path=str(tmp / f"{seed}.json"))
    machine = TwoSpeedMachine(shas, slow_at, seed, args.factor, args.switch, args.cov, args.change / 100)
    try:
        result = bisect.Bisection(NoStore(), rec, measurer=machine).run()
    except bisect.BisectError:
        return "refused"
    right = shas[slow_at - 1]
    if result.culprit:
        return "right" if result.culprit.sha == right else "WRONG"
    unconfirmed = getattr(result, "unconfirmed", None)   # absent before the confirmation existed
    if unconfirmed:
        return f"could not confirm a {'right' if unconfirmed.sha == right else 'wrong'} candidate"
    return "no single commit"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, default=40)
    p.add_argument("--commits", type=int, default=16)
    p.add_argument("--factor", type=float, default=2.3, help="the slow speed's factor (default 2.3)")
    p.add_argument("--switch", type=float, default=0.1, help="chance of a switch before each run (default 0.1)")
    p.add_argument("--cov", type=float, default=0.005, help="per-run noise (default 0.005)")
    p.add_argument("--change", type=float, default=5.0, help="planted change in percent (default 5)")
    p.add_argument("--pairing", choices=("auto", "on", "off"), default="auto")
    args = p.parse_args()
    counts: Counter = Counter()
    with tempfile.TemporaryDirectory(prefix="bisect-two-speed-") as tmp:
        shas = make_repo(Path(tmp) / "repo", args.commits)
        for seed in range(args.seeds):
            outcome = trial(Path(tmp), shas, seed, args)
            counts[outcome] += 1
            if outcome != "right":
                print(f"seed {seed}: {outcome}", flush=True)
    print(f"{args.seeds} bisections, x{args.factor:g} speed switching with p={args.switch:g}, {args.change:g}% change, "
          f"pairing {args.pairing}: " + ", ".join(f"{k} {v}" for k, v in counts.most_common()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

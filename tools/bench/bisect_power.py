#!/usr/bin/env python3
"""How often `perflab bisect` finds the right commit, and how many runs it spends.

Generates git repositories of --commits commits (default 64) of a C busy loop
sized to about --ms milliseconds; at one commit, chosen at random, the loop
becomes --changes percent longer (5 and, separately, 2 by default); the other
commits change nothing (a notes file) or do not compile (about one in
--broken-every, each fixed by the next commit). Each trial runs the real
`perflab bisect` command on it (a fresh store, wall time of the program as
the metric: the machine's own timing noise, nothing filtered) and checks the
first bad commit it names.

It prints, per change: trials right out of trials, runs used, and the runs a
fixed 10 runs per measured commit would have taken along the same path (10 x
the commits measured, the ends included), with their ratio.

`--metric` picks what is bisected (issue 21):

- `wall`: the program's wall time (time.elapsed_time, the runner's);
- `cpu`: its CPU time, user + system (getrusage of the process, which the
  program reads at its end and prints: the same figure as the runner's
  time.user_time + time.system_time, as one metric, since a bisection follows one);
- `instructions`: the instructions it executes, counted by valgrind
  (`--tool=cachegrind --cache-sim=no`); exact by its unit, so the bisection takes
  one run per commit and two at each end. The slowdown is more iterations of
  the loop, so it changes the count by about the same percentage. The job is
  a cmd job with `measure: instructions`; the metric valgrind.instructions.

It prints, per change, right / refused / wrong out of the trials ("could not
confirm" counts as refused, and says whether git bisect's candidate was right)
and the ratio of runs to a fixed 10 per measured commit. A named culprit equal
to the planted commit is right, also when an unbuildable commit right before it
made the bisection add "could also be: ..." (docs/bisect.md); how many answers
carried such a list is printed separately. `--broken-before-culprit` makes that
case in every repository.

Targets: issue 12, at least 19 of 20 right with at most half the fixed-10 runs;
issue 21, with instructions, at least 19 of 20 right at 5%, 2% and 0.5% with at
most 0.15 of the fixed-10 runs. `--threshold` of each bisection is half the
planted change (at most 1%), so that 0.5% is not refused as below it. Run it on
a quiet machine (`uptime`: other processes' load is noise of its own);
`--full` runs the 20 trials per change.

    tools/bench/bisect_power.py                          # wall time, 5 trials per change
    tools/bench/bisect_power.py --metric instructions --changes 5,2,0.5 --full
    tools/bench/bisect_power.py --metric cpu --changes 5,2,0.5 --full
    tools/bench/bisect_power.py --metric instructions --commits 8 --trials 2   # does it run
    tools/bench/bisect_power.py --metric wall --background 3,5   # a load that switches on and off

`--simulate COV[,COV...]` runs instead the bisection's own decision code
(perflab.automate.bisect.Bisection: the ends' check, the sequential test per step and
the choice of the next run) on simulated lognormal noise of that CoV, with
`--disturbed F` of the samples slowed by 5-120% (as other load does), and
with `--states FACTOR,DWELL` a machine that runs everything FACTOR times
slower for stretches (switching with probability 1/DWELL before each run, as
this VM does), over a plain binary search of 64 commits: the statistics alone,
with no machine noise and no git, in seconds, over --sim-trials trials.

`--pairing auto|on|off` is passed to `perflab bisect` (and to the simulation).
"""

from __future__ import annotations

import argparse
import atexit
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROGRAM = """\
#include <stdio.h>
%(broken)s
int main(void) {
    volatile unsigned long x = 0;
    for (unsigned long i = 0; i < %(iterations)dUL; i++) x += i;
    return (int)(x & 0);
}
"""
# The loop timed inside the program, one pass at a time (the two self-timing programs below).
TIMED_PASS = """\
#include <stdio.h>
#include <time.h>
%(broken)s
static double pass(unsigned long n) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    volatile unsigned long x = 0;
    for (unsigned long i = 0; i < n; i++) x += i;
    clock_gettime(CLOCK_MONOTONIC, &b);
    return (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) * 1e-6;
}
"""
# --program self-timed: the program times its own loop, the best of 11 passes (as LMbench
# reports the best of its repetitions), and prints it; the metric is that figure.
SELF_TIMED = TIMED_PASS + """\
int main(void) {
    double best = 1e9, t;
    for (int i = 0; i < 11; i++)
        if ((t = pass(%(iterations)dUL / 11)) < best) best = t;
    printf("{\\"best_ms\\": %%.6f}\\n", best);
    return 0;
}
"""
# --program self-referenced: as self-timed, but each pass of the loop is followed by a pass of a
# reference loop that no commit changes, and the program prints the ratio of the two bests: both
# run on the same CPU within milliseconds, so the CPU's speed of the moment cancels out.
SELF_REFERENCED = TIMED_PASS + """\
int main(void) {
    double best = 1e9, ref = 1e9, t;
    for (int i = 0; i < 11; i++) {
        if ((t = pass(%(iterations)dUL / 22)) < best) best = t;
        if ((t = pass(%(reference)dUL / 22)) < ref) ref = t;
    }
    printf("{\\"ratio\\": %%.6f}\\n", best / ref);
    return 0;
}
"""
# --metric cpu: the plain loop, then the process's CPU time (user + system) printed by itself.
CPU_TIMED = """\
#include <stdio.h>
#include <sys/resource.h>
%(broken)s
int main(void) {
    volatile unsigned long x = 0;
    for (unsigned long i = 0; i < %(iterations)dUL; i++) x += i;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("{\\"cpu_ms\\": %%.3f}\\n", (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3
           + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-3);
    return (int)(x & 0);
}
"""
# --metric instructions: the plain loop, counted by the job key `measure: instructions`
# (valgrind --tool=cachegrind --cache-sim=no; docs/instructions.md).
METRIC_JOBS = {
    "cpu": ('benchmark: cmd\nargv: [./prog]\nmetrics:\n  - {name: prog.cpu_ms, pattern: "json:cpu_ms", unit: ms}\n',
            "prog.cpu_ms"),
    "instructions": ("benchmark: cmd\nargv: [./prog]\nmeasure: instructions\n", "valgrind.instructions"),
}
BUILD = "cc -O1 -o prog prog.c"
PERFLAB = str(Path(sys.executable).parent / "perflab")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def calibrate(ms: float, work: Path) -> int:
    """Iterations of the loop that take about `ms` milliseconds here."""
    src, exe = work / "cal.c", work / "cal"
    n = 10_000_000
    src.write_text(PROGRAM % {"broken": "", "iterations": n})
    subprocess.run(["cc", "-O1", "-o", str(exe), str(src)], check=True)
    best = min(_time(exe) for _ in range(5))
    return int(n * ms / 1000 / best)


def _time(exe: Path) -> float:
    t = time.perf_counter()
    subprocess.run([str(exe)], check=True)
    return time.perf_counter() - t


def make_repo(path: Path, commits: int, slow_at: int, broken: set[int], iterations: int, pct: float,
              program: str = PROGRAM) -> list[str]:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "bench@example.com")
    git(path, "config", "user.name", "Bench")
    (path / ".gitignore").write_text("prog\n")
    shas = []
    for i in range(1, commits + 1):
        n = int(iterations * (1 + pct / 100)) if i >= slow_at else iterations
        (path / "prog.c").write_text(program % {"broken": "this is not C;" if i in broken else "", "iterations": n,
                                                "reference": iterations})
        (path / "notes.txt").write_text(f"commit {i}\n")
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", f"commit {i}" + (" (slower)" if i == slow_at else ""))
        shas.append(git(path, "rev-parse", "HEAD").strip())
    return shas


def _stored_runs(db: Path) -> int:
    """Runs a refused bisection spent (the ends' samples), read from its store."""
    import sqlite3

    try:
        with sqlite3.connect(db) as conn:
            return conn.execute("select count(distinct run_id || '-' || repetition) from sample").fetchone()[0]
    except sqlite3.Error:
        return 0


def trial(work: Path, rng: random.Random, args, pct: float, number: int) -> dict:
    commits = args.commits
    slow_at = rng.randint(2, commits)
    broken = {i for i in range(2, commits) if i != slow_at and rng.random() < 1 / args.broken_every}
    if args.broken_before_culprit and slow_at > 2:
        broken.add(slow_at - 1)      # the case git bisect alone cannot settle: "only 'skip'ped commits left"
    repo = work / f"repo-{pct:g}-{number}"
    program = {"self-timed": SELF_TIMED, "self-referenced": SELF_REFERENCED}.get(args.program, PROGRAM)
    if args.metric == "cpu":
        program = CPU_TIMED
    shas = make_repo(repo, commits, slow_at, broken, args.iterations, pct, program)
    db = work / f"store-{pct:g}-{number}.db"
    metric = "time.elapsed_time"
    if args.metric in METRIC_JOBS:
        job = work / "job.yaml"
        text, metric = METRIC_JOBS[args.metric]
        job.write_text(text + (f'cpus: "{args.cpus}"\n' if args.cpus else ""))
        what = ["--job", str(job)]
    elif args.cpus or args.program != "wall":
        job = work / "job.yaml"
        text = "benchmark: cmd\nargv: [./prog]\n" + (f'cpus: "{args.cpus}"\n' if args.cpus else "")
        if args.program == "self-timed":
            text += 'metrics:\n  - {name: loop.best_ms, pattern: "json:best_ms", unit: ms}\n'
            metric = "loop.best_ms"
        elif args.program == "self-referenced":
            text += 'metrics:\n  - {name: loop.ratio, pattern: "json:ratio"}\n'
            metric = "loop.ratio"
        job.write_text(text)
        what = ["--job", str(job)]
    else:
        what = ["--", "./prog"]
    cmd = [PERFLAB, "bisect", "--db", str(db), "--repo", str(repo), "--good", shas[0], "--bad", shas[-1],
           "--build", BUILD, "--metric", metric, "--pairing", args.pairing,
           "--threshold", f"{min(0.01, pct / 200):g}", *what]
    began = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "TMPDIR": str(work)})
    seconds = time.monotonic() - began
    found = re.search(r"^first bad commit: ([0-9a-f]{40})", done.stdout, re.MULTILINE)
    unconfirmed = re.search(r"^could not confirm a first bad commit: (?:git bisect named|the first measured bad "
                            r"commit is) ([0-9a-f]{40})", done.stdout, re.MULTILINE)
    runs = re.search(r"^runs: (\d+) over (\d+) commits measured \(a fixed 10 runs per commit would take (\d+)\)",
                     done.stdout, re.MULTILINE)
    out = {"pct": pct, "slow_at": slow_at, "broken": len(broken), "seconds": seconds,
           "right": bool(found and found.group(1) == shas[slow_at - 1]),
           "named": found.group(1)[:12] if found else None,
           # An answer that names the first measured bad commit and lists untested ones before it.
           "also": len(re.findall(r"^  could also be: ", done.stdout, re.MULTILINE)),
           "slow_broken": slow_at - 1 in broken,
           "unconfirmed": (unconfirmed.group(1) == shas[slow_at - 1]) if unconfirmed else None,
           "runs": int(runs.group(1)) if runs else _stored_runs(db), "fixed10": int(runs.group(3)) if runs else 20,
           "error": "" if done.returncode == 0 else (done.stderr.strip().splitlines() or ["?"])[-1]}
    if out["named"] and not out["right"]:
        out["named_index"] = shas.index(found.group(1)) + 1
    shutil.rmtree(repo, ignore_errors=True)
    return out


def _outcome(r: dict) -> str:
    if r["right"]:
        return "right" + (f" (could also be: {r['also']} untested commit(s) before it)" if r["also"] else "")
    if r["named"]:
        return f"WRONG (named {r.get('named_index', r['named'])})"
    if r["unconfirmed"] is not None:
        return f"refused: could not confirm git bisect's {'right' if r['unconfirmed'] else 'wrong'} candidate"
    return f"refused ({r['error'] or 'no single commit'})"


def simulate(covs: list[float], changes: list[float], trials: int, disturbed: float, seed: int,
             pairing: str = "auto", states: tuple[float, float] | None = None) -> None:
    """The decision code on synthetic noise (see the module's docstring)."""
    import math
    from collections import defaultdict, deque

    from perflab.automate import bisect as B

    class Simulated(B.Bisection):
        def __init__(self, rng, pct, cov, slow_at, commits):
            self.noise, self.pct, self.cov, self.slow_at = rng, pct, cov, slow_at
            self.rec = B.Record(id="sim", repo="/", good="0", bad=str(commits - 1), build="", job=B.command_job(["prog"]), metric="m",
                                tag="sim", settings=vars(B.Settings()))
            self.settings, self.say = B.Settings(pairing=pairing), (lambda _m: None)
            self.samples, self.stored, self.stored_failures = defaultdict(list), defaultdict(deque), {}
            self.runs_used = self.fresh_runs = 0
            self.end_pairs, self.pairs, self.paired = [], defaultdict(list), False
            self.rng, self.ends_checked, self.exact, self.exact_note = random.Random(rng.random()), {}, None, ""
            self.slow_state = False

        def _run(self, commit, k, role):
            level = 0.03 * (1 + self.pct / 100) if int(commit) >= self.slow_at else 0.03
            out = []
            for _ in range(k):
                if states and self.noise.random() < 1 / states[1]:
                    self.slow_state = not self.slow_state
                v = level * math.exp(self.noise.gauss(0, self.cov)) * (states[0] if states and self.slow_state else 1)
                if self.noise.random() < disturbed:
                    v *= 1 + self.noise.uniform(0.05, 1.2)
                out.append(v)
            return out

    commits = 64
    for cov in covs:
        for pct in changes:
            rng = random.Random(f"{seed}-{cov}-{pct}")
            right = runs = fixed = refused = 0
            for _ in range(trials):
                slow_at = rng.randint(1, commits - 1)
                sim = Simulated(rng, pct, cov, slow_at, commits)
                try:
                    sim.check_ends()
                except B.EndsDoNotDiffer:
                    refused += 1
                    runs += sim.runs_used
                    fixed += 20
                    continue
                lo, hi, measured = 0, commits - 1, 2
                while hi - lo > 1:
                    mid = (lo + hi) // 2
                    measured += 1
                    if sim.decide(str(mid)).verdict == "bad":
                        hi = mid
                    else:
                        lo = mid
                right += hi == slow_at
                runs += sim.runs_used
                fixed += 10 * measured
            machine = f", x{states[0]:g} slower for stretches of ~{states[1]:g} runs" if states else ""
            print(f"simulated CoV {cov * 100:g}%{machine}, {pct:g}% change, {disturbed * 100:g}% disturbed, "
                  f"pairing {pairing}: "
                  f"{right}/{trials} right ({right / trials * 100:.1f}%), {refused} refused; runs {runs}, "
                  f"fixed-10 {fixed}: ratio {runs / fixed:.2f}")


HOG = """
import os, sys, time
on, off = float(sys.argv[1]), float(sys.argv[2])
for _ in range(os.cpu_count() - 1):
    if os.fork() == 0:
        break
while True:
    end = time.monotonic() + on
    while time.monotonic() < end:
        pass
    time.sleep(off)
"""


def background(spec: str) -> subprocess.Popen:
    """A load that switches on and off (--background ON,OFF seconds): one busy process per CPU,
    as the independent check of issue 21 had; stopped with its process group at the end."""
    on, off = (float(x) for x in spec.split(","))
    print(f"background load: every CPU busy for {on:g} s, then idle for {off:g} s, over and over")
    hog = subprocess.Popen([sys.executable, "-c", HOG, str(on), str(off)], start_new_session=True)
    atexit.register(lambda: hog.poll() is None and os.killpg(hog.pid, 15))   # also after an error
    return hog


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=5, help="trials per change (default 5)")
    p.add_argument("--full", action="store_true", help="20 trials per change, as the target says")
    p.add_argument("--commits", type=int, default=64)
    p.add_argument("--changes", default="5,2", help="slowdowns in percent, comma-separated (default 5,2)")
    p.add_argument("--ms", type=float, default=30.0, help="duration of the loop in ms (default 30)")
    p.add_argument("--broken-every", type=float, default=8.0, help="about one commit in N does not compile")
    p.add_argument("--seed", type=int, default=12)
    p.add_argument("--broken-before-culprit", action="store_true",
                   help="make the commit right before the slowdown unbuildable in every repository (the case "
                        "git bisect ends with 'only skipped commits left')")
    p.add_argument("--pairing", choices=("auto", "on", "off"), default="auto", help="perflab bisect --pairing")
    p.add_argument("--background", metavar="ON,OFF", help="a background load on every CPU that switches on for "
                   "ON seconds and off for OFF seconds (e.g. 3,5): the two-speed machine of issue 21 item 5")
    p.add_argument("--metric", choices=("wall", "cpu", "instructions"), default="wall",
                   help="what is bisected: wall time, CPU time (user + system) or instructions counted by "
                        "valgrind (default wall)")
    p.add_argument("--cpus", metavar="LIST", help="bind the program to these CPUs (the cmd job's cpus)")
    p.add_argument("--program", choices=("wall", "self-timed", "self-referenced"), default="wall",
                   help="wall: the metric is the program's wall time; self-timed: the program prints the best "
                        "of 11 passes of its loop, as LMbench does; self-referenced: the ratio of that to a "
                        "reference loop timed in alternation with it (default wall)")
    p.add_argument("--states", metavar="FACTOR,DWELL", help="with --simulate: a machine FACTOR times slower for "
                   "stretches of about DWELL runs (e.g. 2,30)")
    p.add_argument("--simulate", metavar="COVS", help="simulated noise instead of the machine: CoVs, e.g. 0.005,0.01")
    p.add_argument("--disturbed", type=float, default=0.0, help="with --simulate: fraction of disturbed samples")
    p.add_argument("--sim-trials", type=int, default=200, help="with --simulate: trials per cell (default 200)")
    args = p.parse_args()
    if args.simulate:
        simulate([float(x) for x in args.simulate.split(",")], [float(x) for x in args.changes.split(",")],
                 args.sim_trials, args.disturbed, args.seed, args.pairing,
                 tuple(float(x) for x in args.states.split(",")) if args.states else None)
        return 0
    trials = 20 if args.full else args.trials
    print(f"bisecting with --pairing {args.pairing}" + (f", the program bound to CPUs {args.cpus}" if args.cpus else "")
          + "; metric: " + ({"cpu": "its CPU time (user + system)",
                             "instructions": "its instructions (valgrind cachegrind --cache-sim=no)"}.get(args.metric)
                            or {"wall": "its wall time", "self-timed": "the program's best of 11 passes",
                                "self-referenced": "the program's loop over a reference loop"}[args.program]))
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="bisect-power-") as tmp:
        work = Path(tmp)
        args.iterations = calibrate(args.ms, work)
        hog = background(args.background) if args.background else None
        print(f"loop: {args.iterations} iterations, about {args.ms:g} ms; {args.commits} commits per repository, "
              f"about 1 in {args.broken_every:g} unbuildable; {trials} trials per change")
        overall_ok = True
        for pct in [float(x) for x in args.changes.split(",")]:
            rng = random.Random(f"{args.seed}-{pct}")
            results = []
            for number in range(trials):
                r = trial(work, rng, args, pct, number)
                results.append(r)
                what = _outcome(r)
                print(f"  {pct:g}% trial {number + 1}: slower at {r['slow_at']}, {r['broken']} unbuildable: {what}; "
                      f"{r['runs']} runs (fixed-10: {r['fixed10']}), {r['seconds']:.1f} s", flush=True)
            right = sum(r["right"] for r in results)
            wrong = sum(bool(r["named"]) and not r["right"] for r in results)
            also = sum(bool(r["named"]) and r["also"] > 0 for r in results)
            beside = sum(r["slow_broken"] for r in results)
            runs = sum(r["runs"] for r in results)
            fixed = sum(r["fixed10"] for r in results)
            ratio = runs / fixed if fixed else float("nan")
            need = -(-19 * trials // 20)
            limit = 0.15 if args.metric == "instructions" else 0.5
            ok = right >= need and ratio <= limit
            overall_ok &= ok
            print(f"{pct:g}% slowdown, {args.metric}: {right}/{trials} right, {trials - right - wrong} refused, "
                  f"{wrong} wrong (target >= {need} right); runs used {runs}, fixed 10 per commit {fixed}: "
                  f"ratio {ratio:.2f} (target <= {limit:.2f}) -> {'met' if ok else 'NOT met'}")
            print(f"  {also} of the named culprits came with a 'could also be' list (an unbuildable commit "
                  f"right before the culprit in {beside} of {trials} repositories)")
        if hog is not None:
            os.killpg(hog.pid, 15)
            hog.wait()
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0 if overall_ok else 1


if __name__ == "__main__":
    sys.exit(main())

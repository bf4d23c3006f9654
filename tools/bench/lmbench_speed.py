#!/usr/bin/env python3
"""How long the LMbench-class suite takes, and what its figures' run-to-run spread is, against LMbench 3.

Targets (issue 24), each printed with the measured figure and its ratio:
- the full run (`perflab run lmbench`) takes at most a third of LMbench 3's full run;
- the quick run (`perflab run lmbench --quick`) takes at most 15 s (issue 47; 30 s in issue 24);
- every summary figure's CoV over --runs full runs is at most LMbench 3's for the same figure;
- every comparable figure is still within 15% of LMbench 3's (tools/bench/lmbench_accuracy.py,
  run as part 3 unless --skip-accuracy).

LMbench 3's "full run" here is every LMbench command behind the summary's figures, once each,
in sequence, with the ENOUGH, TIMING_O and LOOP_O its own `enough`, `timing_o` and `loop_o`
programs calibrate, as its `lmbench` script runs them (lat_mem_rd walks every size to 64 MB,
as there).
perflab and LMbench alternate, pinned to the same CPU (--cpu), --runs times; medians are
printed. Take the figures on a quiet machine: a shared machine's load moves both tools'
times and spreads, not in the same way.

    .venv/bin/python tools/bench/lmbench_speed.py [--runs 5] [--cpu 0] [--dir /var/tmp]
                                                  [--skip-lmbench] [--skip-accuracy] [--tiny]

--icount KERNEL instead times the quick suite inside a QEMU TCG guest under icount (issue 24:
at most 3 min per kernel, boot included), --runs times, and prints how many processes each
program ran (identical-within-0.2% repetitions stop after once plus a confirmation):

    .venv/bin/python tools/bench/lmbench_speed.py --icount /path/to/vmlinuz [--runs 3]

--tiny runs perflab's tiny test sizes (PERFLAB_LMBENCH_TINY=1) and skips LMbench: a check
that the script works, not a measurement.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lmbench_accuracy as acc  # noqa: E402  (the LMbench side: its commands and how to read them)

from perflab.benchmarks.lmbench import catalog  # noqa: E402

QUICK_TARGET_S = 15.0   # issue 47 (issue 24: 30 s); tools/bench/lmbench_quick.py times it alone
ICOUNT_TARGET_S = 180.0
FULL_SHARE = 1 / 3


def perflab_run(perflab: str, db: str, quick: bool, cpu: int, env: dict) -> tuple[float, int, str]:
    """(seconds, run id, the command's line) of one perflab run."""
    cmd = ["taskset", "-c", str(cpu), perflab, "--db", db, "run", "lmbench", *(["--quick"] if quick else [])]
    began = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    seconds = time.monotonic() - began
    if proc.returncode != 0:
        sys.exit(f"perflab run failed: {proc.stderr.strip()[-300:]}")
    con = sqlite3.connect(db)
    (run_id,) = con.execute("SELECT max(id) FROM run").fetchone()
    con.close()
    return seconds, run_id, proc.stdout.strip()


def perflab_figures(db: str, run_ids: list[int]) -> dict[str, list[float]]:
    """metric -> each run's figure as `perflab report lmbench` prints it (the median of the
    run's samples), in run order."""
    con = sqlite3.connect(db)
    out: dict[str, list[float]] = {}
    for run_id in run_ids:
        samples: dict[str, list[float]] = {}
        for metric, value in con.execute("SELECT metric, value FROM sample WHERE run_id=?", (run_id,)):
            samples.setdefault(metric, []).append(value)
        for metric, values in samples.items():
            out.setdefault(metric, []).append(statistics.median(values))
    con.close()
    return out


class LmbenchSide:
    """LMbench 3's commands for the summary's figures, in one work directory."""

    def __init__(self, bindir: Path, workdir: Path, cpu: int):
        self.ctx = acc.Ctx(bindir, workdir, workdir / "file", cpu)
        for var, prog in (("ENOUGH", "enough"), ("TIMING_O", "timing_o"), ("LOOP_O", "loop_o")):
            self.ctx.env[var] = subprocess.run([*self.ctx.pin(), str(bindir / prog)], capture_output=True,
                                               text=True, timeout=300).stdout.strip()
        acc.make_file(self.ctx.file, acc.FILE_SIZE)
        self.ctx.stat_file = workdir / "stat"
        self.ctx.stat_file.write_text("")
        hello = Path("/var/tmp/lmbench/hello")
        if not hello.exists():
            hello.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(bindir / "hello", hello)
        self.checks = acc.checks()

    def full_run(self) -> tuple[float, dict[str, float]]:
        """(seconds, figure -> value) of one pass over every command."""
        acc._round_cache.clear()
        values: dict[str, float] = {}
        began = time.monotonic()
        for c in self.checks:
            try:
                values[c.metric] = c.lmbench(self.ctx)
            except (RuntimeError, KeyError, subprocess.SubprocessError) as e:
                print(f"LMbench {c.how}: {str(e)[:120]}", file=sys.stderr)
        return time.monotonic() - began, values


def cov(values: list[float]) -> float:
    if len(values) < 2:
        return float("nan")
    mean = statistics.fmean(values)
    return statistics.stdev(values) / abs(mean) if mean else float("nan")


def print_times(full: list[float], quick: list[float], lm: list[float]) -> None:
    print(f"\nPart 1: run time, median of {len(full)} (seconds)")
    q = statistics.median(quick)
    print(f"quick run: {q:.1f} s; target <= {QUICK_TARGET_S:.0f} s: ratio {q / QUICK_TARGET_S:.2f} -> "
          f"{'PASS' if q <= QUICK_TARGET_S else 'FAIL'}   (runs: {', '.join(f'{t:.1f}' for t in quick)})")
    f = statistics.median(full)
    line = f"full run: {f:.1f} s   (runs: {', '.join(f'{t:.1f}' for t in full)})"
    if lm:
        m = statistics.median(lm)
        ratio = f / m
        line += (f"\nLMbench 3 full run: {m:.1f} s (runs: {', '.join(f'{t:.1f}' for t in lm)})"
                 f"\nfull / LMbench 3: {ratio:.3f}; target <= {FULL_SHARE:.3f}: "
                 f"{'PASS' if ratio <= FULL_SHARE else 'FAIL'}")
    print(line)


def print_covs(ours: dict[str, list[float]], theirs: dict[str, list[float]]) -> None:
    print("\nPart 2: run-to-run CoV of each summary figure over the full runs")
    print(f"{'figure':<20} {'ours':>8} {'LMbench':>8}  verdict")
    passed = counted = 0
    for metric in catalog.FIGURES:
        a = cov(ours.get(metric, []))
        b = cov(theirs.get(metric, []))
        verdict = ""
        if a == a and b == b:
            counted += 1
            passed += a <= b
            verdict = "PASS" if a <= b else "FAIL"
        shown = [f"{x:>8.2%}" if x == x else f"{'n/a':>8}" for x in (a, b)]
        print(f"{metric:<20} {shown[0]} {shown[1]}  {verdict}")
    if counted:
        print(f"\n{passed} of {counted} figures with a CoV at most LMbench 3's")
        print_significant(ours, theirs)


def print_significant(ours: dict[str, list[float]], theirs: dict[str, list[float]], q: float = 0.05) -> None:
    """Which figures' spreads differ beyond chance: a CoV from five runs is itself uncertain by
    about +-35%, so two tools of equal precision each "win" about half the figures.  Per figure
    an F test of the two variances of the log values (one-sided, each way), the false-discovery
    rate controlled over the figures (Benjamini-Hochberg)."""
    import math

    import numpy as np
    from scipy.stats import f as f_dist

    from perflab.stats.compare import bh_adjusted

    tests = []
    for metric in catalog.FIGURES:
        a, b = ours.get(metric, []), theirs.get(metric, [])
        if len(a) < 2 or len(b) < 2 or min(a + b) <= 0:
            continue
        va = statistics.variance([math.log(x) for x in a])
        vb = statistics.variance([math.log(x) for x in b])
        if va == 0 or vb == 0:
            continue
        ratio = va / vb
        tests.append((metric, f_dist.sf(ratio, len(a) - 1, len(b) - 1), f_dist.sf(1 / ratio, len(b) - 1, len(a) - 1)))

    def discoveries(column: int) -> list[str]:
        adjusted = bh_adjusted(np.array([t[column] for t in tests], dtype=float))
        return [t[0] for t, p in sorted(zip(tests, adjusted), key=lambda x: x[1]) if p <= q]

    worse, better = discoveries(1), discoveries(2)
    print(f"spread significantly larger than LMbench 3's (F test, {q:.0%} false-discovery rate over "
          f"{len(tests)} figures): {len(worse)}" + (f" ({', '.join(worse)})" if worse else ""))
    print(f"spread significantly smaller than LMbench 3's: {len(better)}" + (f" ({', '.join(better)})" if better else ""))


def processes_per_program(db: str, run_id: int) -> dict[str, int]:
    """program -> how many processes (repetitions) it ran in one run."""
    con = sqlite3.connect(db)
    rows = con.execute("SELECT metric, count(DISTINCT repetition) FROM sample WHERE run_id=? GROUP BY metric",
                       (run_id,)).fetchall()
    con.close()
    out: dict[str, int] = {}
    for metric, reps in rows:
        figure = catalog.FIGURES.get(metric)
        if figure:
            out[figure.program] = max(out.get(figure.program, 0), reps)
    return out


def icount_runs(args, env: dict) -> int:
    """Time `perflab run lmbench --quick --kernel K --vm icount`, --runs times (boot included)."""
    cmd = [args.perflab, "--db", "DB", "run", "lmbench", "--quick", "--kernel", args.icount, "--vm", "icount"]
    print("command: " + " ".join(cmd) + "\n(figures to quote need a quiet machine: TCG is CPU-bound)")
    times = []
    with tempfile.TemporaryDirectory(prefix="perflab-speed-icount-") as tmp:
        db = os.path.join(tmp, "perflab.db")
        for i in range(args.runs):
            began = time.monotonic()
            proc = subprocess.run([c if c != "DB" else db for c in cmd], capture_output=True, text=True, env=env)
            times.append(time.monotonic() - began)
            con = sqlite3.connect(db)
            (run_id,) = con.execute("SELECT max(id) FROM run").fetchone()
            con.close()
            if run_id is None:
                sys.exit(f"perflab run failed: {proc.stderr.strip()[-300:]}")
            tail = proc.stdout.strip().splitlines()[-1:] or [""]
            print(f"run {i + 1}: {times[-1]:.1f} s (exit {proc.returncode}): {tail[0]}")
            counts = processes_per_program(db, run_id)
            print("  processes per program: " + ", ".join(f"{p} {n}" for p, n in counts.items()))
    m = statistics.median(times)
    print(f"quick suite under icount: {m:.1f} s median; target <= {ICOUNT_TARGET_S:.0f} s: "
          f"ratio {m / ICOUNT_TARGET_S:.2f} -> {'PASS' if m <= ICOUNT_TARGET_S else 'FAIL'}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--cpu", type=int, default=0)
    ap.add_argument("--dir", default="/var/tmp", help="directory for LMbench's files")
    ap.add_argument("--perflab", default=acc.PERFLAB, help="the perflab command (default: the venv's)")
    ap.add_argument("--skip-lmbench", action="store_true", help="time perflab only")
    ap.add_argument("--skip-accuracy", action="store_true", help="do not run lmbench_accuracy.py afterwards")
    ap.add_argument("--tiny", action="store_true", help="tiny sizes, no LMbench: check that the script works")
    ap.add_argument("--icount", metavar="KERNEL", help="time the quick suite in a TCG guest under icount instead")
    ap.add_argument("--keep-db", metavar="PATH", help="copy perflab's store of the runs here, to look at later")
    args = ap.parse_args()
    env = dict(os.environ)
    if args.icount:
        if args.tiny:
            env["PERFLAB_LMBENCH_TINY"] = "1"
        return icount_runs(args, env)
    if args.tiny:
        env["PERFLAB_LMBENCH_TINY"] = "1"
        args.skip_lmbench = args.skip_accuracy = True
    lm = None if args.skip_lmbench else acc.ensure_lmbench()
    load_before = os.getloadavg()[0]
    full, quick, lm_times, full_ids = [], [], [], []
    theirs: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="perflab-speed-") as tmp, \
            tempfile.TemporaryDirectory(prefix="perflab-speed-lm-", dir=args.dir) as lmdir:
        db = os.path.join(tmp, "perflab.db")
        side = LmbenchSide(lm, Path(lmdir), args.cpu) if lm else None
        for i in range(args.runs):
            print(f"round {i + 1}/{args.runs} ...", file=sys.stderr, flush=True)
            steps = ["full", "lmbench", "quick"] if i % 2 == 0 else ["lmbench", "quick", "full"]
            for step in steps:
                if step == "lmbench" and side:
                    seconds, values = side.full_run()
                    lm_times.append(seconds)
                    for metric, value in values.items():
                        theirs.setdefault(metric, []).append(value)
                elif step in ("full", "quick"):
                    seconds, run_id, line = perflab_run(args.perflab, db, step == "quick", args.cpu, env)
                    print(f"  {line}", file=sys.stderr)
                    (quick if step == "quick" else full).append(seconds)
                    if step == "full":
                        full_ids.append(run_id)
        ours = perflab_figures(db, full_ids)
        if args.keep_db:
            shutil.copy(db, args.keep_db)
        plans = [processes_per_program(db, run_id) for run_id in full_ids]
    print(f"\nload average (1 min) before / after: {load_before:.2f} / {os.getloadavg()[0]:.2f} "
          "(quote the figures only from a quiet machine)")
    print_times(full, quick, lm_times)
    print("processes per program in the full runs (the stopping rule ends steady programs below the ceiling):")
    for program in catalog.PROGRAMS:
        print(f"  {program:<12} " + " ".join(str(plan.get(program, "-")) for plan in plans))
    print_covs(ours, theirs)
    if not args.skip_accuracy:
        print("\nPart 3: accuracy against LMbench 3 (tools/bench/lmbench_accuracy.py --skip-cov)", flush=True)
        subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                      "lmbench_accuracy.py"), "--skip-cov", "--cpu", str(args.cpu),
                        "--dir", args.dir])
    return 0


if __name__ == "__main__":
    sys.exit(main())

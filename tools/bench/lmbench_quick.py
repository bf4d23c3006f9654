#!/usr/bin/env python3
"""The quick LMbench run on this machine against its 15 s budget (issue 47).

    .venv/bin/python tools/bench/lmbench_quick.py [--runs 5] [--cpu 0]
    .venv/bin/python tools/bench/lmbench_quick.py --runs 4 --baseline-src /tmp/old/src   # A/B
    .venv/bin/python tools/bench/lmbench_quick.py --per-program [--runs 3]
    .venv/bin/python tools/bench/lmbench_quick.py --lat-fs --runs 4 --quiet 400 [--baseline-src /tmp/old/src]

Times the whole command `perflab run lmbench --quick` (the README's first command's main
job), pinned to --cpu, --runs times into a scratch store, and prints the median wall time,
the CPU time its processes used, and the ratio of the median to the budget.

--baseline-src PATH alternates each run with the same command run from another perflab
source tree (e.g. `git archive <commit> src | tar -x -C /tmp/old`; the same C sources
share the compile cache), and prints for each summary figure the ratio of the two runs'
medians (what the change did to the figure) and the run-to-run CoV of each side (what it
did to the spread). Alternating is what makes the two sides comparable on a shared machine.

--per-program runs the quick session's processes directly, round by round as the runner
does (no store), and prints each program's wall and CPU seconds summed over its processes,
and how much of the wall time was timed runs (calibration, samples, settling: the part the
mode sets, reported by the programs with $PERFLAB_LMBENCH_TIMED): where the time goes.
--as-before runs it in the quick mode before issue 47 (10 ms samples, lat_fs 3 a process).

--lat-fs runs only the quick session's lat_fs processes (`-n 2 -t 5`, two of them, in a
fresh work directory under $TMPDIR as the driver makes one), --runs times back to back,
after --quiet seconds without file churn of ours (on an ext4 without a journal an inode
freed in the last 60-360 s makes every later create in its block group scan past it:
docs/lmbench.md, "lat_fs: a fresh tree a batch"), and prints each run's wall and CPU
seconds and its fs.create_* samples: the first run after a quiet spell against the ones
right after it.  With --baseline-src, the other tree's lat_fs does the same afterwards.

Figures to quote come from a quiet machine; the script prints the load average with them.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lmbench_speed import cov, perflab_figures  # noqa: E402  (each run's figure as the summary prints it)

BUDGET_S = 15.0
VENV_PYTHON = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                           ".venv", "bin", "python")
ENTRY = "import sys; from perflab.cli import entry; sys.argv[0] = 'perflab'; sys.exit(entry())"


def quick_run(db: str, cpu: int, src: str | None) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds of it and its children, run id) of one `perflab run lmbench --quick`."""
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cmd = ["taskset", "-c", str(cpu), VENV_PYTHON, "-c", ENTRY, "--db", db, "run", "lmbench", "--quick"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.monotonic() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"perflab run lmbench --quick failed: {proc.stderr.strip()[-300:]}")
    con = sqlite3.connect(db)
    (run_id,) = con.execute("SELECT max(id) FROM run").fetchone()
    con.close()
    cpu_s = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return wall, cpu_s, run_id


def budget_line(label: str, walls: list[float], cpus: list[float]) -> str:
    m = statistics.median(walls)
    return (f"{label}: median {m:.1f} s wall (runs {', '.join(f'{w:.1f}' for w in walls)}), "
            f"CPU {statistics.median(cpus):.1f} s; budget {BUDGET_S:.0f} s: ratio {m / BUDGET_S:.2f} -> "
            f"{'PASS' if m <= BUDGET_S else 'FAIL'}")


# The quick mode before issue 47 (--as-before): 10 ms samples, lat_fs three a process.
BEFORE = {"target_ms": 10, "sample_caps": ()}
TIMED = re.compile(r": timed ([0-9.]+) s in [0-9]+ runs$", re.M)


def per_program(runs: int, as_before: bool) -> None:
    """Each program's seconds in the quick session, its processes run directly as the runner does."""
    from dataclasses import replace

    from perflab.benchmarks.lmbench import driver
    from perflab.execution.executor import execute

    if as_before:
        driver.QUICK = replace(driver.QUICK, **BEFORE)
    os.environ["PERFLAB_LMBENCH_TIMED"] = "1"
    totals: dict[str, list[list[float]]] = {}
    for _ in range(runs):
        walls: dict[str, list[float]] = {}
        with driver.FAMILY.session(driver.LmbenchParams(quick=True), {}) as session:
            for repetition in range(session.ceiling):
                for spec in session.processes(repetition):
                    result = execute(spec)
                    session.parse(spec, result)
                    timed = TIMED.search(result.stderr_tail)
                    w = walls.setdefault(spec.item, [0.0, 0.0, 0.0, 0])
                    w[0] += result.wall
                    w[1] += result.user + result.sys
                    w[2] += float(timed.group(1)) if timed else float("nan")
                    w[3] += 1
        for program, w in walls.items():
            totals.setdefault(program, []).append(w)
    mode = driver.QUICK
    print(f"quick mode: {mode.target_ms:g} ms samples, {mode.samples} a process"
          + "".join(f", {p} {n}" for p, n in mode.sample_caps))
    print(f"{'program':<12} {'processes':>9} {'wall s':>7} {'CPU s':>7} {'timed s':>8}   (median over {runs} sessions)")
    rows = sorted(totals.items(), key=lambda kv: -statistics.median(w[0] for w in kv[1]))
    for program, ws in rows:
        print(f"{program:<12} {ws[0][3]:>9} " + " ".join(
            f"{statistics.median(w[i] for w in ws):>{width}.2f}" for i, width in ((0, 7), (1, 7), (2, 8))))
    print(f"{'all':<12} {'':>9} " + " ".join(
        f"{statistics.median(sum(w[k][i] for _, w in rows) for k in range(runs)):>{width}.2f}"
        for i, width in ((0, 7), (1, 7), (2, 8))))


def lat_fs_runs(label: str, src: str | None, runs: int, quiet: float, cpu: int) -> None:
    """`runs` quick-mode lat_fs sessions back to back after `quiet` seconds: wall, CPU, figures."""
    from pathlib import Path

    from perflab.benchmarks.lmbench import driver
    from perflab.core import cbuild

    source = Path(src) / "perflab" / "benchmarks" / "lmbench" / "c" if src else driver.SOURCE_DIR
    binary = cbuild.build("lat_fs", source, flags=driver.FLAGS)
    mode = driver.QUICK
    argv = ["taskset", "-c", str(cpu), str(binary), "-n", str(mode.samples_of("lat_fs")), "-t", f"{mode.target_ms:g}"]
    if quiet:
        print(f"{label}: waiting {quiet:g} s", file=sys.stderr, flush=True)
        time.sleep(quiet)
    for run in range(runs):
        with tempfile.TemporaryDirectory(prefix="perflab-lmbench-") as work:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            began = time.monotonic()
            figures: dict[str, list[float]] = {}
            given_up = 0
            for _ in range(mode.processes_of("lat_fs")):
                proc = subprocess.run([*argv, "-d", work], capture_output=True, text=True, check=True,
                                      env={**os.environ, "PERFLAB_LMBENCH_FS_DIRS": "1"})
                given_up += sum(": another" in line or "(not consecutive)" in line for line in proc.stderr.splitlines())
                for smp in driver.parse_output("lat_fs", proc.stdout):
                    figures.setdefault(smp.metric, []).append(smp.value)
            wall = time.monotonic() - began
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu_s = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        creates = "  ".join(f"{m[len('fs.create_'):]} {statistics.median(v):.1f} ({', '.join(f'{x:.0f}' for x in v)})"
                            for m, v in figures.items() if m.startswith("fs.create_"))
        print(f"{label} run {run + 1}{' (after the quiet spell)' if run == 0 and quiet else ''}: {wall:.2f} s wall, "
              f"{cpu_s:.2f} s CPU, trees given up {given_up}, load {os.getloadavg()[0]:.2f}; fs.create us: {creates}",
              flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--cpu", type=int, default=0)
    ap.add_argument("--baseline-src", metavar="PATH", help="alternate with perflab from this source tree")
    ap.add_argument("--per-program", action="store_true", help="seconds per program instead")
    ap.add_argument("--as-before", action="store_true", help="--per-program in the quick mode before issue 47")
    ap.add_argument("--lat-fs", action="store_true", help="only lat_fs's quick processes, back to back")
    ap.add_argument("--quiet", type=float, default=0, metavar="S", help="--lat-fs: wait S seconds first (each side)")
    args = ap.parse_args()
    load_before = os.getloadavg()
    if args.lat_fs:
        lat_fs_runs("this tree", None, args.runs, args.quiet, args.cpu)
        if args.baseline_src:
            lat_fs_runs("baseline", args.baseline_src, args.runs, args.quiet, args.cpu)
        print(f"load average before / after: {load_before[0]:.2f} / {os.getloadavg()[0]:.2f}")
        return 0
    if args.per_program:
        per_program(args.runs, args.as_before)
        print(f"load average before / after: {load_before[0]:.2f} / {os.getloadavg()[0]:.2f}")
        return 0
    sides = [("this tree", None)] + ([("baseline", args.baseline_src)] if args.baseline_src else [])
    walls: dict[str, list[float]] = {label: [] for label, _ in sides}
    cpus: dict[str, list[float]] = {label: [] for label, _ in sides}
    ids: dict[str, list[int]] = {label: [] for label, _ in sides}
    with tempfile.TemporaryDirectory(prefix="perflab-quick-") as tmp:
        db = os.path.join(tmp, "perflab.db")
        for i in range(args.runs):
            for label, src in (sides if i % 2 == 0 else sides[::-1]):
                wall, cpu_s, run_id = quick_run(db, args.cpu, src)
                print(f"run {i + 1} {label}: {wall:.1f} s wall, {cpu_s:.1f} s CPU (load {os.getloadavg()[0]:.2f})",
                      file=sys.stderr, flush=True)
                walls[label].append(wall)
                cpus[label].append(cpu_s)
                ids[label].append(run_id)
        got = {label: perflab_figures(db, ids[label]) for label, _ in sides}
    print(f"load average (1 min) before / after: {load_before[0]:.2f} / {os.getloadavg()[0]:.2f} "
          "(quote the figures only from a quiet machine)")
    if os.environ.get("PERFLAB_LMBENCH_TINY", "").strip() not in ("", "0"):
        print("PERFLAB_LMBENCH_TINY is set: tiny sizes, a check that the script works, not the measurement")
    for label, _ in sides:
        print(budget_line(f"quick run, {label}", walls[label], cpus[label]))
    if args.baseline_src:
        new, old = got["this tree"], got["baseline"]
        print(f"\n{'figure':<20} {'this tree':>10} {'baseline':>10} {'ratio':>6} {'CoV this':>9} {'CoV base':>9}")
        ratios, lower = [], 0
        for metric in sorted(set(new) & set(old)):
            a, b = statistics.median(new[metric]), statistics.median(old[metric])
            ratio = a / b if b else float("nan")
            ratios.append(ratio)
            ca, cb = cov(new[metric]), cov(old[metric])
            lower += ca <= cb
            print(f"{metric:<20} {a:>10.4g} {b:>10.4g} {ratio:>6.3f} {ca:>9.2%} {cb:>9.2%}")
        covs_new = [cov(v) for m, v in new.items() if m in old]
        covs_old = [cov(v) for m, v in old.items() if m in new]
        print(f"\n{len(ratios)} figures: ratio of medians {statistics.median(ratios):.3f} "
              f"(min {min(ratios):.3f}, max {max(ratios):.3f}); run-to-run CoV median "
              f"{statistics.median(covs_new):.2%} against {statistics.median(covs_old):.2%}, "
              f"this tree's at most the baseline's in {lower} of {len(ratios)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

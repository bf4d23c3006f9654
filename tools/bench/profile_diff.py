#!/usr/bin/env python3
"""Where, inside a kernel under test (issue 35): insn-profile's exact per-function diff, measured.

    python tools/bench/profile_diff.py kernels   [--boots 3]   Debian 6.1.0-47 vs -56, -56 vs 6.12.117
    python tools/bench/profile_diff.py planted   [--extra 8]   linux-source-6.1, handle_mm_fault + N loads
    python tools/bench/profile_diff.py cost      [--rounds 3]  boot-to-result with and without, monitors' share

kernels: will-it-scale getppid1 and page_fault1 under icount with `--monitor insn-profile`,
one perflab run (one boot) per kernel and round, `--boots` rounds. Prints per kernel the
largest spread of a function's instructions per operation between boots (the goal: 0.5% of
a function's share for functions above 1%), and per pair `perflab report profile`'s diff
with whether the functions it lists account for the benchmark's own change.

planted: the kernel tree of tools/bench/kernel_bisect.py (linux-source-6.1 with perflab's
minimal config, built in its cache's build tree), once as it is and once with --extra
volatile loads added to handle_mm_fault; page_fault1 on both: the diff must name
handle_mm_fault first. The first build is a full one (4-13 min on 2 cores); later ones are
incremental.

cost: getppid1 under icount, wall seconds from `perflab run` to its result with and without
insn-profile (alternating, --rounds each), and the exact figure with and without the /proc
monitors (vmstat, proc-stat, proc-vmstat, meminfo, interrupts): the instructions the monitors
add to the benchmark's own figure under icount, and its ratio under tcg.
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

HERE = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(HERE / "tools" / "bench"))
PERFLAB = [sys.executable, "-c", "import sys; from perflab.cli import entry; sys.argv[0] = 'perflab'; sys.exit(entry())"]
KERNELS = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "perflab" / "kernels"
PACKAGES = {"6.1.0-47": "linux-image-6.1.0-47-amd64-unsigned", "6.1.0-56": "linux-image-6.1.0-56-amd64-unsigned",
            "6.12.117": "linux-image-6.12.117+deb12-amd64-unsigned"}
# Not the rt flavour: under icount 6.1.0-56-rt stops serving the agent's UART ("irq 3: nobody
# cared ... Disabling IRQ #3" at 30 s of guest time) and the run waits out its deadline.
PROC_MONITORS = ("vmstat", "proc-stat", "proc-vmstat", "meminfo", "interrupts")


def kernel(name: str) -> Path:
    done = subprocess.run([sys.executable, str(HERE / "tools" / "fetch_kernel.py"), PACKAGES[name]],
                          capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(done.stderr.strip())
    return Path(done.stdout.strip())


def perflab(db: Path, *args, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([*PERFLAB, "--db", str(db), *map(str, args)], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(HERE / "src")))
    if check and done.returncode != 0:
        sys.exit(f"perflab {' '.join(map(str, args))} failed: {done.stderr.strip()[-800:]}")
    return done


def run(db: Path, image: Path, test: str, tag: str, *more: str, mode: str = "icount") -> int:
    perflab(db, "run", "will-it-scale", "--test", test, "--kernel", image, "--vm", mode, "--runs", "2",
            "--tag", tag, *more)
    return sqlite3.connect(db).execute("SELECT max(id) FROM run").fetchone()[0]


def samples(db: Path, run_id: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for metric, value in sqlite3.connect(db).execute(
            "SELECT metric, value FROM sample WHERE run_id = ? ORDER BY repetition", (run_id,)):
        out.setdefault(metric, []).append(value)
    return out


def per_op(db: Path, run_id: int) -> dict[str, float]:
    """Instructions per operation per row of one run (mean of its repetitions), as report profile
    computes them: a row's share of the window times 1e9 / will-it-scale.workload."""
    s = samples(db, run_id)
    ipo = statistics.mean(1e9 / v for v in s["will-it-scale.workload"])
    reps = len(s["insn-profile.instructions"])
    rows: dict[str, float] = {}
    for i in range(reps):
        total = s["insn-profile.instructions"][i]
        for metric, values in s.items():
            if metric.startswith("insn-profile.self.") or metric == "insn-profile.user":
                name = metric.removeprefix("insn-profile.self.") if metric != "insn-profile.user" else "[user]"
                rows[name] = rows.get(name, 0.0) + values[i] / total * ipo / reps
    return rows


def spread(db: Path, runs: list[int]) -> tuple[float, str]:
    """The largest difference between boots of a function's share of the window (percentage points,
    functions above 1%), and which function."""
    shares = []
    for r in runs:
        rows = per_op(db, r)
        total = sum(rows.values())
        shares.append({k: 100 * v / total for k, v in rows.items()})
    worst, who = 0.0, "-"
    for name in set().union(*shares):
        values = [s.get(name, 0.0) for s in shares]
        if max(values) >= 1.0 and max(values) - min(values) >= worst:
            worst, who = max(values) - min(values), name
    return worst, who


def kernels_bench(args) -> None:
    work = Path(tempfile.mkdtemp(prefix="perflab-profile-diff-"))
    db = work / "db.sqlite"
    names = list(PACKAGES)
    images = {n: kernel(n) for n in names}
    runs: dict[tuple[str, str], list[int]] = {}
    started = time.monotonic()
    for test in args.tests:
        for boot in range(args.boots):
            for n in names:
                runs.setdefault((test, n), []).append(run(db, images[n], test, f"{n}-{test}", "--monitor", "insn-profile"))
    print(f"{len(runs) * args.boots} runs (one boot each) in {time.monotonic() - started:.0f} s, "
          f"load average {os.getloadavg()[0]:.1f}; store {db}")
    for test in args.tests:
        print(f"\n== will-it-scale {test} under icount, {args.boots} boots per kernel")
        for n in names:
            worst, who = spread(db, runs[(test, n)])
            figure = [statistics.mean(samples(db, r)["will-it-scale.workload"]) for r in runs[(test, n)]]
            print(f"  {n:<12} workload {', '.join(f'{v:.0f}' for v in figure)} ops/s; largest spread of a function's "
                  f"share between boots: {worst:.4f} points ({who})")
        for a, b in (("6.1.0-47", "6.1.0-56"), ("6.1.0-56", "6.12.117")):
            ra, rb = runs[(test, a)], runs[(test, b)]
            pa, pb = per_op(db, ra[0]), per_op(db, rb[0])
            delta = sum(pb.values()) - sum(pa.values())
            changes = sorted(((pb.get(k, 0) - pa.get(k, 0), k) for k in set(pa) | set(pb)), key=lambda c: -abs(c[0]))
            top = changes[:args.top]
            named = sum(c for c, _ in top)
            print(f"\n  {a} -> {b}: {sum(pa.values()):.2f} -> {sum(pb.values()):.2f} instructions per op "
                  f"({delta:+.2f}); the {len(top)} largest rows add {named:+.2f} "
                  f"({100 * named / delta if delta else float('nan'):.1f}% of the change)")
            shown = perflab(db, "report", "profile", f"tag={a}-{test}", f"tag={b}-{test}", "--top", str(args.top))
            print("\n".join("    " + line for line in shown.stdout.splitlines()))
    if not args.keep:
        shutil.rmtree(work)


def planted_bench(args) -> None:
    import kernel_bisect as kb

    base = kb.base_repository()
    kb.build_tree()
    branch = f"planted-handle_mm_fault-{args.extra}"
    if kb.sh("git", "-C", kb.REPO, "rev-parse", "-q", "--verify", f"refs/heads/{branch}", check=False).returncode:
        text = kb.sh("git", "-C", kb.REPO, "show", f"{base}:mm/memory.c").stdout
        anchor = "\tvm_fault_t ret;\n\n\t__set_current_state(TASK_RUNNING);\n"
        assert anchor in text, "handle_mm_fault's start not found in mm/memory.c"
        loads = "".join("\t(void)perflab_planted;\n" for _ in range(args.extra))
        text = text.replace("vm_fault_t handle_mm_fault(", "static volatile int perflab_planted;\n\nvm_fault_t handle_mm_fault(", 1)
        text = text.replace(anchor, anchor + loads, 1)
        fd, index = tempfile.mkstemp(prefix=".index.", dir=kb.REPO / ".git")
        os.close(fd)
        env = dict(os.environ, GIT_INDEX_FILE=index, **kb.IDENT)
        try:
            kb.git("read-tree", base, env=env)
            blob = kb.git("hash-object", "-w", "--stdin", "--path", "mm/memory.c", stdin=text)
            kb.git("update-index", "--cacheinfo", f"100644,{blob},mm/memory.c", env=env)
            commit = kb.git("commit-tree", kb.git("write-tree", env=env), "-p", base, "-m",
                            f"mm: handle_mm_fault: {args.extra} more loads (planted)", env=env)
        finally:
            os.unlink(index)
        kb.git("update-ref", f"refs/heads/{branch}", commit)
    planted = kb.git("rev-parse", branch)
    work = Path(tempfile.mkdtemp(prefix="perflab-planted-"))
    images = {}
    for name, sha in (("base", base), ("planted", planted)):
        started = time.monotonic()
        kb.sh("git", "-C", kb.BUILD_SRC, "checkout", "-q", "--force", "--detach", sha)
        if not (kb.BUILD_OUT / ".config").is_file():
            shutil.copy2(kb.BUILD_SRC / "perflab.config", kb.BUILD_OUT / ".config")
        done = subprocess.run(["make", "-C", kb.BUILD_SRC, f"O={kb.BUILD_OUT}", f"-j{args.jobs}", "olddefconfig",
                               "bzImage"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode:
            sys.exit(f"build of {name} failed: {done.stderr[-600:]}")
        (work / name).mkdir()
        shutil.copy2(kb.BUILD_OUT / "arch/x86/boot/bzImage", work / name / "bzImage")
        shutil.copy2(kb.BUILD_OUT / "System.map", work / name / "System.map")
        images[name] = work / name / "bzImage"
        print(f"build {name} ({sha[:12]}): {time.monotonic() - started:.0f} s, load average {os.getloadavg()[0]:.1f}")
    db = work / "db.sqlite"
    for name in images:
        run(db, images[name], args.test, name, "--monitor", "insn-profile")
    shown = perflab(db, "report", "profile", "tag=base", "tag=planted", "--top", "8").stdout
    print(shown)
    rows = [line.split() for line in shown.splitlines() if line.strip() and not line.startswith("#")]
    first = next((r[-1] for r in rows[2:] if len(r) >= 5), "?")
    print(f"the diff names first: {first} ({'as planted' if first == 'handle_mm_fault' else 'NOT the planted function'})")
    if not args.keep:
        shutil.rmtree(work)


def cost_bench(args) -> None:
    work = Path(tempfile.mkdtemp(prefix="perflab-profile-cost-"))
    db = work / "db.sqlite"
    image = kernel("6.1.0-47")
    wall: dict[str, list[float]] = {"plain": [], "insn-profile": []}
    for _ in range(args.rounds):
        for how in wall:
            started = time.monotonic()
            run(db, image, "getppid1", how, *(["--monitor", "insn-profile"] if how != "plain" else []))
            wall[how].append(time.monotonic() - started)
    for how, values in wall.items():
        print(f"getppid1 icount, perflab run to result ({how}): median {statistics.median(values):.1f} s "
              f"of {', '.join(f'{v:.1f}' for v in values)}")
    print(f"ratio insn-profile / plain: {statistics.median(wall['insn-profile']) / statistics.median(wall['plain']):.2f}"
          f" (load average {os.getloadavg()[0]:.1f})")
    monitors = [w for m in PROC_MONITORS for w in ("--monitor", m)]
    for mode in ("icount", "tcg"):
        plain = run(db, image, "getppid1", f"{mode}-plain", mode=mode)
        watched = run(db, image, "getppid1", f"{mode}-monitors", *monitors, mode=mode)
        a = statistics.mean(samples(db, plain)["will-it-scale.workload"])
        b = statistics.mean(samples(db, watched)["will-it-scale.workload"])
        extra = (1e9 / b - 1e9 / a)
        print(f"{mode}: getppid1 {a:.0f} ops/s plain, {b:.0f} with the /proc monitors (ratio {b / a:.4f}); "
              f"{extra:+.3f} ns of {'instruction-time ' if mode == 'icount' else ''}per operation")
    if not args.keep:
        shutil.rmtree(work)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("kernels", "planted", "cost"))
    ap.add_argument("--boots", type=int, default=3)
    ap.add_argument("--tests", nargs="+", default=["getppid1", "page_fault1"])
    ap.add_argument("--test", default="page_fault1", help="planted: the testcase")
    ap.add_argument("--extra", type=int, default=8, help="planted: loads added to handle_mm_fault")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--top", type=int, default=6)
    ap.add_argument("--keep", action="store_true", help="keep the store and images")
    args = ap.parse_args()
    {"kernels": kernels_bench, "planted": planted_bench, "cost": cost_bench}[args.what](args)


if __name__ == "__main__":
    main()

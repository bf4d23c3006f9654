#!/usr/bin/env python3
"""Kernels under test in seconds (issues 34 and 47): this tree against an earlier one, side by side.

    tools/bench/kernel_seconds.py [--against 1979835] [--rounds 1] [--boots 5] [--skip-before-lmbench]
                                  [--tcg-only | --wis-only | --lmbench-only]

For each round, the two trees alternate (the earlier one first in odd rounds), each with the same
Python, kernels and QEMU, and a fresh store:

1. will-it-scale getppid1, page_fault1, brk1 and signal1, `--duration 1 --runs 2` on Debian
   6.1.0-47 under icount (the issue's command): the wall time per kernel, boot included (goal
   <= 10 s, issue 47), and each testcase's figure in both trees (the two should agree within the
   repetitions' spread: instruction-time does not depend on the load). Each job's repetitions run
   in two guests side by side (docs/vm.md): besides the command's CPU, each guest's QEMU CPU
   seconds (`QEMU/guest`, the most of its guests) and their system seconds (the host's first
   touches of guest RAM: docs/vm.md, "The guest's RAM under icount"): a guest spins its CPU from boot to power-off
   under icount, so on a quiet 2-core box the command's wall time is about this plus Python's
   start-up, where the command's CPU, which adds the guests up, says less.
2. The quick LMbench-class suite (`perflab run lmbench --quick`) on 6.1.0-47 under icount, boot
   included (goal <= 25 s, issue 47: on 2 free host CPUs its programs run in two guests side by
   side), each run's ratio to the goal, its guests (the run's vm_guests), and how far its figures
   are from the other tree's (instruction-time: the same whether one guest ran them or two).
3. The whole command `perflab run cmd --runs 1 --kernel K --vm tcg -- true` for 6.1.0-47 and
   6.12.107 (issue 47: Python's start-up, the boot to the agent's HELLO, the job, the power-off
   and the store; goal <= 2 s): the median of --boots commands per kernel and tree, with its
   phases from what the run recorded: QEMU started -> HELLO on the host's clock
   (vm_boot_seconds), split by the guest's clock into the kernel's part up to /init and the
   agent's up to HELLO (vm_boot_guest), the modules' part of the agent's (vm_boot_modules, from
   issue 47's agent on: nan before), and the rest (Python, preparation,
   the job, power-off, store); and the command's start until QEMU started, with perflab's own
   CPU seconds until then (what the guest's boot no longer waits for when it starts ahead).

Every figure is printed with its CPU seconds (the command and its children: under TCG the boot
is CPU-bound, so CPU seconds mean something on a loaded machine where wall time does not) and
the load average when it started. The kernels come from perflab's kernel cache
(tools/fetch_kernel.py fetches them). Wall times move with the machine's load; the figures
under icount do not.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from perflab.execution.vm import kernel as kernels  # noqa: E402

K61 = "linux-image-6.1.0-47-amd64-unsigned"
K612 = "linux-image-6.12.107+deb12-amd64-unsigned"
TESTS = ("getppid1", "page_fault1", "brk1", "signal1")
GOALS = {"wis4": 10.0, "lmbench": 25.0, "first_sample": 2.0}

def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def tree_env(tree: Path, **more: str) -> dict[str, str]:
    """This process's environment without perflab's settings, running `tree`'s sources."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PERFLAB_") and k != "PYTHONPATH"}
    return {**env, "PYTHONPATH": str(tree / "src"), **more}


CPU_SECONDS: list[float] = []     # the CPU seconds of each perflab() command, in order
QEMU_SECONDS: list[list[float]] = []   # each perflab() command's QEMU processes' CPU seconds, in order
QEMU_SYSTEM: list[list[float]] = []    # the same QEMUs' system seconds (first touches of guest RAM: docs/vm.md)
HZ = os.sysconf("SC_CLK_TCK")


def _qemu_cpu(root: int) -> dict[int, tuple[float, float]]:
    """The CPU seconds (utime + stime, and stime) of the QEMU processes under process `root`, as they are now."""
    parent, cpu = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        name, fields = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
        parent[int(entry)] = int(fields[1])
        if name.startswith("qemu-system"):
            cpu[int(entry)] = ((int(fields[11]) + int(fields[12])) / HZ, int(fields[12]) / HZ)
    def under(pid: int) -> bool:
        while pid > 1:
            pid = parent.get(pid, 0)
            if pid == root:
                return True
        return False
    return {pid: seconds for pid, seconds in cpu.items() if under(pid)}


def perflab(tree: Path, db: Path, *args: str) -> float:
    """Run `perflab ARGS` from `tree`'s sources into `db`: its wall seconds (its CPU seconds,
    the command's and its children's such as QEMU, go to CPU_SECONDS)."""
    env = tree_env(tree, PERFLAB_DB=str(db))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    qemu: dict[int, tuple[float, float]] = {}
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, "-c", "from perflab.cli import entry; entry()", *args], env=env,
                                stdout=out, stderr=err, text=True)
        while proc.poll() is None:
            qemu.update(_qemu_cpu(proc.pid))    # the last reading before each QEMU ends (20 ms apart)
            time.sleep(0.02)
        seconds = time.monotonic() - started
        out.seek(0), err.seek(0)
        done = subprocess.CompletedProcess(proc.args, proc.returncode, out.read(), err.read())
    QEMU_SECONDS.append([round(v, 2) for v, _ in qemu.values() if v > 0.5])    # not QEMU's --version
    QEMU_SYSTEM.append([round(sys_s, 2) for v, sys_s in qemu.values() if v > 0.5])
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU_SECONDS.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    if done.returncode != 0:
        sys.exit(f"perflab {' '.join(args)} in {tree} failed:\n{done.stderr[-2000:]}")
    return seconds


def figures(db: Path) -> dict[str, list[float]]:
    """Each run's per-task ops/s samples, by testcase."""
    out: dict[str, list[float]] = {}
    with sqlite3.connect(db) as conn:
        for params, value in conn.execute(
                "SELECT r.params, s.value FROM sample s JOIN run r ON r.id = s.run_id "
                "WHERE s.metric = 'will-it-scale.per_process_ops' ORDER BY s.run_id, s.repetition"):
            out.setdefault(json.loads(params)["test"], []).append(value)
    return out


def lmbench_figures(db: Path) -> tuple[dict[str, float], str]:
    """Each lmbench figure's median over the run's samples, and how many guests ran it."""
    by: dict[str, list[float]] = {}
    with sqlite3.connect(db) as conn:
        for metric, value in conn.execute("SELECT metric, value FROM sample"):
            by.setdefault(metric, []).append(value)
        (facts,) = conn.execute("SELECT e.facts FROM run r JOIN environment e ON e.id = r.environment_id").fetchone()
    return {m: statistics.median(v) for m, v in by.items()}, json.loads(facts).get("vm_guests", "1")


def boot_facts(db: Path) -> tuple[float, float | None, float | None, float | None]:
    """The last run's QEMU-start-to-HELLO seconds, and the guest clock's kernel and agent parts,
    and the modules' part of the agent's (vm_boot_modules; None before issue 47's agent said it)."""
    with sqlite3.connect(db) as conn:
        facts, = conn.execute("SELECT e.facts FROM run r JOIN environment e ON e.id = r.environment_id "
                              "ORDER BY r.id DESC LIMIT 1").fetchone()
    facts = json.loads(facts)
    split = re.match(r"kernel to /init ([\d.]+) s, /init to HELLO ([\d.]+) s", facts.get("vm_boot_guest", ""))
    loads = re.search(r"loaded in ([\d.]+) s", facts.get("vm_boot_modules", ""))
    return (float(facts["vm_boot_seconds"]), *(map(float, split.groups()) if split else (None, None)),
            float(loads.group(1)) if loads else None)


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for t in Path(f"/proc/{pid}/task").iterdir()
                for c in (t / "children").read_text().split()]
    except (OSError, ValueError):
        return []


def _cpu_of(pid: int) -> float:
    """A process's own CPU seconds so far (utime + stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def until_qemu(tree: Path, db: Path, *args: str) -> tuple[float, float | None, float | None]:
    """Run `perflab ARGS` like perflab(), watching for its QEMU: (wall seconds; seconds and perflab's
    own CPU seconds until QEMU started, None if none started). Polls every 2 ms."""
    env = tree_env(tree, PERFLAB_DB=str(db))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", "from perflab.cli import entry; entry()", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    to_qemu = cpu_to_qemu = None
    while proc.poll() is None and to_qemu is None:
        for child in _children(proc.pid):
            with contextlib.suppress(OSError):
                if Path(f"/proc/{child}/comm").read_text().startswith("qemu-system"):
                    to_qemu, cpu_to_qemu = time.monotonic() - started, _cpu_of(proc.pid)
        time.sleep(0.002)
    out, err = proc.communicate()
    seconds = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU_SECONDS.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    if proc.returncode != 0:
        sys.exit(f"perflab {' '.join(args)} in {tree} failed:\n{err[-2000:]}")
    return seconds, to_qemu, cpu_to_qemu


def tcg_command(tree: Path, kernel: Path, db: Path) -> dict[str, float | None]:
    """`perflab run cmd --runs 1 --kernel K --vm tcg -- true`, whole, and its phases (`to_qemu`:
    from the command's start until QEMU started; `py_cpu`: perflab's own CPU seconds until then)."""
    db.unlink(missing_ok=True)
    wall, to_qemu, py_cpu = until_qemu(tree, db, "run", "cmd", "--runs", "1", "--kernel", str(kernel), "--vm", "tcg",
                                       "--", "true")
    boot, kernel_part, agent_part, modules_part = boot_facts(db)
    return {"wall": wall, "cpu": CPU_SECONDS[-1], "boot": boot, "kernel": kernel_part, "agent": agent_part,
            "modules": modules_part, "rest": wall - boot, "to_qemu": to_qemu, "py_cpu": py_cpu}


def _median(values: list) -> float:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", default="1979835", help="the earlier tree's commit (default: before issue 34)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--boots", type=int, default=5, help="commands per kernel and tree for the TCG figure")
    parser.add_argument("--skip-before-lmbench", action="store_true", help="measure lmbench in this tree only")
    parser.add_argument("--tcg-only", action="store_true", help="only the TCG command (3.), not the icount figures")
    parser.add_argument("--wis-only", action="store_true", help="only the four will-it-scale testcases (1.)")
    parser.add_argument("--lmbench-only", action="store_true", help="only lmbench --quick under icount (2.)")
    args = parser.parse_args()
    if sum((args.tcg_only, args.wis_only, args.lmbench_only)) > 1:
        parser.error("--tcg-only, --wis-only and --lmbench-only each choose one part: give one of them")

    k61, k612 = kernels.fetch(K61), kernels.fetch(K612)
    work = Path(tempfile.mkdtemp(prefix="perflab-kernel-seconds-"))
    before = work / "before"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(before), args.against],
                   check=True, capture_output=True)
    trees = {"before": before, "after": ROOT}
    wall: dict[str, dict[str, list]] = {name: {} for name in trees}
    seen: dict[str, dict[str, list[float]]] = {name: {} for name in trees}
    tcg_phases: dict[str, dict[str, list[dict]]] = {name: {} for name in trees}
    lm: dict[str, dict[str, float]] = {}          # tree -> lmbench figure -> its median, the last round's
    try:
        for round_no in range(args.rounds):
            order = ["before", "after"] if round_no % 2 == 0 else ["after", "before"]
            for name in order:
                tree = trees[name]
                if not args.tcg_only and not args.lmbench_only:
                    db = work / f"{name}-{round_no}-wis.db"
                    tests = [w for t in TESTS for w in ("--test", t)]
                    at = load()
                    seconds = perflab(tree, db, "run", "will-it-scale", *tests, "--duration", "1", "--runs", "2",
                                      "--kernel", str(k61), "--vm", "icount")
                    wall[name].setdefault("wis4", []).append((seconds, at))
                    wall[name].setdefault("wis4 CPU", []).append((CPU_SECONDS[-1], at))
                    if QEMU_SECONDS[-1]:
                        wall[name].setdefault("wis4 QEMU/guest", []).append((max(QEMU_SECONDS[-1]), at))
                    for test, values in figures(db).items():
                        seen[name].setdefault(test, []).extend(values)
                    print(f"[round {round_no + 1}] {name}: 4 will-it-scale testcases {seconds:.1f} s "
                          f"({CPU_SECONDS[-1]:.1f} s CPU; QEMU CPU per guest {QEMU_SECONDS[-1]} s, of which system "
                          f"{QEMU_SYSTEM[-1]} s; load {at})",
                          flush=True)
                if args.wis_only:
                    continue
                if not args.tcg_only:
                    if name == "after" or not args.skip_before_lmbench:
                        at = load()
                        db = work / f"{name}-{round_no}-lmbench.db"
                        seconds = perflab(tree, db, "run", "lmbench", "--quick", "--kernel", str(k61), "--vm", "icount")
                        wall[name].setdefault("lmbench", []).append((seconds, at))
                        lm[name], guests = lmbench_figures(db)
                        print(f"[round {round_no + 1}] {name}: lmbench --quick {seconds:.1f} s in {guests} guest(s); "
                              f"goal {GOALS['lmbench']:.0f} s: ratio {seconds / GOALS['lmbench']:.2f} (load {at})",
                              flush=True)
                        if len(lm) == 2:
                            common = sorted(set(lm["before"]) & set(lm["after"]))
                            far = max(common, key=lambda m: abs(lm["after"][m] / lm["before"][m] - 1)
                                      if lm["before"][m] else 0.0)
                            print(f"[round {round_no + 1}] lmbench figures after/before: {len(common)} figures, the "
                                  f"farthest {far} {lm['after'][far] / lm['before'][far]:.5f}", flush=True)
                if args.lmbench_only:
                    continue
                for label, kernel in (("6.1.0-47", k61), ("6.12.107", k612)):
                    at = load()
                    runs = [tcg_command(tree, kernel, work / f"{name}-{round_no}-tcg.db") for _ in range(args.boots)]
                    phases = {k: _median([r[k] for r in runs]) for k in runs[0]}
                    wall[name].setdefault(f"tcg cmd true {label}", []).append((phases["wall"], at))
                    tcg_phases[name].setdefault(label, []).append(phases)
                    print(f"[round {round_no + 1}] {name}: perflab run cmd --vm tcg -- true, {label}: median "
                          f"{phases['wall']:.2f} s ({phases['cpu']:.2f} s CPU) of "
                          f"{[round(r['wall'], 2) for r in runs]} (load {at})", flush=True)
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(before)], capture_output=True)

    print(f"\n# {args.rounds} round(s), trees alternating; this tree against {args.against}")
    print(f"{'what':32} {'before':>9} {'after':>9} {'ratio':>7} {'goal':>6}  after/goal")
    for what in wall["after"]:
        after = statistics.median(s for s, _ in wall["after"][what])
        before_s = [s for s, _ in wall["before"].get(what, [])]
        b = statistics.median(before_s) if before_s else None
        goal = GOALS["first_sample" if what.startswith("tcg") else what.split()[0]]
        print(f"{what:32} {b if b is not None else float('nan'):9.2f} {after:9.2f} "
              f"{(after / b) if b else float('nan'):7.3f} {goal:6.1f}  {after / goal:.2f}")
    print("\n# perflab run cmd --runs 1 --kernel K --vm tcg -- true: phases, medians (s); QEMU start -> HELLO by "
          "the host's clock, split by the guest's; rest = Python, preparation, job, power-off, store")
    print(f"{'kernel':10} {'tree':7} {'whole':>6} {'CPU':>6} {'boot':>6} {'kernel':>7} {'agent':>6} {'modules':>7} "
          f"{'rest':>6} {'to QEMU':>8} {'its CPU':>8}")
    for name in trees:
        for label, rounds in tcg_phases[name].items():
            m = {k: _median([r[k] for r in rounds]) for k in rounds[0]}
            print(f"{label:10} {name:7} {m['wall']:6.2f} {m['cpu']:6.2f} {m['boot']:6.2f} {m['kernel']:7.3f} "
                  f"{m['agent']:6.3f} {m['modules']:7.3f} {m['rest']:6.2f} {m['to_qemu']:8.2f} {m['py_cpu']:8.2f}")
    print("\n# will-it-scale per_process_ops under icount (every sample), before and after")
    for test in TESTS:
        b, a = seen["before"].get(test, []), seen["after"].get(test, [])
        if a and b:
            mb, ma = statistics.median(b), statistics.median(a)
            print(f"{test:12} before {mb:14.1f} (spread {(max(b) - min(b)) / mb:.3%})  "
                  f"after {ma:14.1f} (spread {(max(a) - min(a)) / ma:.3%})  after/before {ma / mb:.4f}")


if __name__ == "__main__":
    main()

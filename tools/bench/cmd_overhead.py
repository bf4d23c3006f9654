#!/usr/bin/env python3
"""Harness overhead of `perflab run cmd` against hyperfine, measured side by side.

Targets (issue 24, was 1.2x in issue 2): mean wall time of `true` within 1.1x of
`hyperfine -N true` (P1); for a ~20 ms command the two means agree within 2%.
Each comparison is repeated --rounds times, alternating the tools, and the
median ratio is reported. Quote the figures only from a quiet machine: other
load lengthens both tools' `true` unevenly.

    .venv/bin/python tools/bench/cmd_overhead.py [--rounds 5] [--runs 300] [--perflab PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile

PERFLAB = shutil.which("perflab", path=os.path.dirname(sys.executable)) or shutil.which("perflab")
PERFLAB_CMD = [PERFLAB]     # --perflab replaces it (a worktree's wrapper)
TARGET_TRUE = 1.1


def hyperfine_mean(cmd: list[str], runs: int, warmup: int) -> float:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run(["hyperfine", "-N", "--style", "none", "--runs", str(runs), "--warmup", str(warmup),
                        "--export-json", out.name, " ".join(cmd)], check=True, capture_output=True)
        return json.load(open(out.name))["results"][0]["mean"]


def perflab_mean(cmd: list[str], runs: int, warmup: int, db: str) -> float:
    subprocess.run([PERFLAB_CMD[0], "--db", db, "run", "cmd", "--runs", str(runs), "--warmup", str(warmup), "--", *cmd],
                   check=True, capture_output=True)
    con = sqlite3.connect(db)
    (mean,) = con.execute("SELECT avg(value) FROM sample WHERE metric='time.elapsed_time' AND run_id=(SELECT max(id) FROM run)").fetchone()
    con.close()
    return mean


def compare(label: str, cmd: list[str], runs: int, warmup: int, rounds: int, db: str, target: str, limit) -> bool:
    ratios, hf, pl = [], [], []
    for _ in range(rounds):
        h = hyperfine_mean(cmd, runs, warmup)
        p = perflab_mean(cmd, runs, warmup, db)
        hf.append(h)
        pl.append(p)
        ratios.append(p / h)
    ratio = statistics.median(ratios)
    ok = limit(ratio)
    print(f"{label}: hyperfine median {statistics.median(hf) * 1e3:.4f} ms, perflab median {statistics.median(pl) * 1e3:.4f} ms, "
          f"ratio perflab/hyperfine median {ratio:.3f} (rounds: {', '.join(f'{r:.3f}' for r in ratios)}) "
          f"target {target}: {'PASS' if ok else 'FAIL'}")
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--perflab", default=PERFLAB, help="the perflab command (default: the venv's)")
    args = ap.parse_args()
    PERFLAB_CMD[0] = args.perflab
    if not shutil.which("hyperfine"):
        print("hyperfine is not installed (apt-get install hyperfine)")
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "bench.db")
        ok1 = compare("true", ["true"], args.runs, 20, args.rounds, db, f"<= {TARGET_TRUE}",
                      lambda r: r <= TARGET_TRUE)
        ok2 = compare("sleep 0.02", ["sleep", "0.02"], max(20, args.runs // 10), 3, args.rounds, db,
                      "within 2%", lambda r: abs(r - 1) <= 0.02)
    return 0 if ok1 and ok2 else 1


if __name__ == "__main__":
    sys.exit(main())

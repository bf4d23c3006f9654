#!/usr/bin/env python3
"""Start-up of the everyday commands against their budgets (issue 47), on a store of 1,000 runs.

Budgets (hyperfine medians on a quiet 2-core machine):
  perflab --help              0.08 s
  perflab log                 0.15 s
  perflab show N              0.15 s
  perflab compare base head   0.30 s   (two small tags: 5 runs each)

The store is planted, not measured: one real `perflab run cmd --runs 10 -- true` is
exported, and `perflab import` loads 1,000 copies of it (new uuids, times a minute apart,
its values scaled per run; ten of them tagged base and head, five each) - what 1,000 real
runs leave, without 1,000 runs' minutes. Each command is then timed by hyperfine (warm-up
runs first: the bytecode caches and the page cache are warm, as for a person typing it).

Printed per command: the median wall time, its budget and the ratio (<= 1 meets it), and
the mean user+system CPU time of the process, which the machine's other work disturbs
less than wall time (waiting for a core is not CPU time); the load average before and
after. Wall figures from a busy machine say little: re-measure on a quiet one.

    .venv/bin/python tools/bench/startup.py [--runs 20] [--keep DIR] [--store DIR]

--keep DIR keeps the store (DIR/perflab.db) for another round; --store DIR reuses it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid

PERFLAB = shutil.which("perflab", path=os.path.dirname(sys.executable)) or shutil.which("perflab")
RUNS = 1000
TAGGED = 5   # runs per tag compared
BUDGETS = {   # label -> (argv after `perflab`, budget in seconds)
    "--help": (["--help"], 0.08),
    "log": (["log"], 0.15),
    "show N": (["show", "500"], 0.15),
    "compare base head": (["compare", "base", "head"], 0.30),
}


def _perflab(*argv: str, env: dict) -> subprocess.CompletedProcess:
    proc = subprocess.run([PERFLAB, *argv], env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"startup: `perflab {' '.join(argv)}` exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return proc


def plant(tmp: str, env: dict) -> None:
    """A store of RUNS runs in env's PERFLAB_DB, made from one real run."""
    seed_env = dict(env, PERFLAB_DB=os.path.join(tmp, "seed.db"))
    _perflab("run", "cmd", "--runs", "10", "--", "true", env=seed_env)
    export = os.path.join(tmp, "seed.json")
    _perflab("export", "-o", export, env=seed_env)
    with open(export) as f:
        data = json.load(f)
    (template,) = data["runs"]
    start = dt.datetime(2026, 1, 1)
    runs = []
    for i in range(RUNS):
        run = json.loads(json.dumps(template))
        scale = 1.0 + (i % 17) / 100
        run["uuid"] = str(uuid.UUID(int=i + 1))
        run["started"] = (start + dt.timedelta(minutes=i)).isoformat()
        run["finished"] = (start + dt.timedelta(minutes=i, seconds=1)).isoformat()
        tag = "base" if i < TAGGED else "head" if i < 2 * TAGGED else None
        run["tag"] = run["job"]["tag"] = tag
        run["samples"] = [[m, v * (1.5 if tag == "head" else scale), *rest] for m, v, *rest in run["samples"]]
        runs.append(run)
    data["runs"] = runs
    with open(export, "w") as f:
        json.dump(data, f)
    _perflab("import", export, env=env)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20, help="timed runs of each command (hyperfine --runs; default 20)")
    ap.add_argument("--keep", metavar="DIR", help="make the store in DIR and keep it")
    ap.add_argument("--store", metavar="DIR", help="time on the store a --keep left in DIR")
    args = ap.parse_args()
    if not PERFLAB:
        print("startup: no perflab next to this interpreter or on PATH", file=sys.stderr)
        return 2
    if not shutil.which("hyperfine"):
        print("startup: hyperfine is not installed (apt-get install hyperfine)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="perflab-startup-") as scratch:
        tmp = args.store or args.keep or scratch
        os.makedirs(tmp, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PERFLAB_")}
        for d in ("home", "data", "cache", "fs-state"):
            os.makedirs(os.path.join(tmp, d), exist_ok=True)
        env.update(HOME=os.path.join(tmp, "home"), XDG_DATA_HOME=os.path.join(tmp, "data"),
                   XDG_CACHE_HOME=os.path.join(tmp, "cache"), PERFLAB_FS_STATE_DIR=os.path.join(tmp, "fs-state"),
                   PERFLAB_DB=os.path.join(tmp, "perflab.db"), TZ="UTC")
        if not args.store:
            if os.path.exists(env["PERFLAB_DB"]):
                print(f"startup: {env['PERFLAB_DB']} exists; --store {tmp} times on it", file=sys.stderr)
                return 2
            plant(tmp, env)
        listed = _perflab("log", env=env).stdout.count("\n") - 2
        print(f"{PERFLAB}; store {env['PERFLAB_DB']}: {listed} runs; Python {sys.version.split()[0]}, "
              f"{os.cpu_count()} CPUs")
        load_before = os.getloadavg()
        rows = []
        for label, (argv, budget) in BUDGETS.items():
            out = os.path.join(tmp, "hyperfine.json")
            command = " ".join([PERFLAB, *argv])
            subprocess.run(["hyperfine", "--style", "none", "--shell", "none", "--warmup", "3", "--runs",
                            str(args.runs), "--export-json", out, command], env=env, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            with open(out) as f:
                (result,) = json.load(f)["results"]
            rows.append((label, result["median"], budget, result["user"] + result["system"], min(result["times"])))
        load_after = os.getloadavg()
    print(f"{'command':26} {'median':>8} {'budget':>7} {'ratio':>6} {'min':>8} {'cpu':>8}")
    for label, median, budget, cpu, least in rows:
        print(f"{'perflab ' + label:26} {median:8.3f} {budget:7.2f} {median / budget:6.2f} {least:8.3f} {cpu:8.3f}")
    print(f"seconds: hyperfine median and min wall time of {args.runs} runs, mean user+sys CPU; "
          f"load average {' '.join(f'{x:.2f}' for x in load_before)} before, "
          f"{' '.join(f'{x:.2f}' for x in load_after)} after ({os.cpu_count()} CPUs)")
    return 0 if all(median <= budget for _, median, budget, _, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

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

    .venv/bin/python tools/bench/startup.py [--runs 20] [--keep DIR] [--store DIR] [--against REV]

--keep DIR keeps the store (DIR/perflab.db) for another round; --store DIR reuses it.
--against REV also times src/ of git revision REV (`git archive`, run with PYTHONPATH set to
it) on the same store, each command's two trees in one hyperfine call, and prints the ratio
of the CPU times this/that (a revision whose schema is older than the store's refuses it).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import uuid

PERFLAB = shutil.which("perflab", path=os.path.dirname(sys.executable)) or shutil.which("perflab")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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
    ap.add_argument("--runs", "--rounds", type=int, default=20,
                    help="timed runs of each command (hyperfine --runs; default 20)")
    ap.add_argument("--keep", metavar="DIR", help="make the store in DIR and keep it")
    ap.add_argument("--store", metavar="DIR", help="time on the store a --keep left in DIR")
    ap.add_argument("--against", metavar="REV", help="also time git revision REV's src/ (e.g. 1c0eda1, before issue 47)")
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
        commands = {"this": [PERFLAB]}
        if args.against:
            that = os.path.join(tmp, "against")
            os.makedirs(that, exist_ok=True)
            archive = subprocess.run(["git", "-C", ROOT, "archive", args.against, "src"], capture_output=True)
            if archive.returncode != 0:
                print(f"startup: git archive {args.against}: {archive.stderr.decode(errors='replace').strip()}",
                      file=sys.stderr)
                return 2
            subprocess.run(["tar", "-x", "-C", that], input=archive.stdout, check=True)
            code = "import sys; sys.argv[0] = 'perflab'; from perflab.cli import entry; entry()"
            commands["that"] = ["env", f"PYTHONPATH={that}/src", sys.executable, "-c", code]
        load_before = os.getloadavg()
        rows = []
        for label, (argv, budget) in BUDGETS.items():
            out = os.path.join(tmp, "hyperfine.json")
            subprocess.run(["hyperfine", "--style", "none", "--shell", "none", "--warmup", "3", "--runs",
                            str(args.runs), "--export-json", out,
                            *(shlex.join([*launcher, *argv]) for launcher in commands.values())],
                           env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            with open(out) as f:
                results = json.load(f)["results"]
            cpu = [r["user"] + r["system"] for r in results]
            rows.append((label, results[0]["median"], budget, cpu[0], min(results[0]["times"]),
                         cpu[0] / cpu[1] if len(cpu) > 1 else None, results[-1]["median"]))
        load_after = os.getloadavg()
    against = f"   {args.against + ' median':>14} {'cpu this/that':>13}" if args.against else ""
    print(f"{'command':26} {'median':>8} {'budget':>7} {'ratio':>6} {'min':>8} {'cpu':>8}{against}")
    for label, median, budget, cpu, least, cpu_ratio, that_median in rows:
        tail = f"   {that_median:14.3f} {cpu_ratio:13.2f}" if args.against else ""
        print(f"{'perflab ' + label:26} {median:8.3f} {budget:7.2f} {median / budget:6.2f} {least:8.3f} {cpu:8.3f}{tail}")
    print(f"seconds: hyperfine median and min wall time of {args.runs} runs, mean user+sys CPU; "
          f"load average {' '.join(f'{x:.2f}' for x in load_before)} before, "
          f"{' '.join(f'{x:.2f}' for x in load_after)} after ({os.cpu_count()} CPUs)")
    return 0 if all(row[1] <= row[2] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

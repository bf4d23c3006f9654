#!/usr/bin/env python3
"""Whole-command start-up time of this checkout's perflab against another revision's, side by side.

Three commands, each a whole process as a user runs it:
  --version                 the CLI alone (click, the command table);
  detect                    on the golden fixture store (tests/data/golden/store-export.json:
                            49 runs, 1,125 samples, 105 series): reading the store, the method,
                            the text layout;
  compare base head         on the same store: selection, statistics, the lkp layout.

"this" is the perflab of this checkout's src/ as it is on disk (uncommitted changes
included); "that" is src/ of git revision --against (default 8f2683e, the tree before the
package restructuring), extracted with `git archive` into a temporary directory, as
tools/bench/changepoints.py --against does. Both run under this interpreter with PYTHONPATH
set to their src/ (the dependencies are the same), started the same way: the console
script of their own pyproject.toml (`perflab = "module:function"`) called from `python -c`.
Each tree imports the fixture into a store of its own with its own `perflab import`.

Bytecode caches go to one PYTHONPYCACHEPREFIX in the temporary directory (none is written
into either source tree), filled by an untimed first run of each command, which also checks
that both trees print the same bytes (its stdout) for it. Then --rounds rounds: in each, every
command runs once per tree, the trees alternating (which goes first alternates each round).
Printed: per command and tree the median and the minimum wall time and the median CPU time
(user + system of the process), the ratio this / that of the medians and of the minimums,
and the load average before and after. The machine's other work shows as noise: compare
ratios, not absolute figures, and repeat on a quiet machine before believing 5%.

    .venv/bin/python tools/bench/startup.py [--rounds 9] [--against REV] [--chrt]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURE = os.path.join(ROOT, "tests", "data", "golden", "store-export.json")
COMMANDS = {
    "--version": ["--version"],
    "detect": ["detect"],
    "compare base head": ["compare", "base", "head"],
}


def _source_of(rev: str, into: str) -> str:
    """src/ and pyproject.toml of perflab at git revision `rev` of this checkout, written under
    `into` (as tools/bench/changepoints.py does): the directory that holds them."""
    archive = subprocess.run(["git", "-C", ROOT, "archive", rev, "src", "pyproject.toml"], capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    return into


def _launcher(tree: str) -> list[str]:
    """`python -c` calling the `perflab` console script that the tree's pyproject.toml names."""
    with open(os.path.join(tree, "pyproject.toml"), "rb") as f:
        target = tomllib.load(f)["project"]["scripts"]["perflab"]
    module, _, function = target.partition(":")
    code = (f"import sys; sys.argv[0] = 'perflab'; from {module} import {function} as entry; "
            "sys.exit(entry())")
    return [sys.executable, "-c", code]


def _time_once(argv: list[str], env: dict) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall seconds, CPU seconds of the process, its result)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, proc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=9, help="timed runs of each command per tree (default 9)")
    ap.add_argument("--against", metavar="REV", default="8f2683e",
                    help="the git revision to compare with (default 8f2683e, before the restructuring)")
    ap.add_argument("--chrt", action="store_true",
                    help="run each timed process under `chrt -f 10` (root): ahead of the machine's other jobs")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    if not os.path.isfile(FIXTURE):
        print(f"startup: {FIXTURE} is missing (the golden fixture of tests/test_output_identity.py)", file=sys.stderr)
        return 2
    prefix = ["chrt", "-f", "10"] if args.chrt else []

    with tempfile.TemporaryDirectory(prefix="perflab-startup-") as tmp:
        os.mkdir(os.path.join(tmp, "against"))
        try:
            that_tree = _source_of(args.against, os.path.join(tmp, "against"))
        except subprocess.CalledProcessError as e:
            print(f"startup: git archive {args.against} failed: {e.stderr.decode(errors='replace').strip()}",
                  file=sys.stderr)
            return 2
        trees = {"this": ROOT, "that": that_tree}
        base_env = {k: v for k, v in os.environ.items()
                    if not k.startswith("PERFLAB_") and k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
        for d in ("home", "config", "data", "cache", "fs-state", "pycache"):
            os.mkdir(os.path.join(tmp, d))
        base_env.update(HOME=os.path.join(tmp, "home"), XDG_CONFIG_HOME=os.path.join(tmp, "config"),
                        XDG_DATA_HOME=os.path.join(tmp, "data"), XDG_CACHE_HOME=os.path.join(tmp, "cache"),
                        PERFLAB_FS_STATE_DIR=os.path.join(tmp, "fs-state"),
                        PYTHONPYCACHEPREFIX=os.path.join(tmp, "pycache"), TZ="UTC")
        runs: dict[str, tuple[list[str], dict]] = {}
        for name, tree in trees.items():
            db = os.path.join(tmp, f"{name}.db")
            env = dict(base_env, PYTHONPATH=os.path.join(tree, "src"), PERFLAB_DB=db)
            launcher = [*prefix, *_launcher(tree)]
            where = subprocess.run([sys.executable, "-c", "import perflab; print(perflab.__file__)"], env=env,
                                   capture_output=True, text=True)
            if not where.stdout.startswith(os.path.join(tree, "src") + os.sep):
                print(f"startup: the {name} tree's perflab is not the one imported ({where.stdout.strip() or where.stderr.strip()})",
                      file=sys.stderr)
                return 2
            made = subprocess.run([*launcher, "import", FIXTURE], env=env, capture_output=True, text=True)
            if made.returncode != 0:
                print(f"startup: `perflab import` of the {name} tree failed: {made.stderr.strip()}", file=sys.stderr)
                return 2
            runs[name] = (launcher, env)

        revision = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                                  text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--", "src"], capture_output=True,
                               text=True).stdout.strip()
        print(f"this: {ROOT}/src (HEAD {revision}{', src/ modified' if dirty else ''}); "
              f"that: {args.against} (git archive); {sys.executable} (Python {sys.version.split()[0]}); "
              f"{os.cpu_count()} CPUs")
        # Untimed first runs: the bytecode caches, and the same output from both trees.
        same: dict[str, str] = {}
        for label, command in COMMANDS.items():
            outputs = {}
            for name, (launcher, env) in runs.items():
                proc = subprocess.run([*launcher, *command], env=env, capture_output=True)
                if proc.returncode != 0:
                    print(f"startup: `perflab {' '.join(command)}` of the {name} tree exited {proc.returncode}: "
                          f"{proc.stderr.decode(errors='replace').strip()[-500:]}", file=sys.stderr)
                    return 1
                outputs[name] = proc.stdout
            same[label] = "yes" if outputs["this"] == outputs["that"] else "NO"

        load_before = os.getloadavg()
        walls = {(label, name): [] for label in COMMANDS for name in runs}
        cpus = {(label, name): [] for label in COMMANDS for name in runs}
        for r in range(args.rounds):
            order = list(runs) if r % 2 == 0 else list(reversed(runs))
            for label, command in COMMANDS.items():
                for name in order:
                    launcher, env = runs[name]
                    wall, cpu, proc = _time_once([*launcher, *command], env)
                    if proc.returncode != 0:
                        print(f"startup: `perflab {' '.join(command)}` of the {name} tree exited {proc.returncode} "
                              f"in round {r + 1}", file=sys.stderr)
                        return 1
                    walls[(label, name)].append(wall)
                    cpus[(label, name)].append(cpu)
        load_after = os.getloadavg()

    print(f"{args.rounds} rounds, trees alternating; wall seconds (median, min) and CPU seconds (median) per command")
    print(f"{'command':20} {'tree':5} {'median':>8} {'min':>8} {'cpu':>8}   {'this/that median':>16} {'min':>6}"
          f"   same stdout")
    for label in COMMANDS:
        figures = {}
        for name in runs:
            w, c = walls[(label, name)], cpus[(label, name)]
            figures[name] = (statistics.median(w), min(w), statistics.median(c))
        for name in runs:
            median, least, cpu = figures[name]
            tail = ""
            if name == "this":
                tail = (f"   {figures['this'][0] / figures['that'][0]:16.3f} {figures['this'][1] / figures['that'][1]:6.3f}"
                        f"   {same[label]}")
            print(f"{label if name == 'this' else '':20} {name:5} {median:8.3f} {least:8.3f} {cpu:8.3f}{tail}")
    print(f"load average {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f} before, "
          f"{load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f} after "
          f"({os.cpu_count()} CPUs{'; under chrt -f 10' if args.chrt else ''})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

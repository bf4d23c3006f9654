#!/usr/bin/env python3
"""getppid1 under icount on eight Debian kernels, run in a shuffled order, then every view of
the history (issue 33's "done when").

Kernels: 6.1.0-47, -50, -53, -54, -55, -56 (6.1.170 -> 6.1.192) and 6.12.107, 6.12.117
(`apt-get download`, kept in perflab's kernel cache). Each is booted once under icount
(instruction-time) and runs will-it-scale getppid1 with one task, tagged wis-RELEASE, into a
fresh store in a temporary directory. Then, as a user types them:

    perflab detect --benchmark will-it-scale --metric will-it-scale.per_process_ops
    perflab log
    perflab report table --rows kernel --cols vm -b will-it-scale
    perflab compare kernel=6.1.0-47-amd64 kernel=6.1.0-50-amd64 --style S    (every layout)
    perflab report regression --base kernel=6.1.0-47-amd64 --head kernel=6.1.0-50-amd64
    perflab report html ... -o history.html

Their outputs are printed (and kept with --keep DIR). instruction-time does not depend on the
load; the wall time of the whole script does (~40 s a kernel here).

    tools/bench/kernel_history.py [--duration 0.5] [--runs 2] [--seed 3] [--keep DIR]
    tools/bench/kernel_history.py --views-of DIR/perflab.db     # the views again, nothing measured
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from perflab.execution.vm import kernel  # noqa: E402

PACKAGES = [f"linux-image-6.1.0-{n}-amd64-unsigned" for n in (47, 50, 53, 54, 55, 56)] + \
           [f"linux-image-6.12.{n}+deb12-amd64-unsigned" for n in (107, 117)]
PERFLAB = str(Path(sys.executable).with_name("perflab"))
METRIC = "will-it-scale.per_process_ops"


def perflab(db: Path, *args, check: bool = True) -> str:
    proc = subprocess.run([PERFLAB, "--db", str(db), *map(str, args)], capture_output=True, text=True)
    if check and proc.returncode not in (0, 1):
        raise SystemExit(f"perflab {' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stderr}")
    return proc.stdout + (f"[stderr] {proc.stderr}" if proc.stderr.strip() else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=0.5)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="keep the store, the outputs and the HTML here")
    parser.add_argument("--views-of", type=Path, metavar="DB",
                        help="measure nothing: print the views of a store this script kept before")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="perflab-kernel-history-"))
    db = work / "perflab.db"
    if args.views_of:
        shutil.copy(args.views_of, db)
    else:
        measure(db, args)
    show(db, work, args)
    return 0


def measure(db: Path, args) -> None:
    images = {p: kernel.fetch(p) for p in PACKAGES}
    order = list(PACKAGES)
    random.Random(args.seed).shuffle(order)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; run order: "
          + ", ".join(p.removeprefix("linux-image-").removesuffix("-unsigned") for p in order))
    began = time.monotonic()
    for package in order:
        release = package.removeprefix("linux-image-").removesuffix("-unsigned")
        out = perflab(db, "run", "will-it-scale", "--test", "getppid1", "--nr-task", "1", "--duration",
                      args.duration, "--runs", args.runs, "--kernel", images[package], "--vm", "icount",
                      "--tag", f"wis-{release}")
        print(out.strip().splitlines()[-1] if out.strip() else f"{release}: no output")
    print(f"measured in {time.monotonic() - began:.0f} s; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def show(db: Path, work: Path, args) -> None:
    views = [
        ("detect", ["detect", "--benchmark", "will-it-scale", "--metric", METRIC]),
        ("log", ["log"]),
        ("table", ["report", "table", "--rows", "kernel", "--cols", "vm", "-b", "will-it-scale"]),
        *[(f"compare-{style}", ["compare", "kernel=6.1.0-47-amd64", "kernel=6.1.0-50-amd64", "--style", style])
          for style in ("lkp", "mmtests", "benchstat", "kernbench", "json")],
        ("mail", ["report", "regression", "--base", "kernel=6.1.0-47-amd64", "--head", "kernel=6.1.0-50-amd64"]),
        ("html", ["report", "html", "kernel=6.1.0-47-amd64", "kernel=6.1.0-50-amd64", "-o", work / "history.html"]),
    ]
    for name, words in views:
        text = perflab(db, *words, check=False)
        print(f"\n===== perflab {' '.join(map(str, words))}\n{text.rstrip()}")
        (work / f"{name}.out").write_text(text)
    if args.keep:
        shutil.copytree(work, args.keep, dirs_exist_ok=True)
        print(f"\nkept in {args.keep}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

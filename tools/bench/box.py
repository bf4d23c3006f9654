#!/usr/bin/env python3
"""The simulated test box end to end: a job on its running kernel over SSH, then after kexec (issue 46).

Boots the simulated box (tests/testbox.py: a QEMU TCG guest of a Debian 12 root file system made
by mmdebstrap, reached over SSH on 127.0.0.1; the image is built once and cached), then:

1. the SSH path's cost per repetition: will-it-scale getppid1 (1 task, --duration D, no warm-up)
   by `perflab run --on testbox` with 1 and with 1+R repetitions, against the same static
   binary (perflab's build of it, copied there) run by hand over one ssh call 1 and 1+R times;
   cost per repetition = (wall(1+R) - wall(1)) / R on each side; ratio perflab/hand (goal <= 1.05);
2. the kernel under test: `perflab run ... --on testbox --kernel debian:6.1.0-50-amd64 --runs 1`
   (or `--kernel recipe`: tests/testbox.py's box recipe of linux-source-6.1, built as a Debian
   package — minutes the first time, then cached in ~/.cache/perflab/kernel-builds): the time
   from the request to the first sample stored (the store polled), the whole command's time
   (the box brought back to its default kernel, the package purged), and the way back taken.

    tools/bench/box.py                  # R=4, D=3
    tools/bench/box.py --reps 2 --duration 1 --no-kexec    # does it run
    tools/bench/box.py --no-ratio --kernel recipe          # a recipe's package kexec'ed

It prints the figures with the load average. Under TCG on a loaded 2-core machine the
repetition costs are noisy: read the ratio with the load beside it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))

import testbox  # noqa: E402

GOAL = 1.05
KERNEL = "debian:6.1.0-50-amd64"


def perflab() -> str:
    here = Path(sys.executable).parent / "perflab"
    return str(here) if here.exists() else (shutil.which("perflab") or "perflab")


def load() -> str:
    return "%.2f %.2f %.2f" % os.getloadavg()


def timed(argv: list[str], env: dict, db: Path | None = None) -> tuple[float, float | None, str]:
    """(wall seconds, seconds to the first sample in `db` when asked, stderr) of one command."""
    start = time.monotonic()
    first = None
    with tempfile.TemporaryFile("w+") as err:      # a file: a pipe nobody reads would stall a chatty command
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=err, text=True)
        while proc.poll() is None:
            if db is not None and first is None and db.exists():
                try:
                    con = sqlite3.connect(db, timeout=1)
                    if con.execute("SELECT count(*) FROM sample").fetchone()[0]:
                        first = time.monotonic() - start
                    con.close()
                except sqlite3.Error:
                    pass
            time.sleep(0.2)
        err.seek(0)
        said = err.read()
    if proc.returncode != 0:
        raise SystemExit(f"box.py: {' '.join(argv[:6])} ... exited {proc.returncode}: {said.strip()[-500:]}")
    return time.monotonic() - start, first, said


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=4, help="R: the repetitions added to the 1-repetition run")
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--no-kexec", action="store_true", help="skip the kernel under test")
    ap.add_argument("--no-ratio", action="store_true", help="skip the SSH path's cost per repetition")
    ap.add_argument("--kernel", default=KERNEL, help=f"the kernel under test (default {KERNEL}; 'recipe': the "
                    "box recipe of tests/testbox.py, built as a package)")
    args = ap.parse_args()
    why = testbox.missing()
    if why:
        print(f"box.py: the simulated box cannot run here: {why}", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="perflab-box-bench."))
    print(f"load average before: {load()}")
    t = time.monotonic()
    built = testbox.build()
    print(f"box image: {built} ({time.monotonic() - t:.1f} s to build or find)")
    t = time.monotonic()
    box = testbox.boot(work / "box")
    print(f"box booted and answering over SSH: {time.monotonic() - t:.1f} s (TCG)")
    try:
        config = work / "perflab.toml"
        config.write_text(box.machine_config("testbox", boot_timeout=900))
        env = dict(os.environ, PERFLAB_CONFIG=str(config))

        from perflab.benchmarks.will_it_scale.family import WillItScaleParams
        from perflab.benchmarks.will_it_scale import testcases as tc
        from perflab.core import cbuild

        with cbuild.static_programs():
            binary = cbuild.build("getppid1", tc.SOURCE_DIR, flags=tc.BUILD_FLAGS, libs=tc.BUILD_LIBS)
        p = WillItScaleParams(test="getppid1", duration=args.duration, warmup_time=0)
        with open(binary, "rb") as f:
            subprocess.run(["ssh", "-F", str(box.ssh_config), "testbox", "cat > /root/getppid1 && chmod 755 /root/getppid1"],
                           stdin=f, check=True)
        one = (f"/root/getppid1 -m {p.mode} -n 1 -d {p.duration!r} -w 0 -i {p.interval!r} -H system -D /tmp "
               ">/dev/null")

        def hand(n: int) -> float:
            return timed(["ssh", "-F", str(box.ssh_config), "testbox", f"for i in $(seq {n}); do {one} || exit 1; done"],
                         env)[0]

        def ours(n: int) -> float:
            db = work / f"ours-{n}-{time.monotonic_ns()}.db"
            return timed([perflab(), "run", "will-it-scale", "--test", "getppid1", "--duration", str(args.duration),
                          "--warmup-time", "0", "--nr-task", "1", "--runs", str(n), "--on", "testbox"],
                         dict(env, PERFLAB_DB=str(db)))[0]

        if not args.no_ratio:
            ours(1)      # perflab's programs built static once, the machine's CPUs asked: not counted
            h1, hr = hand(1), hand(1 + args.reps)
            o1, orr = ours(1), ours(1 + args.reps)
            per_hand, per_ours = (hr - h1) / args.reps, (orr - o1) / args.reps
            ratio = per_ours / per_hand
            print(f"by hand over one ssh call: {h1:.2f} s for 1 repetition, {hr:.2f} s for {1 + args.reps}: "
                  f"{per_hand:.3f} s per repetition")
            print(f"perflab run --on testbox: {o1:.2f} s for 1 repetition, {orr:.2f} s for {1 + args.reps}: "
                  f"{per_ours:.3f} s per repetition")
            print(f"cost per repetition, perflab/hand: {ratio:.3f} (goal <= {GOAL}: "
                  f"{'met' if ratio <= GOAL else 'NOT met'})")
        if not args.no_kexec:
            kernel = args.kernel
            if kernel == "recipe":
                kernel = str(testbox.box_recipe(work / "box-recipe.yaml") or sys.exit("box.py: no linux-source-6.1"))
                # The build (minutes) is kept in the user's cache, as the box's image is.
                env = dict(env, XDG_CACHE_HOME=str(testbox.cache_home().parent))
            db = work / "kexec.db"
            wall, first, said = timed([perflab(), "run", "will-it-scale", "--test", "getppid1", "--duration",
                                       str(args.duration), "--warmup-time", "0", "--nr-task", "1", "--runs", "1",
                                       "--on", "testbox", "--kernel", kernel], dict(env, PERFLAB_DB=str(db)), db)
            con = sqlite3.connect(db)
            status, = con.execute("SELECT status FROM run").fetchone()
            con.close()
            print(f"kexec into {args.kernel}: run {status}; request to first sample {first:.1f} s"
                  if first is not None else f"kexec into {args.kernel}: run {status}; no sample seen before the end")
            print(f"  the whole command (install, kexec, job, back to the default kernel, purge): {wall:.1f} s")
            back = [line for line in said.splitlines() if "back on its default kernel" in line]
            print(f"  the way back: {back[-1] if back else '(not said)'}")
            print(f"  the box afterwards: {box.ssh('uname -r').stdout.strip()}")
    finally:
        box.stop()
        print(f"load average after: {load()}")
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

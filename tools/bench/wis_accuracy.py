#!/usr/bin/env python3
"""Accuracy of perflab's will-it-scale class against the original will-it-scale.

Target (issue 9): per-task ops/s within 15% of the original for the same
testcase, mode and task count on the same machine, both bound the same way,
run alternately.

The original (github.com/antonblanchard/will-it-scale) is exported or cloned
OUTSIDE the repository (default /tmp/wis-orig) and built there with its own
Makefile (it needs hwloc: libhwloc-dev, installed with apt-get when missing
and running as root); its code never enters perflab.  Ours is built with
cbuild.  For every testcase x mode x task count, each round runs both, the
order alternating from round to round; both with ASLR off (personality, as
the original's runtest.py does with setarch -R), the same THP policy, the same
warm-up (the original's is fixed: 6 one-second samples) and the same measured
duration, temporary files in the same directory (the original's are in /tmp).

Printed: testcase, mode, tasks, the original's per-task ops/s (its "average"
divided by the tasks), ours (measured ops / measured seconds / tasks), both
medians over the rounds with their range across rounds in %, the ratio
ours/original and whether it is within the tolerance; then the median ratio.

    .venv/bin/python tools/bench/wis_accuracy.py [--orig /tmp/wis-orig] [--source GIT_DIR|URL]
        [--testcases all|a,b,...] [--modes process,thread] [--tasks 1[,2,...]] [--rounds 3]
        [--duration 5] [--warmup 6] [--thp system|never] [--unbound] [--aslr] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from perflab.core import cbuild
from perflab.benchmarks.will_it_scale import testcases as wis

REPO = Path(__file__).resolve().parents[2]
UPSTREAM = "https://github.com/antonblanchard/will-it-scale"
MIRROR = Path("/work/.mirror/antonblanchard+will-it-scale/repo")
ORIGINAL_WARMUP = 6          # samples main.c discards before it starts summing
ADDR_NO_RANDOMIZE = 0x0040000
PR_SET_THP_DISABLE = 41
TOLERANCE = 0.15


def fail(message: str):
    sys.exit(f"wis_accuracy: {message}")


def csv(value: str) -> list[str]:
    return [v for v in (part.strip() for part in value.split(",")) if v]


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--orig", type=Path, default=Path("/tmp/wis-orig"),
                    help="checkout of the original (made there when missing; outside the repository)")
    ap.add_argument("--source", default=None,
                    help=f"git dir or URL to take the original from (default {MIRROR} if present, else {UPSTREAM})")
    ap.add_argument("--testcases", default="all", help="comma-separated testcases, or all")
    ap.add_argument("--modes", default="process,thread", help="process, thread or both (comma-separated)")
    ap.add_argument("--tasks", default="1", help="comma-separated task counts, e.g. 1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=5, help="measured seconds (the original's -s)")
    ap.add_argument("--warmup", type=float, default=ORIGINAL_WARMUP,
                    help=f"our warm-up in seconds (the original's is {ORIGINAL_WARMUP} s)")
    ap.add_argument("--thp", choices=("system", "never"), default="system",
                    help="never: PR_SET_THP_DISABLE for both (inherited across exec)")
    ap.add_argument("--unbound", action="store_true", help="no binding for either (original -n, ours -B)")
    ap.add_argument("--aslr", action="store_true", help="leave ASLR on (default: off for both)")
    ap.add_argument("--dir", default="/tmp", help="directory for our temporary files (the original uses /tmp)")
    ap.add_argument("--tolerance", type=float, default=TOLERANCE)
    args = ap.parse_args(argv)

    names = sorted(wis.TESTCASES, key=list(wis.TESTCASES).index) if args.testcases == "all" else csv(args.testcases)
    unknown = [n for n in names if n not in wis.TESTCASES]
    if unknown or not names:
        ap.error(f"--testcases: unknown {', '.join(unknown) or '(none given)'}; valid: {', '.join(wis.TESTCASES)}")
    args.names = names
    args.mode_list = csv(args.modes)
    if not args.mode_list or any(m not in wis.MODES for m in args.mode_list):
        ap.error(f"--modes: {args.modes!r}; valid: process, thread")
    try:
        args.task_list = [int(t) for t in csv(args.tasks)]
    except ValueError:
        ap.error(f"--tasks: {args.tasks!r} is not a list of integers")
    if not args.task_list or min(args.task_list) < 1:
        ap.error(f"--tasks: {args.tasks!r}: task counts are >= 1")
    if args.rounds < 1 or args.duration < 1 or args.warmup < 0:
        ap.error("--rounds and --duration are >= 1, --warmup >= 0")
    if not Path(args.dir).is_dir():
        ap.error(f"--dir: {args.dir!r} is not a directory")
    return args


# ---- the original ---------------------------------------------------------

def inside_repository(path: Path) -> bool:
    try:
        path.resolve().relative_to(REPO)
        return True
    except ValueError:
        return False


def ensure_checkout(orig: Path, source: str | None) -> Path:
    if inside_repository(orig):
        fail(f"--orig {orig} is inside the repository; the original's code must stay outside it")
    if (orig / "main.c").is_file():
        return orig
    source = source or (str(MIRROR) if MIRROR.is_dir() else UPSTREAM)
    print(f"exporting will-it-scale from {source} into {orig} ...", file=sys.stderr, flush=True)
    if Path(source).is_dir():
        orig.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "--git-dir", source, "archive", "HEAD"], capture_output=True)
        if archive.returncode != 0:
            fail(f"git archive of {source} failed: {archive.stderr.decode(errors='replace').strip()}")
        subprocess.run(["tar", "-x", "-C", str(orig)], input=archive.stdout, check=True)
    else:
        proc = subprocess.run(["git", "clone", "--depth", "1", source, str(orig)], capture_output=True, text=True)
        if proc.returncode != 0:
            fail(f"git clone {source} failed: {proc.stderr.strip()}")
    if not (orig / "main.c").is_file():
        fail(f"{orig} has no main.c after fetching {source}")
    return orig


def ensure_hwloc():
    if Path("/usr/include/hwloc.h").exists() or subprocess.run(
            ["sh", "-c", "pkg-config --exists hwloc"], capture_output=True).returncode == 0:
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        fail("the original needs hwloc: install libhwloc-dev (apt-get install libhwloc-dev)")
    print("installing libhwloc-dev ...", file=sys.stderr, flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-q"], check=True, env=env, capture_output=True)
    subprocess.run(["apt-get", "install", "-y", "-q", "libhwloc-dev"], check=True, env=env, capture_output=True)


def original_binary(name: str, mode: str) -> str:
    return f"{name}_{'processes' if mode == 'process' else 'threads'}"


def build_original(orig: Path, names: list[str], modes: list[str]) -> dict[tuple[str, str], Path]:
    ensure_hwloc()
    targets = [original_binary(n, m) for n in names for m in modes]
    proc = subprocess.run(["make", "-C", str(orig), f"-j{os.cpu_count() or 2}", *targets],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        fail(f"building the original failed: {proc.stderr.strip()[-600:]}")
    return {(n, m): orig / original_binary(n, m) for n in names for m in modes}


# ---- running --------------------------------------------------------------

def preexec(aslr: bool, thp: str):
    def setup():
        libc = ctypes.CDLL(None, use_errno=True)
        if not aslr:
            current = libc.personality(ctypes.c_ulong(0xffffffff))
            libc.personality(ctypes.c_ulong(current | ADDR_NO_RANDOMIZE))
        if thp == "never":
            libc.prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0)
    return setup


def run_original(binary: Path, tasks: int, args) -> float:
    cmd = [str(binary), "-t", str(tasks), "-s", str(args.duration)] + (["-n"] if args.unbound else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=ORIGINAL_WARMUP + args.duration + 120,
                          preexec_fn=preexec(args.aslr, args.thp), cwd=binary.parent)
    found = re.search(r"^average:(\d+)$", proc.stdout, re.M)
    if proc.returncode != 0 or not found:
        raise RuntimeError(f"original {binary.name} -t {tasks} exited {proc.returncode}: "
                           f"{(proc.stderr or proc.stdout).strip()[-200:]}")
    return int(found.group(1)) / tasks


def run_ours(binary: Path, mode: str, tasks: int, args) -> float:
    cmd = [str(binary), "-m", mode, "-n", str(tasks), "-d", str(args.duration), "-w", str(args.warmup),
           "-i", "1", "-D", args.dir, "-H", args.thp] + (["-B"] if args.unbound else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.warmup + args.duration + 120,
                          preexec_fn=preexec(args.aslr, "system"))
    if proc.returncode != 0:
        raise RuntimeError(f"ours {binary.name} exited {proc.returncode}: {proc.stderr.strip()[-200:]}")
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    measured = [e for e in events if e["event"] == "interval" and not e["warmup"]]
    if events[0]["aslr"] and not args.aslr:
        raise RuntimeError(f"ours {binary.name}: ASLR was on although the launcher turned it off")
    seconds = sum(e["elapsed"] for e in measured)
    return sum(sum(e["ops"]) for e in measured) / seconds / tasks


@dataclass
class Point:
    name: str
    mode: str
    tasks: int
    original: list[float] = field(default_factory=list)
    ours: list[float] = field(default_factory=list)
    error: str = ""


def spread(values: list[float]) -> str:
    if len(values) < 2 or not statistics.median(values):
        return ""
    return f"±{(max(values) - min(values)) / statistics.median(values) / 2 * 100:.1f}%"


def main(argv=None) -> int:
    args = parse_args(argv)
    orig = ensure_checkout(args.orig, args.source)
    original = build_original(orig, args.names, args.mode_list)
    ours = {n: cbuild.build(n, wis.SOURCE_DIR, flags=wis.BUILD_FLAGS, libs=wis.BUILD_LIBS) for n in args.names}

    points = [Point(n, m, t) for n in args.names for m in args.mode_list for t in args.task_list]
    per_run = ORIGINAL_WARMUP + args.warmup + 2 * args.duration + 1
    print(f"{len(points)} points x {args.rounds} rounds, about {len(points) * args.rounds * per_run / 60:.0f} min; "
          f"binding {'none' if args.unbound else 'task i -> CPU/core i'}, ASLR {'on' if args.aslr else 'off'}, "
          f"THP {args.thp}", file=sys.stderr, flush=True)
    started = time.monotonic()
    for rnd in range(args.rounds):
        for index, p in enumerate(points):
            if p.error:
                continue
            runs = [("original", lambda: run_original(original[(p.name, p.mode)], p.tasks, args)),
                    ("ours", lambda: run_ours(ours[p.name], p.mode, p.tasks, args))]
            if (rnd + index) % 2:
                runs.reverse()
            try:
                for who, run in runs:
                    (p.original if who == "original" else p.ours).append(run())
            except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError, KeyError, IndexError) as e:
                p.error = str(e).splitlines()[0][:160]
            print(f"  round {rnd + 1}/{args.rounds} {p.name} {p.mode} {p.tasks}: "
                  f"{p.error or 'ok'} ({time.monotonic() - started:.0f} s)", file=sys.stderr, flush=True)

    print(f"{'testcase':<16} {'mode':<8} {'tasks':>5} {'original/task':>14} {'':>7} {'ours/task':>14} "
          f"{'':>7} {'ratio':>6}  within {args.tolerance:.0%}")
    ratios = []
    for p in points:
        if p.error or not p.original or len(p.original) != len(p.ours):
            print(f"{p.name:<16} {p.mode:<8} {p.tasks:>5}  failed: {p.error or 'incomplete'}")
            continue
        o, u = statistics.median(p.original), statistics.median(p.ours)
        ratio = u / o if o else float("inf")
        ratios.append(ratio)
        verdict = "yes" if abs(ratio - 1) <= args.tolerance else "NO"
        print(f"{p.name:<16} {p.mode:<8} {p.tasks:>5} {o:>14,.0f} {spread(p.original):>7} {u:>14,.0f} "
              f"{spread(p.ours):>7} {ratio:>6.3f}  {verdict}")
    if ratios:
        within = sum(abs(r - 1) <= args.tolerance for r in ratios)
        print(f"median ratio ours/original: {statistics.median(ratios):.3f} over {len(ratios)} points; "
              f"{within}/{len(ratios)} within {args.tolerance:.0%}; {args.rounds} round(s) of {args.duration} s")
    return 0 if ratios and len(ratios) == len(points) else 1


if __name__ == "__main__":
    sys.exit(main())

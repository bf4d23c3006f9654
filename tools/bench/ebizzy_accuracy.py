#!/usr/bin/env python3
"""Accuracy of perflab's ebizzy class against the original ebizzy 0.3.

Target (issue 10): records/s within 15% of the original for `-t 1`, `-t 2`,
`-m -t 1` and `-m -t 2` (and the seed's `-mT` forms with --touch), on the same
machine, run alternately.

The original (ebizzy 0.3, as LTP carries it under utils/benchmark/ebizzy-0.3)
is exported OUTSIDE the repository (default /tmp/ebizzy-orig) from a git
directory of LTP (default: the mirror /work/.mirror/linux-test-project+ltp/repo,
else a shallow clone of github.com/linux-test-project/ltp) and built there
with `cc -O2 ... -lpthread`; its code never enters perflab. Ours is built with
cbuild, as the family builds it. Both run with the same options (default
chunks and chunk size: 10 x 512 KiB) for the same whole number of seconds,
the order alternating from round to round.

Printed per configuration: the original's records/s (its own line), ours
(the family's parser on our program's output: the sum of records over the
measured seconds), medians over the rounds with their range in %, the ratio
ours/original and whether it is within the tolerance.

    .venv/bin/python tools/bench/ebizzy_accuracy.py [--orig /tmp/ebizzy-orig] [--source GIT_DIR|URL]
        [--configs "-t 1;-t 2;-m -t 1;-m -t 2"] [--touch] [--rounds 5] [--seconds 10]
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from perflab.core import cbuild
from perflab.benchmarks.ebizzy import BUILD_FLAGS, BUILD_LIBS, SOURCE_DIR, THROUGHPUT, parse_output

REPO = Path(__file__).resolve().parents[2]
UPSTREAM = "https://github.com/linux-test-project/ltp"
MIRROR = Path("/work/.mirror/linux-test-project+ltp/repo")
SUBDIR = "utils/benchmark/ebizzy-0.3"
CONFIGS = "-t 1;-t 2;-m -t 1;-m -t 2"
TOLERANCE = 0.15


def fail(message: str):
    sys.exit(f"ebizzy_accuracy: {message}")


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--orig", type=Path, default=Path("/tmp/ebizzy-orig"),
                    help="where the original is exported and built (outside the repository)")
    ap.add_argument("--source", default=None, help=f"LTP git dir or URL (default {MIRROR} if present, else {UPSTREAM})")
    ap.add_argument("--configs", default=CONFIGS, help=f"';'-separated option sets of -m and -t N (default {CONFIGS!r})")
    ap.add_argument("--touch", action="store_true", help="add -T (touch pages only) to every configuration")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=10, help="measured seconds (the original's -S: whole seconds)")
    ap.add_argument("--tolerance", type=float, default=TOLERANCE)
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.seconds < 1:
        ap.error("--rounds and --seconds are >= 1")
    args.config_list = []
    for text in (c.strip() for c in args.configs.split(";")):
        m = re.fullmatch(r"(-m\s+)?-t\s+(\d+)", text)
        if not m or int(m.group(2)) < 1:
            ap.error(f"--configs: {text!r} is not '[-m] -t N'")
        args.config_list.append((bool(m.group(1)), int(m.group(2))))
    return args


def inside_repository(path: Path) -> bool:
    try:
        path.resolve().relative_to(REPO)
        return True
    except ValueError:
        return False


def build_original(orig: Path, source: str | None) -> Path:
    if inside_repository(orig):
        fail(f"--orig {orig} is inside the repository; the original's code must stay outside it")
    binary = orig / "ebizzy"
    if binary.is_file():
        return binary
    orig.mkdir(parents=True, exist_ok=True)
    source = source or (str(MIRROR) if MIRROR.is_dir() else UPSTREAM)
    if not Path(source).is_dir():
        clone = orig / "ltp"
        if not clone.is_dir():
            print(f"cloning {source} into {clone} ...", file=sys.stderr, flush=True)
            proc = subprocess.run(["git", "clone", "--depth", "1", "--filter=blob:none", "--sparse", source, str(clone)],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                fail(f"git clone {source} failed: {proc.stderr.strip()[-300:]}")
        source = str(clone / ".git")
    for name in ("ebizzy.c", "ebizzy.h"):
        proc = subprocess.run(["git", "--git-dir", source, "show", f"HEAD:{SUBDIR}/{name}"], capture_output=True)
        if proc.returncode != 0:
            fail(f"cannot read {SUBDIR}/{name} from {source}: {proc.stderr.decode(errors='replace').strip()}")
        (orig / name).write_bytes(proc.stdout)
    cc = shutil.which(cbuild.cc_command()) or "cc"
    proc = subprocess.run([cc, "-O2", "-o", str(binary), str(orig / "ebizzy.c"), "-lpthread"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        fail(f"building the original failed: {proc.stderr.strip()[-600:]}")
    return binary


def run_original(binary: Path, mmap: bool, threads: int, args) -> float:
    cmd = [str(binary), "-t", str(threads), "-S", str(args.seconds)] + (["-m"] if mmap else []) + \
        (["-T"] if args.touch else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.seconds + 120)
    found = re.search(r"^(\d+) records/s", proc.stdout, re.M)
    if proc.returncode != 0 or not found:
        raise RuntimeError(f"original {' '.join(cmd[1:])} exited {proc.returncode}: {proc.stderr.strip()[-200:]}")
    return float(found.group(1))


def run_ours(binary: Path, mmap: bool, threads: int, args) -> float:
    cmd = [str(binary), "-t", str(threads), "-S", str(args.seconds)] + (["-m"] if mmap else []) + \
        (["-T"] if args.touch else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.seconds + 120)
    if proc.returncode != 0:
        raise RuntimeError(f"ours {' '.join(cmd[1:])} exited {proc.returncode}: {proc.stderr.strip()[-200:]}")
    return next(s.value for s in parse_output(proc.stdout, threads) if s.metric == THROUGHPUT)


def spread(values: list[float]) -> float:
    middle = statistics.median(values)
    return 100.0 * (max(values) - min(values)) / middle if middle else 0.0


def main(argv=None) -> int:
    args = parse_args(argv)
    original = build_original(args.orig, args.source)
    ours = cbuild.build("ebizzy", SOURCE_DIR, flags=BUILD_FLAGS, libs=BUILD_LIBS)
    touch = " -T" if args.touch else ""
    print(f"ebizzy class vs ebizzy 0.3 ({original}): {args.rounds} rounds x {args.seconds} s, alternating; "
          f"records/s, median (range across rounds)")
    print(f"{'configuration':<16} {'original':>22} {'perflab':>22} {'ratio':>7}  within {args.tolerance:.0%}")
    ratios, worst_ok = [], True
    for mmap, threads in args.config_list:
        theirs, mine = [], []
        for r in range(args.rounds):
            pair = [(theirs, run_original, original), (mine, run_ours, ours)]
            for into, run, binary in (pair if r % 2 == 0 else pair[::-1]):
                into.append(run(binary, mmap, threads, args))
        a, b = statistics.median(theirs), statistics.median(mine)
        ratio = b / a if a else float("inf")
        ok = abs(ratio - 1) <= args.tolerance
        worst_ok &= ok
        ratios.append(ratio)
        label = f"{'-m ' if mmap else ''}-t {threads}{touch}"
        print(f"{label:<16} {a:>12.1f} ({spread(theirs):5.1f}%) {b:>12.1f} ({spread(mine):5.1f}%) {ratio:>7.3f}  "
              f"{'yes' if ok else 'NO'}", flush=True)
    print(f"median ratio perflab/original: {statistics.median(ratios):.3f}; "
          f"{'all' if worst_ok else 'not all'} configurations within {args.tolerance:.0%}")
    return 0 if worst_ok else 1


if __name__ == "__main__":
    sys.exit(main())

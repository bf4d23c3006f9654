#!/usr/bin/env python3
"""A user-space patch series (issue 37): one patch changes only data layout, one adds work.

    python tools/bench/series_userspace.py [--rounds 3] [--keep]

A generated C project: an array of 2^21 items written once, then summed 4 times, and a loop of
WORK additions. Eight patches on its base, in two halves mailed separately (`git format-patch
--base`), so each half has one culprit:

  first half (1-4):  notes, notes, **pad each item to a cache line** (`PAD 0` -> `PAD 56`: the
                     same loops and instructions at -O1, 8 times the memory and the cache lines), notes
  second half (5-8): notes, **100,000,000 more additions** (WORK 0 -> 100000000), notes, notes

`perflab series --metric time.elapsed_time` runs on each half: the patch named, the revert check,
and the kind of the change, counted by valgrind. Expected: the padding "timing only", the work
"code path". Each half is run --rounds times (a fresh store each); printed per round: the patch,
the label with its figures, the revert verdict, the runs and seconds it took, and the load average.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PERFLAB = [sys.executable, "-c", "import sys; from perflab.cli import entry; sys.argv[0] = 'perflab'; sys.exit(entry())"]
HERE = Path(__file__).resolve().parents[2]
PROGRAM = """#include "layout.h"
#include "work.h"
#define N (1L << 21)
struct item { long v; char pad[PAD]; };
static struct item items[N];
static volatile long sink;
__attribute__((noinline)) void fill(void) { for (long i = 0; i < N; i++) items[i].v = i; }
__attribute__((noinline)) long sum(void) { long s = 0; for (long i = 0; i < N; i++) s += items[i].v; return s; }
__attribute__((noinline)) void work(long n) { for (long i = 0; i < n; i++) sink += i; }
int main(void) { long s = 0; fill(); for (int r = 0; r < 4; r++) s += sum(); sink = s; work(WORK); return 0; }
"""


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=Dev", "-c", "user.email=dev@example.org", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def project(where: Path) -> tuple[Path, list[str]]:
    repo = where / "proj"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for name, text in {"prog.c": PROGRAM, "layout.h": "#define PAD 0\n", "work.h": "#define WORK 0L\n",
                       "NOTES": "notes\n"}.items():
        (repo / name).write_text(text)
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "base")
    shas = [git(repo, "rev-parse", "HEAD")]
    changes = {3: ("items: pad each item to a cache line", "layout.h", "#define PAD 56\n"),
               6: ("work: 100,000,000 more additions", "work.h", "#define WORK 100000000L\n")}
    for i in range(1, 9):
        subject, name, text = changes.get(i, (f"notes: more notes ({i})", "NOTES", "notes\n" * (i + 1)))
        (repo / name).write_text(text)
        git(repo, "commit", "-qam", subject)
        shas.append(git(repo, "rev-parse", "HEAD"))
    return repo, shas


def mailbox(repo: Path, base: str, head: str, out: Path) -> Path:
    mails = out.with_suffix(".d")
    git(repo, "format-patch", "-q", "--base", base, "--cover-letter", "-o", str(mails), f"{base}..{head}")
    out.write_text("".join(p.read_text() for p in sorted(mails.glob("*.patch"))))
    return out


def run_half(repo: Path, mbox: Path, work: Path, name: str) -> dict:
    job = work / "job.yaml"
    job.write_text("benchmark: cmd\ncommand: ./prog\n")
    db = work / f"{name}.db"
    cmd = [*PERFLAB, "series", "--repo", repo, "--mbox", mbox, "--job", job, "--build", "cc -O1 -o prog prog.c",
           "--metric", "time.elapsed_time", "--out", work / f"{name}-mail.txt", "--db", db]
    load = os.getloadavg()[0]
    started = time.monotonic()
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(HERE / "src")))
    seconds = time.monotonic() - started
    out = done.stdout + done.stderr

    def said(pattern: str) -> str:
        m = re.search(pattern, out, re.M)
        return m.group(1) if m else "(not said)"

    runs = said(r"^runs: (\d+) over")
    return {"exit": done.returncode, "patch": said(r"^the patch: (.*)$"), "kind": said(r"^kind of change: (.*)$"),
            "revert": said(r"^revert check: (.*)$"), "runs": runs, "seconds": seconds,
            "load": f"{load:.1f} -> {os.getloadavg()[0]:.1f}", "tail": out[-1500:] if done.returncode else ""}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--keep", action="store_true", help="keep the project and the mails")
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("needs valgrind (apt-get install valgrind): the kind of the change is counted by it")
    work = Path(tempfile.mkdtemp(prefix="perflab-series-user-"))
    repo, shas = project(work)
    halves = {"layout": mailbox(repo, shas[0], shas[4], work / "first.mbox"),
              "work": mailbox(repo, shas[4], shas[8], work / "second.mbox")}
    labels: dict[str, list[str]] = {"layout": [], "work": []}
    for r in range(1, args.rounds + 1):
        for name, mbox in halves.items():       # the two halves alternate
            (work / f"r{r}").mkdir(exist_ok=True)
            got = run_half(repo, mbox, work / f"r{r}", name)
            labels[name].append(got["kind"].split(":")[0])
            print(f"round {r} {name}: exit {got['exit']}, {got['seconds']:.0f} s, bisection runs {got['runs']}, "
                  f"load {got['load']}\n  patch: {got['patch']}\n  kind: {got['kind']}\n  revert: {got['revert']}",
                  flush=True)
            if got["tail"]:
                print("  " + got["tail"].replace("\n", "\n  "))
    for name, want in (("layout", "timing only"), ("work", "code path")):
        right = sum(1 for x in labels[name] if x == want)
        print(f"{name}: labelled {want!r} in {right} of {len(labels[name])} rounds ({', '.join(labels[name])})")
    if args.keep:
        print(f"kept: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

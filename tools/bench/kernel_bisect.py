#!/usr/bin/env python3
"""A real kernel bisection (issue 20): linux-source-6.1, a minimal config, `perflab bisect --vm icount`.

    python tools/bench/kernel_bisect.py [--commits 20] [--culprit 13] [--broken 9] [--extra 3] [--jobs 2]
    python tools/bench/kernel_bisect.py --setup-only      # the tree and the repository, no build
    python tools/bench/kernel_bisect.py --prebuild        # the good end's full build into the cache, niced

1. The kernel tree: /usr/src/linux-source-6.1.tar.xz (`apt-get install linux-source-6.1 flex bison
   libelf-dev`; installed here when absent and running as root) unpacked once into
   $XDG_CACHE_HOME/perflab/linux/linux-source-6.1.
2. One git repository (`repo/`, beside it; made once): a copy of the tree plus `perflab kernel
   config`'s minimal config as perflab.config, committed and tagged `perflab-base`. Each layout
   is a branch `bench-COMMITS-CULPRIT-BROKEN-EXTRA` of COMMITS-1 commits on it, written with git's
   plumbing (only kernel/sys.c changes, so no checkout and no scan of the 75,000 files): the commit
   CULPRIT adds EXTRA reads of a volatile variable to getppid (EXTRA more instructions per call:
   with 3, about 1.5% of will-it-scale getppid1's instruction-time); the commit BROKEN breaks the
   build (a syntax error in kernel/sys.c, fixed by the next commit); the others change a comment
   in kernel/sys.c (neutral, but every step recompiles it).
3. `perflab bisect --kernel arch/x86/boot/bzImage --vm icount` with will-it-scale getppid1 (1
   task). By default the build command builds in a tree kept in the cache (`build/src`, a
   worktree of the repository checked out at the commit perflab's worktree is at, and
   `build/out`, kbuild's O=) and copies the image to $KBUILD_OUTPUT: a second run of this script,
   and its good end after --prebuild, build incrementally. `--fresh-build` uses perflab's own
   build directory instead (the bisection's first build is then a full one).
   Printed: the culprit found (right or wrong), the runs per measured commit, the time split per
   step (build, boot, boot+run: the Measurer's `kernel SHA: ...` lines), the total and the load
   average seen during the bisection.

Goal: under 20 s per step after the first build on a 2-core machine (issue 34; issue 20 asked
for 1 minute). Figures must be taken on a quiet machine: a shared one makes builds and TCG slower by the load (icount's
metric itself does not move with the load; only the time to get it does).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

TARBALL = Path("/usr/src/linux-source-6.1.tar.xz")
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "perflab" / "linux"
SRC = CACHE / "linux-source-6.1"
REPO = CACHE / "repo"
BUILD_SRC, BUILD_OUT = CACHE / "build" / "src", CACHE / "build" / "out"
BASE_TAG = "perflab-base"
HERE = Path(__file__).resolve().parents[2]
PERFLAB = [sys.executable, "-c", "import sys; from perflab.cli import entry; sys.argv[0] = 'perflab'; sys.exit(entry())"]
GETPPID = "SYSCALL_DEFINE0(getppid)\n{\n\tint pid;\n"
IDENT = {"GIT_AUTHOR_NAME": "perflab bench", "GIT_AUTHOR_EMAIL": "bench@perflab",
         "GIT_COMMITTER_NAME": "perflab bench", "GIT_COMMITTER_EMAIL": "bench@perflab"}


def sh(*args, cwd=None, env=None, check=True, stdin=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], cwd=cwd, env=env, check=check, capture_output=True, text=True,
                          input=stdin)


def git(*args, env=None, stdin=None) -> str:
    return sh("git", "-C", REPO, *args, env=env, stdin=stdin).stdout.strip()


def tree() -> Path:
    if (SRC / "Makefile").is_file():
        return SRC
    if not TARBALL.is_file():
        if os.geteuid() != 0:
            sys.exit(f"{TARBALL} missing: apt-get install linux-source-6.1 flex bison libelf-dev")
        sh("apt-get", "install", "-y", "--no-install-recommends", "linux-source-6.1", "flex", "bison", "libelf-dev")
    CACHE.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    sh("tar", "-xJf", TARBALL, "-C", CACHE)
    print(f"unpacked {TARBALL} in {time.monotonic() - started:.0f} s")
    return SRC


def base_repository() -> str:
    """The repository with the tree and perflab.config as one commit (made once); that commit."""
    if (REPO / ".git").is_dir():
        return git("rev-parse", f"{BASE_TAG}^{{commit}}")
    src = tree()
    scratch = Path(tempfile.mkdtemp(prefix=".repo.", dir=CACHE))
    started = time.monotonic()
    shutil.copytree(src, scratch, symlinks=True, dirs_exist_ok=True)
    sh("git", "init", "-q", cwd=scratch)
    # A repack of 1.2 GB would run (detached) after the commit and take minutes of CPU.
    sh("git", "config", "gc.auto", "0", cwd=scratch)
    config = scratch / "perflab.config"
    sh(*PERFLAB, "kernel", "config", "--tree", scratch, "-o", config, env=dict(os.environ, PYTHONPATH=str(HERE / "src")))
    # -f: the tarball's .gitignore ignores everything at the top (`/*`); nothing is built in this tree.
    sh("git", "add", "-A", "-f", cwd=scratch)
    sh("git", "commit", "-qm", "linux 6.1 (Debian linux-source-6.1) with perflab's minimal config", cwd=scratch,
       env=dict(os.environ, **IDENT))
    sh("git", "tag", BASE_TAG, cwd=scratch)
    sh("git", "checkout", "-q", "--detach", BASE_TAG, cwd=scratch)
    os.rename(scratch, REPO)
    print(f"repository {REPO}: the tree and perflab.config committed in {time.monotonic() - started:.0f} s")
    return git("rev-parse", f"{BASE_TAG}^{{commit}}")


def sys_c(base_text: str, i: int, args) -> tuple[str, str]:
    """kernel/sys.c at layout commit i (1..COMMITS-1) and the commit's subject."""
    text = base_text.replace("#include <linux/export.h>\n", f"#include <linux/export.h>\n/* step {i} */\n", 1)
    if i >= args.culprit:
        # File-scope volatile: each read is one load, with no stack frame or loop around it.
        reads = "".join("\t(void)perflab_bench;\n" for _ in range(args.extra))
        text = text.replace(GETPPID, "static volatile int perflab_bench;\n\n" + GETPPID + reads)
    if i == args.broken:
        text = text.replace(GETPPID, GETPPID + "\tthis does not build;\n")
    what = (f"getppid: {args.extra} more loads (the culprit)" if i == args.culprit else
            "kernel/sys.c: a syntax error (does not build)" if i == args.broken else
            "kernel/sys.c: a comment (neutral)")
    return text, f"{i}: {what}"


def layout(args) -> list[str]:
    """The layout's commits, oldest first (the base included): a branch on the base, made once."""
    base = base_repository()
    branch = f"bench-{args.commits}-{args.culprit}-{args.broken}-{args.extra}"
    if sh("git", "-C", REPO, "rev-parse", "-q", "--verify", f"refs/heads/{branch}", check=False).returncode == 0:
        return [base, *git("rev-list", "--reverse", f"{base}..{branch}").split()]
    started = time.monotonic()
    base_text = sh("git", "-C", REPO, "show", f"{base}:kernel/sys.c").stdout
    assert GETPPID in base_text, "getppid's definition not found in kernel/sys.c"
    fd, index = tempfile.mkstemp(prefix=".index.", dir=REPO / ".git")
    os.close(fd)
    env = dict(os.environ, GIT_INDEX_FILE=index, **IDENT)
    try:
        git("read-tree", base, env=env)
        shas = [base]
        for i in range(1, args.commits):
            text, subject = sys_c(base_text, i, args)
            blob = git("hash-object", "-w", "--stdin", "--path", "kernel/sys.c", stdin=text)
            git("update-index", "--cacheinfo", f"100644,{blob},kernel/sys.c", env=env)
            tree_id = git("write-tree", env=env)
            shas.append(git("commit-tree", tree_id, "-p", shas[-1], "-m", subject, env=env))
    finally:
        os.unlink(index)
    git("update-ref", f"refs/heads/{branch}", shas[-1])
    print(f"branch {branch} of {REPO}: {len(shas) - 1} commits on the base, made in {time.monotonic() - started:.1f} s")
    return shas


def cached_build(jobs: int) -> str:
    """The --build command that builds in the cache's tree, at the commit of perflab's worktree."""
    src, out = shlex.quote(str(BUILD_SRC)), shlex.quote(str(BUILD_OUT))
    return (f"set -e; git -C {src} checkout -q --force --detach \"$(git rev-parse HEAD)\"; "
            f"test -f {out}/.config || cp {src}/perflab.config {out}/.config; "
            f"make -C {src} O={out} -j{jobs} olddefconfig bzImage; "
            f'mkdir -p "$KBUILD_OUTPUT/arch/x86/boot"; cp {out}/arch/x86/boot/bzImage "$KBUILD_OUTPUT/arch/x86/boot/"')


def build_tree() -> None:
    """The cache's build tree: a worktree of the repository (kept; not one of perflab's) and O=."""
    if not (BUILD_SRC / ".git").exists():
        BUILD_SRC.parent.mkdir(parents=True, exist_ok=True)
        git("worktree", "add", "-q", "--detach", BUILD_SRC, BASE_TAG)
    BUILD_OUT.mkdir(parents=True, exist_ok=True)


def prebuild(good: str, jobs: int) -> None:
    """The good end's build in the cache's tree (niced: the first one is a full build)."""
    build_tree()
    started = time.monotonic()
    sh("git", "-C", BUILD_SRC, "checkout", "-q", "--force", "--detach", good)
    if not (BUILD_OUT / ".config").is_file():
        shutil.copy2(BUILD_SRC / "perflab.config", BUILD_OUT / ".config")
    done = subprocess.run(["nice", "-n", "10", "make", "-C", BUILD_SRC, f"O={BUILD_OUT}", f"-j{jobs}",
                           "olddefconfig", "bzImage"], stdout=subprocess.DEVNULL)
    print(f"prebuild of {good[:12]}: exit {done.returncode} after {time.monotonic() - started:.0f} s, "
          f"load average {os.getloadavg()[0]:.1f}")


class LoadSampler(threading.Thread):
    """The 1-minute load average every 10 s while the bisection runs."""

    def __init__(self):
        super().__init__(daemon=True)
        self.samples: list[float] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while True:
            self.samples.append(os.getloadavg()[0])
            if self.stop.wait(10):
                return

    def said(self) -> str:
        s = self.samples or [os.getloadavg()[0]]
        return f"min {min(s):.1f}, mean {sum(s) / len(s):.1f}, max {max(s):.1f} over {len(s)} samples"


def bisect_command(args, repo_shas: list[str], job: Path, db: Path) -> list[str]:
    build = (cached_build(args.jobs) if not args.fresh_build else
             f'test -f "$KBUILD_OUTPUT/.config" || cp perflab.config "$KBUILD_OUTPUT/.config"; '
             f"make -j{args.jobs} olddefconfig bzImage")
    return [*PERFLAB, "bisect", "--repo", REPO, "--good", repo_shas[0], "--bad", repo_shas[-1], "--build", build,
            "--kernel", "arch/x86/boot/bzImage", "--vm", "icount", "--job", job,
            "--metric", "will-it-scale.per_process_ops", "--threshold", str(args.threshold),
            "--pairing", "off", "--db", db]


def report(steps: list[tuple[float, str]], output: str, shas: list[str], args, total: float, load: str) -> None:
    names = {sha[:12]: i for i, sha in enumerate(shas)}
    print("\ntime split per boot (build, boot, boot+run; `at`: since the bisection started):")
    for at, line in steps:
        m = re.match(r"kernel ([0-9a-f]{12}):", line)
        print(f"  at {at:6.0f} s  [commit {names.get(m.group(1) if m else '', '?'):>2}] {line}")
    said = re.search(r"^ends: good \S+ -> bad \S+: .*n=(\d+)\+(\d+)", output, re.M)
    runs = [f"commit {names.get(sha, '?')}: {n}" for sha, n in re.findall(r"^step \d+: ([0-9a-f]{12}) .* after (\d+) run", output, re.M)]
    print("runs per measured commit: " + (f"good end {said.group(1)}, bad end {said.group(2)}; " if said else "")
          + ", ".join(runs) + " (a step's runs share one boot)")
    builds = [float(b) for b in re.findall(r"build ([\d.]+) s", "\n".join(line for _t, line in steps))]
    spent = sum(builds) + sum(float(b) for b in re.findall(r"boot\+run ([\d.]+) s", "\n".join(l for _t, l in steps)))
    if builds:
        later = sorted(builds[1:])
        print(f"builds: good end {builds[0]:.0f} s; later: "
              + (f"median {later[len(later) // 2]:.0f} s, max {later[-1]:.0f} s" if later else "none"))
    ends = {shas[0][:12], shas[-1][:12]}
    gaps = [b - a for (a, _x), (b, y) in zip(steps, steps[1:]) if y.split()[1].rstrip(":") not in ends]
    if gaps:
        print(f"wall time of a step (from the boot before): {', '.join(f'{g:.0f}' for g in gaps)} s "
              "(goal: a step under 20 s after the first build, issue 34; 60 s in issue 20)")
    found = re.search(r"^first bad commit: ([0-9a-f]{40})", output, re.M)
    want = shas[args.culprit]
    verdict = ("none named" if not found else "RIGHT" if found.group(1) == want else
               f"WRONG (named commit {names.get(found.group(1)[:12], '?')})")
    line = re.search(r"^runs: .*$", output, re.M)
    print(f"culprit: {verdict} (the culprit is commit {args.culprit}, {want[:12]}); "
          f"{line.group(0) if line else 'no runs line'}")
    print(f"total {total:.0f} s: builds and boot+runs {spent:.0f} s, the rest {total - spent:.0f} s (perflab's "
          f"worktrees of the tree made and removed, failed builds, git); 1-minute load average: {load}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--commits", type=int, default=20, help="commits in the layout, the base included")
    ap.add_argument("--culprit", type=int, default=13)
    ap.add_argument("--broken", type=int, default=9, help="the commit that does not build (9: git bisect's first midpoint of 20)")
    ap.add_argument("--extra", type=int, default=3, help="loads the culprit adds to getppid")
    ap.add_argument("--jobs", type=int, default=2, help="make -jN")
    ap.add_argument("--threshold", type=float, default=0.002, help="bisect --threshold")
    ap.add_argument("--setup-only", action="store_true")
    ap.add_argument("--prebuild", action="store_true", help="build the good end in the cache's tree and stop")
    ap.add_argument("--fresh-build", action="store_true", help="build in perflab's own build directory")
    ap.add_argument("--db", default=None)
    args = ap.parse_args()
    if not (0 < args.broken < args.commits - 1 and 0 < args.culprit < args.commits and args.broken + 1 != args.culprit
            and args.broken != args.culprit and args.extra > 0):
        sys.exit("--broken and --culprit: inside the range, the broken commit not at or right before the culprit; "
                 "--extra above 0")
    shas = layout(args)
    print(f"culprit {shas[args.culprit][:12]}, broken {shas[args.broken][:12]}, good {shas[0][:12]}, "
          f"bad {shas[-1][:12]}")
    if args.setup_only:
        return
    if args.prebuild:
        return prebuild(shas[0], args.jobs)
    if not args.fresh_build:
        build_tree()
    work = Path(tempfile.mkdtemp(prefix="perflab-kbench-"))
    job = work / "getppid.yaml"
    job.write_text("benchmark: will-it-scale\ntest: getppid1\nnr_task: 1\nruns: 1\nduration: 0.3\n"
                   "warmup_time: 0.1\ninterval: 0.1\n")
    cmd = bisect_command(args, shas, job, Path(args.db) if args.db else work / "perflab.db")
    load = LoadSampler()
    load.start()
    started = time.monotonic()
    proc = subprocess.Popen([str(c) for c in cmd], env=dict(os.environ, PYTHONPATH=str(HERE / "src")),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    steps, lines = [], []
    for line in proc.stdout:
        print(f"  | {line.rstrip()}", flush=True)
        lines.append(line)
        if line.startswith("kernel "):
            steps.append((time.monotonic() - started, line.strip()))
    proc.wait()
    total = time.monotonic() - started
    load.stop.set()
    print(f"\nbisect exited {proc.returncode} after {total:.0f} s")
    report(steps, "".join(lines), shas, args, total, load.said())
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

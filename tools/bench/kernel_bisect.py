#!/usr/bin/env python3
"""A real kernel bisection (issue 20): linux-source-6.1, a minimal config, `perflab bisect --vm icount`.

    python tools/bench/kernel_bisect.py [--commits 20] [--culprit 13] [--broken 6] [--loops 3] [--jobs 2]
    python tools/bench/kernel_bisect.py --setup-only      # the tree and the repository, no build

1. The kernel tree: /usr/src/linux-source-6.1.tar.xz (`apt-get install linux-source-6.1 flex bison
   libelf-dev`; installed here when absent and running as root) unpacked once into
   $XDG_CACHE_HOME/perflab/linux/linux-source-6.1.
2. A git repository of COMMITS commits on top of it (a copy, under the cache; made once per
   layout): the first adds `perflab kernel config`'s minimal config as perflab.config; the commit
   CULPRIT adds a short volatile loop of LOOPS iterations to getppid in kernel/sys.c (a few extra
   instructions: under 2% of the syscall's instruction-time); the commit BROKEN breaks the build
   (a syntax error in kernel/sys.c, fixed by the next commit); the others change a comment in
   kernel/sys.c (neutral, but every step recompiles it).
3. `perflab bisect --build 'cp perflab.config $KBUILD_OUTPUT/.config && make olddefconfig bzImage'
   --kernel arch/x86/boot/bzImage --vm icount` with will-it-scale getppid1 (1 task), one run per
   measured commit (the ends: 2 each), and the culprit found, the runs per measured commit and the
   time split per step (build, boot, boot+run: the Measurer's `kernel SHA: ...` lines) printed.

Goal (issue 20): under 1 minute per step after the first build, on a 2-core machine. Figures must
be taken on a quiet machine: a shared one makes builds and TCG slower by the load.
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

TARBALL = Path("/usr/src/linux-source-6.1.tar.xz")
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "perflab" / "linux"
SRC = CACHE / "linux-source-6.1"
HERE = Path(__file__).resolve().parents[2]
PERFLAB = [sys.executable, "-c", "import sys; from perflab.cli import entry; sys.argv[0] = 'perflab'; sys.exit(entry())"]
GETPPID = "SYSCALL_DEFINE0(getppid)\n{\n\tint pid;\n"


def sh(*args, cwd=None, env=None, check=True) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], cwd=cwd, env=env, check=check, capture_output=True, text=True)


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


def commit(repo: Path, message: str) -> str:
    # -f: the tarball's .gitignore ignores everything at the top (`/*`); nothing is built in this tree.
    sh("git", "add", "-A", "-f", cwd=repo)
    sh("git", "-c", "user.name=perflab bench", "-c", "user.email=bench@perflab", "commit", "-qm", message, cwd=repo)
    return sh("git", "rev-parse", "HEAD", cwd=repo).stdout.strip()


def repository(args) -> tuple[Path, list[str]]:
    """The bench's git repository (made once per layout): COMMITS commits on the 6.1 tree."""
    name = f"repo-{args.commits}-{args.culprit}-{args.broken}-{args.loops}"
    repo = CACHE / name
    if (repo / ".git").is_dir():
        shas = sh("git", "rev-list", "--reverse", "HEAD", cwd=repo).stdout.split()
        return repo, shas
    src = tree()
    scratch = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=CACHE))
    started = time.monotonic()
    shutil.copytree(src, scratch, symlinks=True, dirs_exist_ok=True)
    sh("git", "init", "-q", cwd=scratch)
    config = scratch / "perflab.config"
    sh(*PERFLAB, "kernel", "config", "--tree", scratch, "-o", config, env=dict(os.environ, PYTHONPATH=str(HERE / "src")))
    shas = [commit(scratch, "linux 6.1 (Debian linux-source-6.1) with perflab's minimal config")]
    sysc = scratch / "kernel" / "sys.c"
    base = sysc.read_text()
    assert GETPPID in base, "getppid's definition not found in kernel/sys.c"
    for i in range(1, args.commits):
        text = sysc.read_text().replace("/* perflab bench */\n", "")
        if i == args.culprit:
            text = text.replace(GETPPID, GETPPID + f"\tfor (volatile int perflab = 0; perflab < {args.loops}; perflab++)\n"
                                "\t\t;\n")
            what = f"getppid: {args.loops} extra loop iterations (the culprit)"
        elif i == args.broken:
            text = text.replace(GETPPID, GETPPID + "\tthis does not build;\n")
            what = "kernel/sys.c: a syntax error (does not build)"
        else:
            text = text.replace("\tthis does not build;\n", "")
            what = "kernel/sys.c: a comment (neutral)"
        sysc.write_text(text.replace("#include <linux/export.h>\n", f"#include <linux/export.h>\n/* step {i} */\n", 1)
                        if "/* step" not in text else re.sub(r"/\* step \d+ \*/", f"/* step {i} */", text))
        shas.append(commit(scratch, f"{i}: {what}"))
    os.rename(scratch, repo)
    print(f"repository {repo}: {len(shas)} commits, made in {time.monotonic() - started:.0f} s")
    return repo, shas


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--commits", type=int, default=20)
    ap.add_argument("--culprit", type=int, default=13)
    ap.add_argument("--broken", type=int, default=6)
    ap.add_argument("--loops", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2, help="make -jN")
    ap.add_argument("--setup-only", action="store_true")
    ap.add_argument("--db", default=None)
    args = ap.parse_args()
    if not (0 < args.broken < args.commits - 1 and 0 < args.culprit < args.commits and args.broken + 1 != args.culprit):
        sys.exit("--broken and --culprit: inside the range, the broken commit not right before the culprit")
    repo, shas = repository(args)
    print(f"culprit {shas[args.culprit][:12]}, broken {shas[args.broken][:12]}, good {shas[0][:12]}, "
          f"bad {shas[-1][:12]}")
    if args.setup_only:
        return
    work = Path(tempfile.mkdtemp(prefix="perflab-kbench-"))
    job = work / "getppid.yaml"
    job.write_text("benchmark: will-it-scale\ntest: getppid1\nnr_task: 1\nruns: 1\nduration: 0.3\n"
                   "warmup_time: 0.1\ninterval: 0.1\n")
    build = (f'cmp -s perflab.config "$KBUILD_OUTPUT/.config" || cp perflab.config "$KBUILD_OUTPUT/.config"; '
             f"make -j{args.jobs} olddefconfig bzImage")
    cmd = [*PERFLAB, "bisect", "--repo", repo, "--good", shas[0], "--bad", shas[-1], "--build", build,
           "--kernel", "arch/x86/boot/bzImage", "--vm", "icount", "--job", job,
           "--metric", "will-it-scale.per_process_ops", "--threshold", "0.002", "--pairing", "off",
           "--db", args.db or work / "perflab.db"]
    started = time.monotonic()
    proc = subprocess.Popen([str(c) for c in cmd], env=dict(os.environ, PYTHONPATH=str(HERE / "src")),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    steps = []
    for line in proc.stdout:
        print(f"  | {line.rstrip()}", flush=True)
        if line.startswith("kernel "):
            steps.append((time.monotonic() - started, line.strip()))
    proc.wait()
    total = time.monotonic() - started
    out = "\n".join(line for _t, line in steps)
    print(f"\nbisect exited {proc.returncode} after {total:.0f} s")
    print("time split per measured commit (build, boot, boot+run):")
    for at, line in steps:
        print(f"  at {at:6.0f} s  {line}")
    builds = [float(m) for m in re.findall(r"build ([\d.]+) s", out)]
    if builds:
        later = builds[1:]
        print(f"first build {builds[0]:.0f} s; later builds: "
              + (f"median {sorted(later)[len(later) // 2]:.0f} s, max {max(later):.0f} s (goal: a step under 60 s)"
                 if later else "none"))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""What the recipe cache's clone of a kernel tree costs (issue 45, R9), on linux-source-6.1.

    python tools/bench/kernel_clone.py [--repo PATH] [--checkout]

perflab's cache clones the user's tree once per tree (execution/vm/kbuild.py, Clone). The
`--shared` clone it made before borrowed the tree's objects (an alternates file): free, but a
`git gc --prune=now` in the tree took objects it needed. The clone made now owns its objects:
`git clone --no-checkout` of a local path hard-links them (no byte copied on one file system),
and copies them across file systems (`--no-hardlinks` measures that case). Prints, for each way,
the seconds and the bytes the clone adds on disk (blocks not shared with the tree by a hard
link); `--checkout` adds the first checkout of the commit (75,000 files, the same in all three).

--repo: a git repository of the tree; by default one is made in a temporary directory from
$XDG_CACHE_HOME/perflab/linux/linux-source-6.1 (tools/bench/kernel_bisect.py unpacks it), once.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "perflab" / "linux"
SRC = CACHE / "linux-source-6.1"


def git(*args: str, cwd: Path | None = None) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def repository(scratch: Path) -> Path:
    """linux-source-6.1 committed into a repository of its own (the source tree is read, not written)."""
    if not SRC.is_dir():
        sys.exit(f"{SRC} missing: python tools/bench/kernel_bisect.py unpacks linux-source-6.1 there")
    repo = scratch / "linux"
    git("init", "-q", str(repo))
    where = ["--git-dir", str(repo / ".git"), "--work-tree", str(SRC)]
    started = time.monotonic()
    git(*where, "add", "-f", "-A", ".")        # -f: Debian's .gitignore ignores the top level
    git(*where, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", "linux-source-6.1")
    git("-C", str(repo), "repack", "-q", "-a", "-d")
    print(f"repository made in {time.monotonic() - started:.0f} s")
    return repo


def one_more_commit(repo: Path, scratch: Path) -> str:
    """A commit on top of HEAD with one file changed, written without touching the tree's index or files."""
    def out(*args: str, **kw) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                              **kw).stdout.strip()

    env = dict(os.environ, GIT_INDEX_FILE=str(scratch / "index"))
    makefile = out("show", "HEAD:Makefile") + "\n# one more line\n"
    blob = out("hash-object", "-w", "--stdin", input=makefile)
    out("read-tree", "HEAD", env=env)
    out("update-index", "--cacheinfo", f"100644,{blob},Makefile", env=env)
    tree = out("write-tree", env=env)
    return out("-c", "user.name=t", "-c", "user.email=t@example.org", "commit-tree", tree, "-p", "HEAD", "-m", "one more")


def own_bytes(path: Path) -> int:
    """Bytes of the blocks of files under `path` that no other directory entry shares (hard links: 0)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            st = os.lstat(os.path.join(root, name))
            if st.st_nlink == 1:
                total += st.st_blocks * 512
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", help="a git repository of the kernel tree (default: made from linux-source-6.1)")
    ap.add_argument("--checkout", action="store_true", help="also time the first checkout of each clone")
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="perflab-clone-bench-"))
    try:
        repo = Path(args.repo).resolve() if args.repo else repository(scratch)
        tree_bytes = sum(f.stat().st_size for f in (repo / ".git" / "objects").rglob("*") if f.is_file())
        new_commit = one_more_commit(repo, scratch)
        print(f"tree {repo}: objects {tree_bytes / 2**20:.0f} MiB; load average {os.getloadavg()[0]:.2f}")
        for name, options in (("--shared (before: borrows the objects)", ["--shared"]),
                              ("hard links (now, one file system)", []),
                              ("copy (now, the cache on another file system)", ["--no-hardlinks"])):
            clone = scratch / "clone"
            started = time.monotonic()
            git("clone", "-q", "--no-checkout", *options, str(repo), str(clone))
            seconds = time.monotonic() - started
            line = f"{name:<48} clone {seconds:6.2f} s  adds {own_bytes(clone / '.git') / 2**20:7.1f} MiB"
            if not options:
                # A commit the clone lacks (one file changed), fetched as a build of a new ref does.
                started = time.monotonic()
                git("-C", str(clone), "fetch", "-q", "--no-tags", "--no-write-fetch-head", str(repo), new_commit)
                line += f"  fetch of a new commit {time.monotonic() - started:.2f} s"
            if args.checkout:
                started = time.monotonic()
                git("-C", str(clone), "checkout", "-q", "--detach", "HEAD")
                line += f"  checkout {time.monotonic() - started:6.1f} s"
            print(line)
            shutil.rmtree(clone)
        print(f"load average {os.getloadavg()[0]:.2f}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()

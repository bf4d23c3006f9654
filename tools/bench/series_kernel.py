#!/usr/bin/env python3
"""A posted kernel patch series against its base (issue 37): `perflab series` on linux-source-6.1.

    python tools/bench/series_kernel.py [--culprit 6] [--broken 4] [--extra 300] [--vm tcg] [--jobs 2]

The tree and its repository are tools/bench/kernel_bisect.py's (linux-source-6.1 with perflab's
minimal config, tagged perflab-base; its cached build tree builds incrementally). On the base, a
branch of 10 patches, written with git's plumbing (the defaults; --culprit and --broken move those):

  1  Documentation: a note (not built)          6  getppid: EXTRA reads of a volatile (the culprit)
  2  kernel/sys.c: a comment (neutral)          7  kernel/sys.c: a comment
  3  kernel/sys.c: cosmetic (a blank line)      8  Documentation: a note
  4  kernel/sys.c: a syntax error (no build)    9  kernel/sys.c: a comment
  5  kernel/sys.c: the syntax error fixed      10  kernel/sys.c: a comment

is mailed with `git format-patch --base --cover-letter` into one mailbox, and
`perflab series --kernel arch/x86/boot/bzImage --vm tcg` takes it with will-it-scale getppid1
(1 task) judged by per_process_ops under TCG, a timed metric that moves 8-10% between runs here.
Printed: the series' verdict, the patch named, the revert check, the kind of the change (the two
ends booted again under icount), where the mail went, the time split per step (the Measurer's
`kernel SHA: build, boot, boot+run` lines), each long step's duration (core/steps.py's end lines:
the builds' make, the boots, the revert and kind checks, the clean-up) and the load average seen.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kernel_bisect as kb  # noqa: E402  (the tree, the repository, the cached build tree, the load sampler)

NOTE = "Documentation/process/perflab-note.rst"


def patches(base_text: str, args) -> list[tuple[str, dict[str, str]]]:
    """(subject, {path: text}) of each patch, in order: the files as they are after it."""
    out = []
    text = base_text
    for i in range(1, 11):
        files: dict[str, str] = {}
        if i == args.broken:
            text = text.replace(kb.GETPPID, kb.GETPPID + "\tthis does not build;\n", 1)
            subject = "kernel/sys.c: a half-done change (does not build)"
        elif i == args.broken + 1:
            text = text.replace("\tthis does not build;\n", "", 1)
            subject = "kernel/sys.c: finish the change (builds again)"
        elif i == args.culprit:
            reads = "".join("\t(void)perflab_series;\n" for _ in range(args.extra))
            text = text.replace(kb.GETPPID, "static volatile int perflab_series;\n\n" + kb.GETPPID + reads, 1)
            subject = f"getppid: read a volatile {args.extra} times (adds instructions)"
        elif i == 3:
            # A local renamed: the same code, a different source line.
            text = text.replace("\tpid = task_tgid_vnr(rcu_dereference(current->real_parent));\n\trcu_read_unlock();"
                                "\n\n\treturn pid;", "\tpid = task_tgid_vnr(rcu_dereference(current->real_parent));"
                                "\n\trcu_read_unlock();\n\treturn pid;", 1)
            subject = "kernel/sys.c: getppid without the blank line (cosmetic)"
        elif i in (1, 8):
            files[NOTE] = f"perflab note {i}\n"
            subject = f"Documentation: a note ({i})"
        else:
            text = text.replace("#include <linux/export.h>\n", f"#include <linux/export.h>\n/* series {i} */\n", 1)
            subject = f"kernel/sys.c: a comment ({i})"
        if not files:
            files["kernel/sys.c"] = text
        out.append((subject, files))
    return out


def branch(base: str, args) -> str:
    """The series' branch on the base (made once); its head."""
    name = f"series-{args.culprit}-{args.broken}-{args.extra}"
    if subprocess.run(["git", "-C", kb.REPO, "rev-parse", "-q", "--verify", f"refs/heads/{name}"],
                      capture_output=True).returncode == 0:
        return name
    base_text = kb.sh("git", "-C", kb.REPO, "show", f"{base}:kernel/sys.c").stdout
    fd, index = tempfile.mkstemp(prefix=".index.", dir=kb.REPO / ".git")
    os.close(fd)
    env = dict(os.environ, GIT_INDEX_FILE=index, **kb.IDENT)
    try:
        kb.git("read-tree", base, env=env)
        head = base
        for subject, files in patches(base_text, args):
            for path, text in files.items():
                blob = kb.git("hash-object", "-w", "--stdin", "--path", path, stdin=text)
                kb.git("update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=env)
            head = kb.git("commit-tree", kb.git("write-tree", env=env), "-p", head, "-m", subject, env=env)
    finally:
        os.unlink(index)
    kb.git("update-ref", f"refs/heads/{name}", head)
    return name


def build_command(jobs: int) -> str:
    """kernel_bisect's cached build, the commit fetched first from perflab's clone (the series' commits
    are there, not in the bench's repository)."""
    # System.map too: the minimal config has no kallsyms, and insn-profile names the counts by it.
    return (f'git -C {shlex.quote(str(kb.BUILD_SRC))} fetch -q "$(git rev-parse --show-toplevel)" '
            f'"$(git rev-parse HEAD)"; ' + kb.cached_build(jobs)
            + f'; cp {shlex.quote(str(kb.BUILD_OUT))}/System.map "$KBUILD_OUTPUT/"')


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--culprit", type=int, default=6)
    ap.add_argument("--broken", type=int, default=4)
    ap.add_argument("--extra", type=int, default=300, help="volatile reads the culprit adds to getppid")
    ap.add_argument("--vm", default="tcg", choices=("tcg", "kvm", "icount"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--db", default=None)
    args = ap.parse_args()
    if not (1 <= args.broken < 10 and args.culprit not in (3, args.broken, args.broken + 1) and 1 <= args.culprit <= 10):
        sys.exit("--broken 1..9, and --culprit 1..10 not 3 (the cosmetic patch), the broken patch or its fix")
    base = kb.base_repository()
    name = branch(base, args)
    kb.build_tree()
    work = Path(tempfile.mkdtemp(prefix="perflab-series-bench-"))
    kb.sh("git", "-C", kb.REPO, "format-patch", "-q", "--base", base, "--cover-letter", "-o", work / "mails",
          f"{base}..{name}")
    mbox = work / "series.mbox"
    mbox.write_text("".join(p.read_text() for p in sorted((work / "mails").glob("*.patch"))))
    job = work / "getppid.yaml"
    job.write_text("benchmark: will-it-scale\ntest: getppid1\nnr_task: 1\nruns: 1\nduration: 0.3\n"
                   "warmup_time: 0.1\ninterval: 0.1\n")
    mail = work / "report.txt"
    cmd = [*kb.PERFLAB, "series", "--repo", kb.REPO, "--mbox", mbox, "--job", job, "--build", build_command(args.jobs),
           "--kernel", "arch/x86/boot/bzImage", "--vm", args.vm, "--metric", "will-it-scale.per_process_ops",
           "--out", mail, "--db", args.db or work / "perflab.db"]
    load = kb.LoadSampler()
    load.start()
    started = time.monotonic()
    proc = subprocess.Popen([str(c) for c in cmd], env=dict(os.environ, PYTHONPATH=str(kb.HERE / "src")),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    phases, lines, last = [], [], started
    for line in proc.stdout:
        print(f"  | {line.rstrip()}", flush=True)
        lines.append(line)
        if re.match(r"(ends:|step \d+:|confirmation:|revert check:|the kind of the change|kind of change:|"
                    r"\d+ patches applied)", line):
            now = time.monotonic()
            phases.append((now - last, line.strip()[:100]))
            last = now
    proc.wait()
    total = time.monotonic() - started
    load.stop.set()
    out = "".join(lines)
    print(f"\nperflab series exited {proc.returncode} after {total:.0f} s; load average {load.said()}")
    print("time per phase (seconds since the previous line):")
    for seconds, line in phases:
        print(f"  {seconds:6.0f} s  {line}")
    # The long steps' end lines (core/steps.py: those of 2 s or more, off a terminal): what each wait was.
    ended = re.findall(r"^(.+): (done in|failed after|interrupted after) (.+)$", out, re.M)
    if ended:
        print("long steps (their end lines):")
        for label, how, took in ended:
            print(f"  {took:>12}  {label[:100]}" + ("" if how == "done in" else f" ({how.split()[0]})"))
    builds = [float(b) for b in re.findall(r"kernel [0-9a-f]{12}: build ([\d.]+) s", out)]
    boots = re.findall(r"boot\+run ([\d.]+) s", out)
    print(f"builds: {len(builds)} ({', '.join(f'{b:.0f}' for b in builds)} s); boots: {len(boots)}")
    named = re.search(r"^the patch: (.*)$", out, re.M)
    want = f"[PATCH {args.culprit:02d}/10]"     # format-patch pads the number to the total's width
    print(f"culprit: {'RIGHT' if named and named.group(1).startswith(want) else 'WRONG'} "
          f"({named.group(1) if named else 'none named'}; the culprit is {want})")
    for key in ("revert check:", "kind of change:"):
        found = re.findall(rf"^{key} (.*)$", out, re.M)     # the last: the result, after the progress lines
        print(f"{key} {found[-1] if found else 'not said'}")
    if mail.is_file():
        print(f"mail: {mail}\n" + "".join(f"  > {line}\n" for line in mail.read_text().splitlines()[:40]))


if __name__ == "__main__":
    main()

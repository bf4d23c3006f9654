#!/usr/bin/env python3
"""insn-profile under a marker flood (issue 45, G8): the host's memory and TMPDIR use.

    tools/bench/insn_marker_flood.py [--windows 300000] [--runs 1] [--against COMMIT]

Runs, from this tree (and from COMMIT's, in a temporary worktree, when given):

    perflab run cmd --runs 1 --kernel K --vm icount --monitor insn-profile -- marker_flood 300000

where marker_flood is a static C program that runs the end and start markers of perflab's
instruction-counting plugin (vm/c/insns.c) N times, a getppid in each window, and K the
cached Debian 6.1.0-47 kernel. perflab runs with a TMPDIR of its own; printed per tree:
the peak of perflab's own resident set (VmHWM, read from /proc while it runs), the peak
resident set of wait4's rusage (what /usr/bin/time -v prints: the largest of perflab and
the QEMU it waited for), the largest TMPDIR seen (sampled every 0.2 s) and the wall time.
The limit to meet: TMPDIR at most counting.WINDOW_FILE_LIMIT plus one window, perflab's
memory independent of the number of windows.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from perflab.execution.vm import kernel as kernels  # noqa: E402

FLOOD_C = (Path(__file__).resolve().parent / "marker_flood.c").read_text()   # the flooding guest program


def disk_use(top: Path) -> int:
    total = 0
    for base, _, files in os.walk(top):
        for name in files:
            try:
                total += os.lstat(os.path.join(base, name)).st_blocks * 512
            except OSError:
                pass
    return total


def measure(tree: Path, work: Path, kernel: str, flood: Path, windows: int, runs: int) -> dict:
    tmp = work / f"tmp-{tree.name}"
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PERFLAB_") and k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(tree / "src"), TMPDIR=str(tmp), PERFLAB_DB=str(work / f"{tree.name}.db"),
               PERFLAB_VM_BOOT_TIMEOUT="600")
    argv = [sys.executable, "-c", "from perflab.cli import entry; entry()", "run", "cmd", "--runs", str(runs),
            "--kernel", kernel,
            "--vm", "icount", "--monitor", "insn-profile", "--", str(flood), str(windows)]
    started = time.monotonic()
    err_file = work / f"{tree.name}.err"
    with open(err_file, "wb") as err:
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=err)
    peaks = {"hwm_kib": 0, "tmp": 0}
    done = threading.Event()

    def sample():
        while not done.wait(0.2):
            peaks["tmp"] = max(peaks["tmp"], disk_use(tmp))
            try:
                for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        peaks["hwm_kib"] = max(peaks["hwm_kib"], int(line.split()[1]))
            except OSError:
                pass

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, status, usage = os.wait4(proc.pid, 0)      # rusage: what /usr/bin/time -v reports
    proc.returncode = os.waitstatus_to_exitcode(status)
    done.set()
    sampler.join()
    return {"rc": proc.returncode, "wall": time.monotonic() - started, "hwm_mib": peaks["hwm_kib"] / 1024,
            "tmp_mib": peaks["tmp"] / 2**20, "maxrss_mib": usage.ru_maxrss / 1024,
            "stderr": err_file.read_text(errors="replace").strip().splitlines()[-3:]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--windows", type=int, default=300000)
    parser.add_argument("--runs", type=int, default=1, help="repetitions (one flood each)")
    parser.add_argument("--against", help="an earlier tree's commit to measure first")
    args = parser.parse_args()
    kernel = str(kernels.cached())
    # Not under /tmp: the guest mounts its own /tmp over the host's, where the program would be hidden.
    work = Path(tempfile.mkdtemp(prefix=".perflab-marker-flood-", dir=Path.home()))
    (work / "marker_flood.c").write_text(FLOOD_C)
    flood = work / "marker_flood"
    subprocess.run(["cc", "-O2", "-static", "-o", str(flood), str(work / "marker_flood.c")], check=True)
    trees = [ROOT]
    if args.against:
        before = work / "before"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(before), args.against],
                       check=True, capture_output=True)
        trees.insert(0, before)
    try:
        for tree in trees:
            load = os.getloadavg()[0]
            r = measure(tree, work, kernel, flood, args.windows, args.runs)
            print(f"{tree}: {args.windows:,} windows x {args.runs} run(s): exit {r['rc']}, perflab VmHWM {r['hwm_mib']:.0f} MiB, "
                  f"wait4 maxrss {r['maxrss_mib']:.0f} MiB, TMPDIR peak {r['tmp_mib']:.1f} MiB, {r['wall']:.0f} s wall "
                  f"(load {load:.1f})")
            for line in r["stderr"]:
                print(f"    {line}")
    finally:
        if args.against:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(work / "before")],
                           capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

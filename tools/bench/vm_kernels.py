#!/usr/bin/env python3
"""Two Debian kernels under icount, compared by perflab; and what the guest path costs (issue 20).

1. The two kernels of tools/fetch_kernel.py --both (6.1.0-47: 6.1.170; 6.1.0-50: 6.1.176),
   each booted --boots times (default 3) in `mode: icount` (instruction-time) for each of:
   lmbench's null call (syscall.null) and page fault (vm.page_fault), and will-it-scale
   getppid1 and page_fault1 with 1 task. Printed per kernel and metric: each boot's
   figure (the minimum of its samples) and the spread across boots, in %.
2. `perflab compare kernel=6.1.0-47-amd64 kernel=6.1.0-50-amd64` on those runs, as it prints.
3. The guest path's overhead against a host run of the same job, in TCG (KVM cannot boot
   guests on the machine this was written on: `mode: kvm` is refused there in one line):
   `cmd true` x 10 and will-it-scale getppid1 (1 task), on the host and in the guest:
   the whole command's wall time, the boot, and the figures side by side.

    tools/bench/vm_kernels.py                # 3 boots per kernel and job: ~20 boots, 10-20 minutes
    tools/bench/vm_kernels.py --tiny         # 1 boot each, tiny lmbench: checks that it all works

Figures worth quoting need a quiet machine (`uptime`): boots and TCG are host CPU time.
instruction-time figures (part 1) do not depend on the load; wall times (part 3) do.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from perflab.execution.vm import kernel  # noqa: E402

KERNELS = (kernel.DEFAULT_PACKAGE, kernel.OTHER_PACKAGE)
LMBENCH = ("syscall.null", "vm.page_fault")
WIS = ("getppid1", "page_fault1")
WIS_METRIC = "will-it-scale.per_process_ops"


def perflab(db: Path, *args, env: dict | None = None) -> tuple[float, str]:
    """Run the perflab CLI of this checkout; (wall seconds, stdout). Exits on failure."""
    command = [sys.executable, "-c", "import sys; from perflab.cli import entry; sys.argv[0] = 'perflab'; "
               "sys.exit(entry())", *map(str, args)]
    environ = dict(os.environ, PERFLAB_DB=str(db), **(env or {}))
    environ["PYTHONPATH"] = str(Path(__file__).resolve().parents[2] / "src")
    began = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, env=environ)
    if done.returncode != 0:
        sys.exit(f"vm_kernels: perflab {' '.join(map(str, args))} failed:\n{done.stderr.strip()}")
    return time.monotonic() - began, done.stdout


def minima(db: Path, metric: str, release: str, name_like: str = "%") -> list[float]:
    """Per run (one boot) of that kernel: the minimum of its samples of `metric`."""
    with sqlite3.connect(db) as con:
        rows = con.execute(
            "SELECT r.id, min(s.value) FROM run r JOIN sample s ON s.run_id = r.id "
            "JOIN environment e ON e.id = r.environment_id WHERE s.metric = ? AND r.name LIKE ? "
            "AND json_extract(e.facts, '$.kernel_release') = ? GROUP BY r.id ORDER BY r.id",
            (metric, name_like, release)).fetchall()
    return [v for _, v in rows]


def facts(db: Path, run_id: int) -> dict:
    with sqlite3.connect(db) as con:
        (text,), = con.execute("SELECT e.facts FROM run r JOIN environment e ON e.id = r.environment_id "
                               "WHERE r.id = ?", (run_id,)).fetchall()
    return json.loads(text)


def last_run(db: Path) -> int:
    with sqlite3.connect(db) as con:
        return con.execute("SELECT max(id) FROM run").fetchone()[0]


def spread(values: list[float]) -> str:
    if len(values) < 2:
        return "-"
    return f"{(max(values) - min(values)) / min(values) * 100:.4f}%"


def part1(db: Path, images: dict[str, Path], boots: int, tiny: bool) -> None:
    lm_env = {"PERFLAB_LMBENCH_TINY": "1"} if tiny else {}
    duration = ["--duration", "0.3", "--runs", "1"] if tiny else ["--duration", "2", "--runs", "3"]
    for release, image in images.items():
        for boot in range(boots):
            seconds, _ = perflab(db, "run", "lmbench", "--only", "processes,filevm", "--kernel", image,
                                 "--vm", "icount", env=lm_env)
            print(f"  {release} boot {boot + 1}: lmbench processes,filevm in {seconds:.1f} s", flush=True)
            for test in WIS:
                seconds, _ = perflab(db, "run", "will-it-scale", "--test", test, "--nr-task", "1", *duration,
                                     "--kernel", image, "--vm", "icount")
                print(f"  {release} boot {boot + 1}: will-it-scale {test} in {seconds:.1f} s", flush=True)
    print("\nPer kernel, per boot (minimum of the boot's samples), icount:")
    print(f"  {'figure':<34} {'kernel':<16} {'boots':<50} spread")
    for release in images:
        rows = [(m, minima(db, m, release, "lmbench%")) for m in LMBENCH]
        rows += [(f"{WIS_METRIC} {t}", minima(db, WIS_METRIC, release, f"%{t}%")) for t in WIS]
        for name, values in rows:
            shown = " ".join(f"{v:.6g}" for v in values)
            print(f"  {name:<34} {release:<16} {shown:<50} {spread(values)}")


def part3(db: Path, image: Path, tiny: bool) -> None:
    runs = "3" if tiny else "10"
    wis = ["--duration", "0.3", "--runs", "1"] if tiny else ["--duration", "2", "--runs", "3"]
    print("\nGuest path against the host, mode tcg (KVM cannot boot guests here), same jobs:")
    for label, job in (("cmd true", ["cmd", "--runs", runs, "--", "true"]),
                       ("will-it-scale getppid1 x1", ["will-it-scale", "--test", "getppid1", "--nr-task", "1", *wis])):
        host_s, _ = perflab(db, "run", *job)
        host_id = last_run(db)
        cut = job.index("--") if "--" in job else len(job)     # options before cmd's command
        guest_s, _ = perflab(db, "run", *job[:cut], "--kernel", image, "--vm", "tcg", *job[cut:])
        guest_id = last_run(db)
        boot = float(facts(db, guest_id).get("vm_boot_seconds", "nan"))
        metric = "time.elapsed_time" if job[0] == "cmd" else WIS_METRIC
        with sqlite3.connect(db) as con:
            mean = {rid: con.execute("SELECT avg(value) FROM sample WHERE run_id = ? AND metric = ?",
                                     (rid, metric)).fetchone()[0] for rid in (host_id, guest_id)}
        print(f"  {label}: command {host_s:.1f} s on the host, {guest_s:.1f} s in the guest "
              f"(boot {boot:.1f} s, so {guest_s - boot - host_s:+.1f} s besides the boot)")
        print(f"    {metric}: host {mean[host_id]:.6g}, guest {mean[guest_id]:.6g} "
              f"(guest/host {mean[guest_id] / mean[host_id]:.2f}: TCG emulation, not only the path)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boots", type=int, default=3, help="boots per kernel and job (default 3)")
    parser.add_argument("--tiny", action="store_true", help="1 boot each, tiny sizes: a check that it works")
    parser.add_argument("--db", help="store to write (default: a fresh one in a temporary directory)")
    args = parser.parse_args()
    boots = 1 if args.tiny else args.boots
    images = {}
    for package in KERNELS:
        image = kernel.fetch(package)
        images[image.name.removeprefix("vmlinuz-")] = image
    with tempfile.TemporaryDirectory(prefix="perflab-vm-kernels-") as tmp:
        db = Path(args.db) if args.db else Path(tmp) / "vm_kernels.db"
        print(f"load average: {os.getloadavg()[0]:.1f} (quote figures taken on a quiet machine)")
        print(f"Part 1: {', '.join(images)} in icount, {boots} boot(s) each", flush=True)
        part1(db, images, boots, args.tiny)
        releases = list(images)
        print(f"\nPart 2: perflab compare kernel={releases[0]} kernel={releases[1]}\n")
        _, out = perflab(db, "compare", f"kernel={releases[0]}", f"kernel={releases[1]}")
        print(out)
        part3(db, images[releases[0]], args.tiny)
    return 0


if __name__ == "__main__":
    sys.exit(main())

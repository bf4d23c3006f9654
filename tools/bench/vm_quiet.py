#!/usr/bin/env python3
"""Is the guest quiet before the first sample? getppid timed right after boot, with and without
the agent's wait for a quiet kernel (issue 33, item 0).

Each kernel is booted under icount (instruction-time: the figures do not depend on the host's
load) --boots times as perflab boots a job's guest (with the `settle` setup line) and as it did
before (without), and a static program times five rounds of 200,000 getppid() right after
boot. Printed per boot: the five rounds in ns per call, the first round's distance from the
fifth (the target: within the 0.2% EXACT_LIMIT), and what the wait took in guest time.

    tools/bench/vm_quiet.py                                   # 6.12.107 and 6.1.0-47, 2 boots each
    tools/bench/vm_quiet.py --package linux-image-6.12.117+deb12-amd64-unsigned --boots 3

Debian 6.12.107 is the kernel that showed it: 660-680 ns for about a second of guest time
after every boot, then 336 ns.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from perflab.core.process import ProcessSpec  # noqa: E402
from perflab.execution.targets.qemu import SETTLE  # noqa: E402
from perflab.execution.vm import VmSpec, boot, initramfs, kernel  # noqa: E402

PACKAGES = ("linux-image-6.12.107+deb12-amd64-unsigned", kernel.DEFAULT_PACKAGE)
EXACT_LIMIT = 0.002


def rounds(image: Path, program: Path, settle: bool) -> tuple[list[float], dict]:
    setup = ["settle {ppm} {max_ms} {calls} {agree}".format(**SETTLE)] if settle else []
    with boot(VmSpec(kernel=image, mode="icount", boot_timeout=600), files={"/opt/getppid_rounds": program},
              setup=setup) as guest:
        done = guest.execute(ProcessSpec(["/opt/getppid_rounds"], capture_stdout=True, timeout=900))
        if not done.ok:
            raise SystemExit(f"getppid_rounds failed in the guest: {done.describe_failure(200)}")
        return [float(x) for x in done.stdout.split()], guest.facts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", action="append", help="Debian kernel package (repeatable)")
    parser.add_argument("--boots", type=int, default=2)
    args = parser.parse_args()
    program = initramfs.build_static("getppid_rounds", Path(__file__).parent / "c")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {args.boots} boots per kernel and way")
    failed = 0
    for package in args.package or PACKAGES:
        image = kernel.fetch(package)
        for settle in (False, True):
            for boot_no in range(args.boots):
                began = time.monotonic()
                figures, facts = rounds(image, program, settle)
                off = figures[0] / figures[-1] - 1
                ok = abs(off) <= EXACT_LIMIT
                failed += settle and not ok
                print(f"{image.name:32} {'settle' if settle else 'no wait':7} boot {boot_no + 1}: "
                      f"{' '.join(f'{x:8.2f}' for x in figures)} ns; first/fifth {off:+.3%} "
                      f"{'ok' if ok else 'OFF'}; {facts.get('vm_settle', 'no wait')}; "
                      f"{time.monotonic() - began:.1f} s host")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""perflab's fio figures equal fio's own JSON; and fio through perflab reads as fio alone.

Target (issue 10): "fio figures equal fio's own JSON".

1. Equality. For every rw mode, on the temporary directory and on a fresh
   filesystem (`--fs`, default xfs in RAM), the fio family's session builds the
   command and the runner's executor starts it (the path `perflab run fio` takes);
   the samples its parser makes are compared with the figures read here, by hand,
   from the same JSON document: bw_bytes / 2^20, iops, clat_ns mean / 1000,
   clat_ns percentile 99 / 1000, usr_cpu, sys_cpu. Printed: the number of figures
   compared and the largest relative difference (target: 0).

2. Side by side. The same fio command run directly (subprocess) and through
   perflab's launcher, alternating, `--rounds` times: the median bandwidth of each
   and the ratio perflab/direct (target: 1 within the run-to-run spread, printed
   as the CoV of the direct runs).

    .venv/bin/python tools/bench/fio_equal.py [--fs xfs|ext4|btrfs|tmpfs|none] [--fs-size 1G]
        [--size 64M] [--runtime 2] [--numjobs 1] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from perflab.benchmarks import fio
from perflab.execution import executor

MODES = ("read", "write", "randread", "randwrite", "rw", "randrw")


def by_hand(doc: dict, rw: str) -> dict[str, float]:
    job = doc["jobs"][0]
    out = {"fio.usr_cpu": job["usr_cpu"], "fio.sys_cpu": job["sys_cpu"]}
    for d in ("read", "write"):
        if (d == "read" and rw in ("read", "randread", "rw", "randrw")) or (
                d == "write" and rw in ("write", "randwrite", "rw", "randrw")):
            part = job[d]
            out[f"fio.{d}_bw_MBps"] = part["bw_bytes"] / 1048576
            out[f"fio.{d}_iops"] = part["iops"]
            out[f"fio.{d}_clat_mean_us"] = part["clat_ns"]["mean"] / 1000
            out[f"fio.{d}_clat_p99_us"] = part["clat_ns"]["percentile"]["99.000000"] / 1000
    return out


def bandwidth(doc: dict) -> float:
    job = doc["jobs"][0]
    return (job["read"]["bw_bytes"] + job["write"]["bw_bytes"]) / 1048576


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fs", default="xfs")
    ap.add_argument("--fs-size", default="1G")
    ap.add_argument("--size", default="64M")
    ap.add_argument("--runtime", type=float, default=2.0)
    ap.add_argument("--numjobs", default="1")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    a.numjobs = int(a.numjobs) if a.numjobs.isdigit() else a.numjobs

    places = [{}] + ([] if a.fs == "none" else [{"fs": a.fs, "fs_size": a.fs_size}])
    compared, worst = 0, 0.0
    for place in places:
        for rw in MODES:
            params = fio.FAMILY.parse_params({"rw": rw, "size": a.size, "runtime": a.runtime,
                                              "numjobs": a.numjobs, **place})
            with fio.FAMILY.session(params, {"runs": 1}) as session:
                (spec,) = session.processes(0)
                result = executor.execute(spec)
                if not result.ok:
                    sys.exit(f"fio_equal: {spec.item} failed: {result.describe_failure(spec.timeout)}")
                ours = {s.metric: s.value for s in session.parse(spec, result)}
            theirs = by_hand(json.loads(result.stdout[result.stdout.index("{"):]), rw)
            if set(ours) != set(theirs):
                sys.exit(f"fio_equal: {rw}: metrics differ: {sorted(set(ours) ^ set(theirs))}")
            for name, value in theirs.items():
                compared += 1
                diff = abs(ours[name] - value) / abs(value) if value else abs(ours[name])
                worst = max(worst, diff)
            where = place.get("fs", "temporary directory")
            print(f"{rw:10s} on {where:20s} {len(theirs):2d} figures, "
                  f"bw {sum(v for k, v in ours.items() if k.endswith('bw_MBps')):9.1f} MiB/s")
    print(f"equality: {compared} figures compared, largest relative difference {worst:.3g} (target 0)")

    # Side by side: the same command directly and through perflab's launcher, alternating.
    params = fio.FAMILY.parse_params({"rw": "read", "size": a.size, "runtime": a.runtime, "numjobs": a.numjobs,
                                      **places[-1]})
    direct, through = [], []
    with fio.FAMILY.session(params, {"runs": a.rounds}) as session:
        (spec,) = session.processes(0)
        for r in range(a.rounds):
            for way in ((0, 1) if r % 2 == 0 else (1, 0)):
                if way == 0:
                    proc = subprocess.run(spec.argv, capture_output=True, text=True, cwd=spec.cwd)
                    direct.append(bandwidth(json.loads(proc.stdout[proc.stdout.index("{"):])))
                else:
                    result = executor.execute(spec)
                    through.append(bandwidth(json.loads(result.stdout[result.stdout.index("{"):])))
    d, t = statistics.median(direct), statistics.median(through)
    cov = statistics.stdev(direct) / statistics.mean(direct) if len(direct) > 1 else float("nan")
    print(f"side by side ({places[-1].get('fs', 'temporary directory')}, rw=read, {a.rounds} rounds, "
          f"{os.cpu_count()} CPUs): direct {d:.1f} MiB/s, through perflab {t:.1f} MiB/s, "
          f"ratio {t / d:.3f} (direct CoV {cov * 100:.1f}%)")


if __name__ == "__main__":
    main()

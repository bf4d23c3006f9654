"""Stored LMbench runs with known values (from the 2003 reference summary), for layout tests."""

from __future__ import annotations

import json
import uuid

from perflab.benchmarks.lmbench.catalog import FIGURES

# kernel label -> figures (a subset; the rest of each table stays blank)
KERNELS = {
    ("2.6.0-test3", None): {
        "syscall.null": 0.73, "syscall.null_io": 1.20351, "syscall.stat": 5.89, "syscall.fstat": 1.60,
        "syscall.open_close": 7.07, "signal.install": 1.99, "signal.handle": 5.04, "proc.fork": 1426,
        "proc.exec": 3272, "proc.sh": 13618, "select.fd10": 4.11, "select.tcp500": 156.960,
        "ctx.2p_0k": 1.87, "ctx.96p_64k": 270.87, "fs.create_0k": 157.4, "vm.mmap": 4281, "vm.prot_fault": 0.11,
        "lat.pipe": 23.91, "lat.tcp_connect": 379.17, "bw.pipe": 52.7, "bw.mem_write": 86.0, "bw.bzero": 232.6,
        "mem.mhz": 476, "mem.l1": 4.25, "mem.l2": 232.06, "mem.main": 268.3,
    },
    ("2.6.0-test3", "gcc-3.3.1"): {
        "syscall.null": 0.74, "syscall.null_io": 1.08099, "syscall.stat": 4.15, "syscall.fstat": 1.56,
        "syscall.open_close": 6.73, "signal.install": 2.02, "signal.handle": 4.28, "proc.fork": 1397,
        "proc.exec": 3146, "proc.sh": 13238, "select.fd10": 4.62,
        "ctx.2p_0k": 2.34, "fs.create_0k": 152.9, "vm.mmap": 3884, "vm.prot_fault": 0.90,
        "lat.pipe": 18.16, "bw.pipe": 55.8, "bw.mem_write": 86.2,
        "mem.mhz": 476, "mem.l1": 4.25, "mem.l2": 231.13, "mem.main": 268.2,
    },
}


def export_document() -> dict:
    runs = []
    for (kernel, tag), figures in KERNELS.items():
        samples = []
        for metric, value in figures.items():
            f = FIGURES[metric]
            # Three samples whose mean is the reference value.
            for rep, factor in enumerate((0.99, 1.0, 1.01)):
                samples.append([metric, value * factor, f.unit, f.direction, rep])
        runs.append({
            "uuid": str(uuid.uuid4()), "testbox": "k6-2", "benchmark": "lmbench", "name": "lmbench",
            "params": {"quick": True}, "tag": tag, "commit": None, "dirty": None,
            "started": "2003-08-31T10:00:00", "finished": "2003-08-31T10:30:00", "status": "partial",
            "comment": None, "error": None,
            "environment": {"testbox": "k6-2", "kernel_release": kernel, "cpu_model": "AMD K6-2"},
            "failures": [["lat_ipc", "lat_ipc: UDP: connection refused"]] if tag else [], "samples": samples,
        })
    return {"format": "perflab-export", "version": 1, "runs": runs}


def load(cli, tmp_path) -> None:
    path = tmp_path / "lmbench-fixture.json"
    path.write_text(json.dumps(export_document()))
    cli("import", path)

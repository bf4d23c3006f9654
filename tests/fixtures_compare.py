"""A stored fixture for comparison tests: known samples imported through `perflab import`."""

from __future__ import annotations

import json
import uuid

ENV = {"testbox": "lkp-box", "kernel_release": "6.8.0", "cc_version": "gcc 12.2.0", "cpufreq_governor": "performance",
       "thp_enabled": "always", "arch": "x86_64", "cpu_model": "Test CPU"}

# metric -> (unit, direction, base values, head values)
METRICS = {
    "bench.latency_us": ("us", -1, [10.0, 10.1, 9.9, 10.05, 9.95, 10.02, 9.98, 10.0], [11.0, 11.1, 10.9, 11.05, 10.95, 11.02, 10.98, 11.0]),
    "bench.ops_per_sec": ("ops/s", 1, [1000, 1010, 990, 1005, 995, 1002, 998, 1000], [1200, 1212, 1188, 1206, 1194, 1202, 1198, 1200]),
    "bench.steady_us": ("us", -1, [5.0, 5.1, 4.9, 5.05, 4.95, 5.02, 4.98, 5.0], [5.01, 5.09, 4.91, 5.04, 4.96, 5.02, 4.99, 5.0]),
    "bench.noisy_us": ("us", -1, [5.0, 6.0, 4.0, 5.5, 4.5, 5.2, 4.8, 5.0], [5.2, 6.1, 4.3, 5.6, 4.6, 5.4, 5.0, 5.1]),
}
ONLY_BASE = ("bench.gone_us", "us", -1, [1.0, 1.1, 0.9])
ONLY_HEAD = ("bench.new_us", "us", -1, [2.0, 2.1, 1.9])


def _run(tag, commit, samples, box="lkp-box", kernel="6.8.0"):
    return {
        "uuid": str(uuid.uuid4()), "testbox": box, "benchmark": "bench", "name": "bench",
        "params": {"mode": "process", "nr_task": "100%"}, "tag": tag, "commit": commit, "dirty": False,
        "started": "2026-11-01T10:00:00", "finished": "2026-11-01T10:05:00", "status": "finished",
        "comment": None, "error": None, "environment": {**ENV, "testbox": box, "kernel_release": kernel},
        "failures": [], "samples": samples,
    }


def export_document(box_head="lkp-box") -> dict:
    """Two runs per side (repetitions 0-3 each), so that samples come from several runs."""
    runs = []
    for side, tag, commit in ((2, "base", "d55f34411b1b126429a823d06c3124c16283231f"),
                              (3, "head", "0355322b3577eeab7669066df42c550a56801110")):
        for half in (0, 1):
            samples = []
            for metric, (unit, direction, base, head) in METRICS.items():
                values = base if side == 2 else head
                for rep, v in enumerate(values[half * 4:(half + 1) * 4]):
                    samples.append([metric, v, unit, direction, rep])
            extra = ONLY_BASE if side == 2 else ONLY_HEAD
            if half == 0:
                samples += [[extra[0], v, extra[1], extra[2], i] for i, v in enumerate(extra[3])]
            runs.append(_run(tag, commit, samples, box="lkp-box" if side == 2 else box_head))
    return {"format": "perflab-export", "version": 1, "runs": runs}


def load(cli, tmp_path, **kw) -> None:
    path = tmp_path / "fixture.json"
    path.write_text(json.dumps(export_document(**kw)))
    cli("import", path)

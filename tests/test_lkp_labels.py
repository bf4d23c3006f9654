"""The lkp layout's column headers keep the part of an operand that tells the columns apart (issue 22, item 3)."""

from __future__ import annotations

import numpy as np

from perflab.analysis.comparison import compare
from perflab.core.model import LOWER_IS_BETTER, Sample
from perflab.report import lkp
from perflab.store import open_store

KERNELS = ("6.1.0-40-amd64", "6.1.0-41-amd64")


def _store(tmp_path):
    store = open_store(str(tmp_path / "k.db"))
    rng = np.random.default_rng(5)
    for kernel, scale in zip(KERNELS, (1.0, 1.1)):
        for _ in range(3):
            run = store.create_run(box="box", environment={"testbox": "box", "kernel_release": kernel},
                                   benchmark="synthetic", name="synthetic", params={}, tag="t")
            store.add_samples(run, 1, [Sample("synthetic.time", scale * (1 + 0.01 * rng.standard_normal()), "s",
                                              LOWER_IS_BETTER)])
            store.finish_run(run, "finished")
    return store


def test_kernel_operands_keep_the_differing_part_in_the_column_headers(tmp_path):
    result = compare(_store(tmp_path), [f"kernel={k}" for k in KERNELS])
    text = lkp.render(result)
    lines = text.splitlines()
    header = lines[next(i for i, line in enumerate(lines) if line.startswith("-" * 16)) - 1]   # above the rule
    assert "kernel=…40-amd64" in header and "kernel=…41-amd64" in header
    assert "(+" not in header


def test_column_label_cuts_only_what_the_operands_share():
    labels = ["kernel=6.1.0-40-amd64", "kernel=6.1.0-41-amd64"]
    assert [lkp._column_label(label, labels, 16) for label in labels] == ["kernel=…40-amd64", "kernel=…41-amd64"]
    # short labels are left alone; a long distinguishing middle keeps it between two cuts
    assert lkp._column_label("v6.7", ["v6.7", "v6.8"], 16) == "v6.7"
    long = [f"kernel=6.1.0-4{i}-amd64-with-a-very-long-tail" for i in (0, 1)]
    cut = [lkp._column_label(label, long, 16) for label in long]
    assert all(len(c) <= 16 for c in cut) and cut[0] != cut[1] and "40" in cut[0] and "41" in cut[1]

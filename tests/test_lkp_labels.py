"""The lkp layout's column headers keep the part of an operand that tells the columns apart (issue 22, item 3)."""

from __future__ import annotations

import re

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


def test_kernel_operands_head_their_columns_whole(tmp_path):
    """Issue 22 cut a long operand to LKP's 16 characters around its differing part
    (kernel=…40-amd64); the heads are now as wide as the whole names, the figures under them."""
    result = compare(_store(tmp_path), [f"kernel={k}" for k in KERNELS])
    text = lkp.render(result)
    lines = text.splitlines()
    rule = next(i for i, line in enumerate(lines) if line.startswith("-" * 16))
    header = lines[rule - 1]
    assert "kernel=6.1.0-40-amd64" in header and "kernel=6.1.0-41-amd64" in header and "…" not in header, header
    # Each head's name ends where its column's rule ends, and the rows' figures end inside it.
    ends = [m.end() for m in re.finditer(r"-+", lines[rule])]
    assert [header.index(f"kernel={k}") + len(f"kernel={k}") for k in KERNELS] == ends, (header, lines[rule])
    row = next(l for l in lines if "synthetic.time" in l and "%" in l)
    figures = [m.end() for m in re.finditer(r"\d\.\d+", row)]
    assert figures[0] <= ends[0] and ends[0] < figures[-1] <= ends[1], (row, ends)

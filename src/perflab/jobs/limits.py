"""How big a matrix may be: counted from its axes before a single point is built.

A job file's axes multiply: `nr_task` of 1000 values by `duration` of 1000 is a
million atomic jobs, which took a minute and 1.2 GB to expand before anything
ran (and `jobs split` wrote files until the disk filled). The product is
checked first; above MATRIX_LIMIT points the job is refused with the product
in the message. PERFLAB_MATRIX_LIMIT raises (or lowers) the limit
(docs/runner.md).
"""

from __future__ import annotations

import math
import os

from perflab.benchmarks.base import JobError

MATRIX_LIMIT = 10_000
LIMIT_ENV = "PERFLAB_MATRIX_LIMIT"


def matrix_limit() -> int:
    """The limit in force: $PERFLAB_MATRIX_LIMIT when set (a positive integer), else MATRIX_LIMIT."""
    text = os.environ.get(LIMIT_ENV, "").strip()
    if not text:
        return MATRIX_LIMIT
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise JobError(f"{LIMIT_ENV}={text[:40]!r}: expected a positive integer (atomic jobs per job file)")
    return value


def check_matrix(axes: list[tuple[str, list]], source: str) -> None:
    """Refuse a matrix of more points than the limit, naming its axes and their product."""
    sizes = [(key, len(values)) for key, values in axes if len(values) > 1]
    points = math.prod(n for _, n in sizes)
    limit = matrix_limit()
    if points > limit:
        product = " x ".join(f"{key} {n}" for key, n in sizes)
        raise JobError(f"{source}: the matrix has {product} = {points:,} atomic jobs, more than the limit of "
                       f"{limit:,} (set {LIMIT_ENV} to allow more)")

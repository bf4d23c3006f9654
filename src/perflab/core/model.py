"""Small value types shared by benchmarks, the runner and the store."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

LOWER_IS_BETTER = -1
HIGHER_IS_BETTER = 1
INFORMATIONAL = 0

# LKP's names for what /usr/bin/time reports: the cmd family records them, the comparison
# tells the resource figures apart by them (named here, below both: `perflab compare` does
# not import a family, pydantic and YAML to know five names).
WALL = "time.elapsed_time"
USER = "time.user_time"
SYS = "time.system_time"
MAXRSS = "time.maximum_resident_set_size"
EXIT = "time.exit_status"


@dataclass(frozen=True, slots=True)
class Sample:
    """One value of one metric in one repetition of a run."""

    metric: str  # LKP style "suite.name", e.g. "time.elapsed_time"
    value: float
    unit: str  # "s", "us", "ns", "MB/s", "KiB", "" ...
    direction: int  # -1 lower is better, +1 higher is better, 0 informational
    # The assumption its statistics start from (benchmath's AssumeExact): True for a figure
    # exact by construction - an instruction count, or instruction-time in a QEMU guest under
    # icount - which perflab.stats.exact compares as a ratio against its resolution; False for
    # a statistical figure. Said where the sample is made; the store keeps no column for it,
    # and its reading side decodes it once from what it keeps (perflab.store.exactness).
    exact: bool = False


METRIC_MAX = 255          # the store's metric column


def metric_name(prefix: str, symbol: str) -> str:
    """prefix + symbol, cut to the store's column with a hash of the whole name kept."""
    name = prefix + symbol
    if len(name) <= METRIC_MAX:
        return name
    digest = hashlib.sha1(name.encode()).hexdigest()[:10]
    return name[:METRIC_MAX - 11] + "~" + digest

"""What `perflab check` decides from a comparison: the regressions that fail the gate, and the
metrics whose samples could not have seen a change worth knowing about (power, said out loud).

Only the primary metrics gate: monitors and secondary metrics never fail a check.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from perflab.analysis.comparison.result import ComparisonResult, MetricRow
from perflab.stats.changepoints import MIN_EFFECT
from perflab.stats.compare import PRIMARY, REGRESSION
from perflab.stats.power import detectable_of

# A "no change" is said to be blind when the samples could not have seen a 5% change.
POWER_WORRY = 0.05
# The smallest level change the robot calls (the change-point method's minimum effect): the
# change its runs per commit are planned to see.
ROBOT_CHANGE = MIN_EFFECT


@dataclass(frozen=True)
class Blind:
    """A primary metric whose samples could not have seen a POWER_WORRY change."""

    metric: str
    detectable: float     # the smallest change detectable with 90% power (a fraction); inf: n too small


@dataclass(frozen=True)
class GateVerdict:
    checked: int                   # primary metrics with a head figure
    regressions: list[MetricRow]   # those that regressed significantly
    blind: list[Blind]

    @property
    def worst(self) -> MetricRow | None:
        """The regression of the largest magnitude."""
        return max(self.regressions, key=lambda r: r.heads[0].magnitude) if self.regressions else None


def gate(result: ComparisonResult, alpha: float) -> GateVerdict:
    """The check's verdict on the first head against the base, at false-discovery rate `alpha`."""
    primary = [r for r in result.rows if r.fdr_group == PRIMARY and r.heads[0] is not None]
    regressions = [r for r in primary if r.heads[0].verdict == REGRESSION]
    blind = []
    for r in primary:
        # An exact metric's resolution is what it can detect; others, from their spread.
        d = r.heads[0].detectable if r.heads[0].exact else detectable_of(r.base_values, r.head_values[0], alpha=alpha)
        if not math.isfinite(d) or d > POWER_WORRY:
            blind.append(Blind(r.metric, d))
    return GateVerdict(len(primary), regressions, blind)

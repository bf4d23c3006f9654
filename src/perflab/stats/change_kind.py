"""The kind of a timed change: did the code path change, or only its timing?

A wall-time or CPU-time change between two versions is re-measured in a mode that
counts instead of timing (instructions under valgrind for user space, instruction-time
under QEMU icount for a kernel: perflab.stats.exact). Then

- *code path*: the count moved beyond its resolution, the same way as the time, by at
  least COMPARABLE of the time's change (both taken as costs: a rate's change is turned
  into the change of its cost per operation first);
- *timing only*: the count did not move (or moved by far less, or the other way), and the
  time change holds when the two versions are timed again, in pairs: cache, layout,
  alignment, contention, I/O;
- *not reproduced*: neither the count nor a fresh timing shows it: the first verdict
  was noise (or a state of the machine that is gone).

The rule and its figures: docs/statistics.md, "The kind of a change". Only numbers
in, a ChangeKind out: automate.change_kind measures, the renderers print.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from perflab.core.model import HIGHER_IS_BETTER, LOWER_IS_BETTER
from perflab.stats import exact

CODE_PATH, TIMING_ONLY, NOT_REPRODUCED = "code path", "timing only", "not reproduced"
# The count explains the time when its change is at least this share of the time's (half: the code
# path is most of it); by less, the time moved mostly for another reason, and the label says timing,
# with the count's share beside it.
COMPARABLE = 0.5


def cost_change(pct: float, direction: int) -> float:
    """The change of the cost per operation: a time's own change; a rate's, 1/(1+pct) - 1."""
    if direction == HIGHER_IS_BETTER:
        return 1.0 / (1.0 + pct) - 1.0 if pct > -1 else math.inf
    return pct


@dataclass(frozen=True)
class ChangeKind:
    label: str                    # CODE_PATH | TIMING_ONLY | NOT_REPRODUCED
    metric: str                   # the timed metric
    time_change: float            # its change (fraction), as the verdict gave it
    counted_metric: str           # what was counted: valgrind.instructions, or the metric under icount
    counted_change: float         # the count's change (fraction; NaN when it could not be compared)
    resolution: float             # the count's resolution (fraction)
    share: float                  # counted cost change / time cost change (NaN when the time did not move)
    retimed_change: float | None = None   # the time change when timed again (only when the count did not move)
    retimed_p: float | None = None
    retimed_n: int = 0            # pairs timed again
    how: str = ""                 # where the count was taken: "valgrind", "QEMU icount"

    @property
    def sentence(self) -> str:
        """One line for a report: the label and the figures it rests on."""
        # The same metric counted (under icount) is told apart from the timed one by where it was counted.
        name = self.counted_metric + (f" under {self.how}" if self.counted_metric == self.metric and self.how else "")
        counted = (f"{name} {self.counted_change * 100:+.2f}% (resolution "
                   f"{self.resolution * 100:.2g}%)") if math.isfinite(self.counted_change) else name
        if self.label == CODE_PATH:
            return (f"{self.label}: {counted} against {self.metric} {self.time_change * 100:+.1f}% "
                    f"(the count accounts for {self.share * 100:.0f}% of the change)")
        if self.retimed_change is None:
            return f"{self.label}: {counted} against {self.metric} {self.time_change * 100:+.1f}%"
        again = (f"timed again in {self.retimed_n} pairs: {self.retimed_change * 100:+.1f}% "
                 f"(p={self.retimed_p:.2g})")
        if self.label == TIMING_ONLY:
            moved = math.isfinite(self.share) and exact.change_called(self.counted_change, self.resolution)
            extra = ("" if not moved else f", a share of {self.share * 100:.0f}%" if self.share > 0 else
                     ", the other way")
            return (f"{self.label}: {counted}{extra} against {self.metric} {self.time_change * 100:+.1f}%, "
                    f"{again}: cache, layout, alignment, contention or I/O")
        return f"{self.label}: {counted}; {again}: the first verdict was noise"

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: dict) -> "ChangeKind":
        return cls(**{k: doc[k] for k in cls.__dataclass_fields__ if k in doc})


def counted_verdict(base_counts, head_counts) -> exact.ExactVerdict:
    """The count's change, judged as an exact metric (its own resolution from repeated runs)."""
    return exact.compare_exact(base_counts, head_counts, resolution=exact.resolution(base_counts, head_counts))


def explains(time_change: float, direction: int, counted: exact.ExactVerdict,
             counted_direction: int = LOWER_IS_BETTER) -> tuple[bool, float]:
    """Whether the count's change is the time's: (called the same way by a comparable share, the share).

    Both are taken as costs: a count of instructions is one; the same rate under icount (its
    `counted_direction` higher-is-better) is turned into one as the timed rate is."""
    time_cost = cost_change(time_change, direction)
    counted_cost = cost_change(counted.pct_change, counted_direction) if math.isfinite(counted.pct_change) else math.nan
    if not (math.isfinite(time_cost) and time_cost != 0 and math.isfinite(counted_cost)):
        return False, math.nan
    share = counted_cost / time_cost
    return counted.called and share >= COMPARABLE, share


def classify(*, metric: str, direction: int, time_change: float, counted_metric: str, base_counts, head_counts,
             retimed=None, how: str = "", counted_direction: int = LOWER_IS_BETTER) -> ChangeKind:
    """The label of a timed change of `time_change` (fraction, the metric's own direction).

    `base_counts`/`head_counts`: the counted runs of each side (`counted_direction`: the counted
    metric's, LOWER_IS_BETTER for instructions; the metric's own when it is counted under icount).
    `retimed`: when the count does not explain the change, a perflab.stats.compare.Comparison of
    the two sides timed again (None: not timed again, and the label is timing only on the first
    verdict's word)."""
    counted = counted_verdict(base_counts, head_counts)
    ok, share = explains(time_change, direction, counted, counted_direction)
    common = dict(metric=metric, time_change=time_change, counted_metric=counted_metric,
                  counted_change=counted.pct_change, resolution=counted.resolution, share=share, how=how)
    if ok:
        return ChangeKind(CODE_PATH, **common)
    if retimed is None:
        return ChangeKind(TIMING_ONLY, **common)
    same_way = math.isfinite(retimed.pct_change) and (retimed.pct_change > 0) == (time_change > 0)
    held = same_way and math.isfinite(retimed.p_value) and retimed.p_value < 0.05
    return ChangeKind(TIMING_ONLY if held else NOT_REPRODUCED, **common, retimed_change=retimed.pct_change,
                      retimed_p=retimed.p_value, retimed_n=min(retimed.base.n, retimed.head.n))

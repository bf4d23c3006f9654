"""Repetitions that stop when the figure is known: a sequential rule that keeps its coverage.

A figure is measured in repetitions (for the LMbench-class suite: one process
each, its value the mean of the samples that process printed). After each
repetition from the `floor` on, the rule looks at the repetitions so far and
stops when the confidence interval of their mean is narrower than the stated
precision: half-width <= precision * |mean|. At the `ceiling` it stops whatever
the interval.

Looking after every repetition and stopping at the first narrow interval is
not honest: each look is another chance for an interval that happens to be
too short (a few repetitions that agree by luck) to end the measurement, and
the interval the rule stops on covers the true mean less often than its
nominal level says. The rule here fixes the looks in advance - one after each
repetition from floor to ceiling, K = ceiling - floor + 1 of them - and gives
each look alpha / K of the error (Bonferroni alpha spending, as
perflab.stats.sequential does for bisection's end test). Each look's interval
is Student's t interval at level 1 - alpha / K; the chance that any of the K
intervals misses the mean is at most K * alpha / K = alpha, so the interval
the rule stops on - whichever look that is, however the stopping depended on
the data - covers the mean with probability at least 1 - alpha (up to how well
a t interval fits the repetitions at a fixed count). tests/test_stopping.py
checks it on simulated lognormal and bimodal repetitions.

The price is width: at two repetitions the t quantile for alpha / K is large
(50.9 at K = 4), so two repetitions end a figure only when they agree to a
small fraction of the precision - in practice, when they are identical. That
is the other rule: repetitions that are exactly equal (a deterministic count)
are measured once and confirmed once, whatever the floor; two timings that
agree in all the digits printed are as good as identical for any use a figure
is put to. So are repetitions that are exact in perflab.stats.exact's sense,
within EXACT_LIMIT (0.2%) of each other: under QEMU's icount two processes'
instruction-times differ by 0.003-0.12% (page faults), never by nothing. The
caller says which: `assume_exact`, a figure exact by construction (icount
instruction-time: two repetitions suffice), or `samples`, every sample of every
repetition pooled (exact by measurement: at least MEASURED_MIN samples, all within
0.2%, which a wall-time figure with a CoV of even 0.3% almost never is). Precision 0
asks for the ceiling: then only exact equality ends a figure early.

Why not a two-stage (Stein) procedure: it needs its first-stage count fixed
and large enough for a usable variance estimate (its t quantile has that
count's degrees of freedom), so it cannot stop after two identical
repetitions, and it runs the planned second stage even when the first already
says more than enough. Why not a confidence sequence: the ones that need no
assumption on the distribution need bounded values, and timings are not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from perflab.stats import exact, student_t


@dataclass(frozen=True)
class StoppingRule:
    """When a figure's repetitions are enough: precision of its interval, floor and ceiling."""

    precision: float          # the interval's half-width / |mean| at which to stop; 0: always the ceiling
    floor: int = 2            # repetitions before the first look
    ceiling: int = 5          # repetitions at which to stop whatever the interval
    confidence: float = 0.95  # over all looks together

    def __post_init__(self) -> None:
        if not (self.precision >= 0 and math.isfinite(self.precision)):
            raise ValueError(f"precision must be a number >= 0, not {self.precision!r}")
        if not 2 <= self.floor <= self.ceiling:
            raise ValueError(f"need 2 <= floor <= ceiling, got floor {self.floor}, ceiling {self.ceiling}")
        if not 0 < self.confidence < 1:
            raise ValueError(f"confidence must be between 0 and 1, not {self.confidence!r}")

    @property
    def looks(self) -> int:
        return self.ceiling - self.floor + 1

    @property
    def alpha_per_look(self) -> float:
        return (1.0 - self.confidence) / self.looks

    def t_quantile(self, n: int) -> float:
        """The two-sided t quantile of one look with n repetitions."""
        return student_t.quantile(n - 1, 1.0 - self.alpha_per_look / 2.0)

    def interval(self, values) -> tuple[float, float]:
        """(mean, half-width) of the look's interval over these repetitions (n >= 2)."""
        values = [float(v) for v in values]
        n = len(values)
        if n < 2:
            return (values[0] if values else math.nan), math.inf
        mean = math.fsum(values) / n
        var = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
        return mean, self.t_quantile(n) * math.sqrt(var / n)

    def known(self, values, *, assume_exact: bool = False, samples=None) -> bool:
        """Whether these repetitions of one figure are enough (no more are needed).

        assume_exact: the figure is exact by construction (instruction-time under icount);
        samples: every sample behind `values`, pooled (module docstring)."""
        n = len(values)
        if n >= self.ceiling:
            return True
        if n >= 2 and all(v == values[0] for v in values):
            return True          # exact repetitions: measured once, confirmed once
        if n >= 2 and self.precision > 0 and self.near_identical(values, assume_exact, samples):
            return True          # icount-like: identical within the resolution of an exact metric
        if n < self.floor or self.precision == 0:
            return False
        mean, half = self.interval(values)
        return half <= self.precision * abs(mean)

    @staticmethod
    def near_identical(values, assume_exact: bool, samples) -> bool:
        """Repetitions exact within EXACT_LIMIT: by construction, or by every sample pooled."""
        if assume_exact:
            return exact.is_exact(list(values), assume_exact=True)
        pooled = list(samples) if samples is not None else list(values)
        return exact.is_exact(pooled)

    def all_known(self, figures) -> bool:
        """Whether every figure (an iterable of repetition-value lists) is known."""
        return all(self.known(list(v)) for v in figures)

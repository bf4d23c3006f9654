"""What `perflab show` prints of one run: each metric's summary over its samples (stats.descriptive)."""

from __future__ import annotations

from perflab.stats.descriptive import Summary, summarize
from perflab.store.exactness import exact_as_stored


def metric_summaries(samples_by_metric: dict[str, list]) -> dict[str, Summary]:
    """metric -> the summary of its samples (store rows with `value` and `direction`), in the given order."""
    # An exact metric's figure is its least disturbed sample, as compare and detect take it.
    return {metric: summarize([s.value for s in samples], samples[0].direction,
                              exact=all(getattr(s, "exact", False) for s in samples))
            for metric, samples in samples_by_metric.items()}


def figure_of(values: list[float], direction: int, metric: str, unit: str, icount: bool = False) -> float:
    """A run's one figure of a metric (Summary.center), exact when its stored form says so or
    when the run measured under icount (analysis.variant: every figure of such a guest is
    instruction-time, exact; a family's catalog unit, `us`, does not carry the mark its samples do)."""
    return summarize(values, direction, exact=icount or exact_as_stored(metric, unit)).center

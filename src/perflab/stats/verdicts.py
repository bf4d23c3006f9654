"""The words a statistical test answers with, defined once for every test.

A comparison of two samples (perflab.stats.compare) calls a directional metric a
REGRESSION or an IMPROVEMENT, an informational one CHANGED, and says NO_CHANGE or
INSUFFICIENT otherwise; a profile comparison (perflab.stats.profile) uses CHANGED
and NO_CHANGE. A step found in a series (perflab.analysis.series) is a REGRESSION,
an IMPROVEMENT or, for a metric without a better direction, a CHANGE: the step itself,
not a test's call, hence its own word.
"""

REGRESSION = "regression"
IMPROVEMENT = "improvement"
NO_CHANGE = "no change"
CHANGED = "changed"
INSUFFICIENT = "insufficient samples"
CHANGE = "change"

"""Statistics of samples: descriptive summaries and the comparison test.

Everything numeric goes through numpy/scipy (docs/statistics.md says why each
choice was made), except Student's t distribution on the path of `perflab detect`
and the power figures: perflab.stats.student_t, the math module alone, because
importing scipy.special cost that command 0.3 s (docs/changepoints.md).
"""

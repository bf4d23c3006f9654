"""Statistics of samples: descriptive summaries and the comparison test.

Everything numeric goes through numpy/scipy; docs/statistics.md says why each
choice was made.
"""

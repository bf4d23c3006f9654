"""The read side: which runs to look at (selection), comparisons, series and regressions,
and one view builder per report, over the pure statistics of `perflab.stats`.

Renderers (`perflab.report`) take what is built here; they never read a store.
"""

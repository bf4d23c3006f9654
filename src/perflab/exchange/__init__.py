"""Runs in and out of the store: perflab's own export/import format (`transfer`) and the
importers of other tools' results (hyperfine, pyperf, Go bench, Google Benchmark, pytest-benchmark).
"""

"""Benchmark families: each module knows how to run one family and parse its output."""

FAMILIES = ("cmd", "lmbench")

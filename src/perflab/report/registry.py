"""One small interface for every comparison layout: render(ComparisonResult) -> str."""

from __future__ import annotations

from importlib import import_module

# style -> (module, function)
STYLES = {
    "lkp": ("perflab.report.lkp", "render"),
    "mmtests": ("perflab.report.mmtests", "render"),
    "lmbench": ("perflab.report.lmbench_compare", "render"),
    "kernbench": ("perflab.report.kernbench", "render"),
    "benchstat": ("perflab.report.benchstat", "render"),
    "json": ("perflab.report.tabular", "render_json"),
    "csv": ("perflab.report.tabular", "render_csv"),
}


def render_comparison(result, style: str) -> str:
    module, function = STYLES[style]
    return getattr(import_module(module), function)(result)

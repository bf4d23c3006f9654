"""One small interface for every comparison layout: a comparison's view in, text out.

The view (perflab.analysis.views.comparison.ComparisonView) carries the ComparisonResult
and the figures a few layouts print beyond it; the other layouts take the result alone."""

from __future__ import annotations

from importlib import import_module

from perflab.core.text import printable

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


# Layouts that take the whole view (the others take view.result).
TAKES_VIEW = {"mmtests", "kernbench", "benchstat"}

# Layouts that print the environment differences of a --cross-box comparison themselves.
SHOWS_ENV_DIFF = {"lkp", "json", "csv"}


def render_comparison(view, style: str) -> str:
    module, function = STYLES[style]
    result = view.result
    text = getattr(import_module(module), function)(view if style in TAKES_VIEW else result)
    if result.env_diff and style not in SHOWS_ENV_DIFF:
        head = ["environment differences (--cross-box):"]
        head += [f"  {printable(key)}: {printable(a)} -> {printable(b)}" for key, a, b in result.env_diff]
        text = "\n".join(head) + "\n\n" + text
    return text

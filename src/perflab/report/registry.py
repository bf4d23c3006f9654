"""One small interface for every comparison layout: render(ComparisonResult) -> str."""

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


# Layouts that print the environment differences of a --cross-box comparison themselves.
SHOWS_ENV_DIFF = {"lkp", "json", "csv"}


def render_comparison(result, style: str) -> str:
    module, function = STYLES[style]
    text = getattr(import_module(module), function)(result)
    if result.env_diff and style not in SHOWS_ENV_DIFF:
        head = ["environment differences (--cross-box):"]
        head += [f"  {printable(key)}: {printable(a)} -> {printable(b)}" for key, a, b in result.env_diff]
        text = "\n".join(head) + "\n\n" + text
    return text

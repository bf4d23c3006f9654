"""The comparison layouts, each registered once: a comparison's view in, text out.

A layout is a Layout record in LAYOUTS: its name (`--style NAME` of `perflab compare` and,
if `gate`, of `perflab check`), the renderer that formats it (one signature: the
ComparisonView of perflab.analysis.views.comparison), the extras of that view it reads
(`needs`: the view computes only those) and how it treats a --cross-box comparison. The
CLI's choices come from here (layout_names); tests/test_architecture.py fails on a list of
layout names anywhere else. Adding a layout: docs/views.md, "How to add a layout".

Renderers are named as "module:function" and imported on first use, so that the CLI can
list the names without loading a renderer (start-up time).
"""

from __future__ import annotations

from importlib import import_module
from typing import NamedTuple


class Layout(NamedTuple):
    name: str
    renderer: str                     # "module:function", the function taking the ComparisonView
    # The ComparisonView extras the renderer reads (analysis.views.comparison.EXTRAS), computed for it alone.
    needs: tuple[str, ...] = ()
    gate: bool = True                 # offered by `perflab check` (a CI gate over any job's metrics)
    env_diff: bool = False            # prints a --cross-box comparison's environment differences itself
    data: bool = False                # for programs (json, csv), not read on a terminal

    def render(self, view) -> str:
        module, function = self.renderer.split(":")
        return getattr(import_module(module), function)(view)


LAYOUTS = (
    Layout("lkp", "perflab.report.lkp:render_view", env_diff=True),
    Layout("mmtests", "perflab.report.mmtests:render", needs=("summary_lines", "testcase_kernels")),
    # The LMbench summary prints LMbench's figures alone: a gate over another job would show nothing.
    Layout("lmbench", "perflab.report.lmbench_compare:render", gate=False),
    Layout("kernbench", "perflab.report.kernbench:render", needs=("kernbench_blocks",)),
    Layout("benchstat", "perflab.report.benchstat:render", needs=("min_samples_for_ci",)),
    Layout("json", "perflab.report.tabular:render_json", env_diff=True, data=True),
    Layout("csv", "perflab.report.tabular:render_csv", env_diff=True, data=True),
)
_BY_NAME = {layout.name: layout for layout in LAYOUTS}


def layout_names(gate: bool = False) -> tuple[str, ...]:
    """The layouts' names in the registry's order (with `gate`, those `perflab check` offers)."""
    return tuple(layout.name for layout in LAYOUTS if layout.gate or not gate)


def layout(name: str) -> Layout:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"no comparison layout {name!r}: known are {', '.join(_BY_NAME)}") from None


def render_comparison(view, name: str) -> str:
    """The view in layout `name`; a --cross-box comparison's environment differences first,
    for the layouts that do not print them themselves."""
    chosen = layout(name)
    text = chosen.render(view)
    result = view.result
    if result.env_diff and not chosen.env_diff:
        from perflab.core.text import printable

        head = ["environment differences (--cross-box):"]
        head += [f"  {printable(key)}: {printable(a)} -> {printable(b)}" for key, a, b in result.env_diff]
        text = "\n".join(head) + "\n\n" + text
    if result.measured_differently and not chosen.data:
        # Before anything else: the sides did not measure the same thing (issue 44).
        from perflab.core.text import printable

        head = ["measured differently:"] + [f"  {printable(line, None)}" for line in result.measured_differently]
        text = "\n".join(head) + "\n\n" + text
    return text

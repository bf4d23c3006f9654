"""Views: every figure a report prints, computed from a store and a selection before any renderer runs.

A view is a plain dataclass (or a list of them); its builder reads the store, selects runs
(perflab.analysis.selection), and computes with perflab.stats and the other analysis modules.
The renderers (perflab.report) take a view and format it: they never see a store and
compute nothing. One builder per report: `perflab report table` (table.py), `report profile`
(profile.py), `report html` (page.py, its sections in sections.py), and the comparison's
layouts (comparison.py).

A benchmark family with a report of its own keeps its view hook beside its code, as
`perflab.benchmarks.<module>.view` (lmbench's summary, will-it-scale's scaling curves,
kernbench's blocks); family_hook() finds it by the family's name, so adding such a family
touches its own package (and a renderer), nothing here. A hook may define
`page_section(store, chosen, runs, notes)`: the view `report html` shows of the family, or None.
docs/views.md lists the views and their fields.
"""

from __future__ import annotations

from importlib import import_module
from importlib.util import find_spec
from pathlib import Path
from types import ModuleType


def hook_module(family: str) -> str:
    """The module a family's view hook lives in: perflab.benchmarks.<family, '-' as '_'>.view."""
    return f"perflab.benchmarks.{family.replace('-', '_')}.view"


def family_hook(family: str) -> ModuleType | None:
    """A family's view hook, or None when the family has no report of its own."""
    name = hook_module(family)
    try:
        if find_spec(name) is None:
            return None
    except ModuleNotFoundError:   # no such family package
        return None
    return import_module(name)


def page_hooks() -> list[ModuleType]:
    """The hooks with a section on the `report html` page, in the page's order (their PAGE_ORDER).

    Found by their files (benchmarks/<family>/view.py), so that no family's own code is
    imported to learn it has no page section."""
    spec = find_spec("perflab.benchmarks")
    root = Path(list(spec.submodule_search_locations)[0])
    found = [import_module(f"perflab.benchmarks.{d.name}.view")
             for d in sorted(root.iterdir()) if (d / "view.py").is_file()]
    return sorted((h for h in found if hasattr(h, "page_section")), key=lambda h: h.PAGE_ORDER)

"""`perflab report html`: one self-contained HTML file with every view perflab prints.

The page is a template (html_assets/report.html), its stylesheet and script, plotly.js
from the plotly package (its offline bundle, inlined: nothing is fetched from a network)
and one JSON document with the data. The figures come from the page's view
(perflab.analysis.views.page: the comparison, the trends with their change points, the
distributions, the families' sections), which report.html_doc turns into that document;
this module writes the page and computes nothing. The script builds every table
and chart from the JSON, setting user strings as text (textContent), never as markup;
in the JSON every "<", ">" and "&" is escaped so no string can end the script element.
"""

from __future__ import annotations

import json
import os
import sys
from importlib import util
from pathlib import Path

from perflab.analysis.views.page import Filters, PageView
from perflab.core import output
from perflab.core.errors import PerflabError
from perflab.report.html_doc import RawJSON, document

__all__ = ["Filters", "PageView", "document", "render", "report", "check_writable", "write", "plotly_bundle"]

ASSETS = Path(__file__).with_name("html_assets")


# -- the page -------------------------------------------------------------------

# plotly.js with the cartesian traces only (npm's plotly.js-cartesian-dist-min, 1.5 MB), put
# here by tools/fetch_plotly.py (tools/install.sh); the page draws scatter and box traces alone.
CARTESIAN_BUNDLE = Path(sys.prefix) / "share" / "perflab" / "plotly-cartesian.min.js"
BUNDLE_ENV = "PERFLAB_PLOTLY_JS"


def _package_bundle() -> Path:
    """The plotly Python package's offline bundle (every trace type, 4.8 MB), found without importing plotly."""
    spec = util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        raise PerflabError("report html needs plotly.js: run tools/install.sh (the cartesian bundle) "
                           "or pip install plotly (its offline bundle)")
    return Path(list(spec.submodule_search_locations)[0]) / "package_data" / "plotly.min.js"


def plotly_bundle() -> Path:
    """Which plotly.js the page inlines: $PERFLAB_PLOTLY_JS, else the cartesian bundle when
    installed, else the plotly package's full bundle."""
    chosen = os.environ.get(BUNDLE_ENV)
    if chosen:
        if not os.path.isfile(chosen):
            from perflab.core.text import printable

            why = "is not a file" if os.path.exists(chosen) else "no such file"
            raise PerflabError(f"{BUNDLE_ENV}={printable(chosen, 300)}: {why} (the plotly.js bundle to inline)")
        return Path(chosen)
    return CARTESIAN_BUNDLE if CARTESIAN_BUNDLE.is_file() else _package_bundle()


def plotly_js() -> str:
    path = plotly_bundle()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise PerflabError(f"report html: cannot read {path}: {getattr(e, 'strerror', None) or e}") from None
    return text.replace("</script", "<\\/script")


def bundle_banner(text: str) -> str:
    """The bundle's name and version as its banner comment gives them ("plotly.js (cartesian - minified) v4.1.1")."""
    for line in text[:400].splitlines():
        line = line.strip("/* ")
        if line.startswith("plotly.js"):
            return line
    return "plotly.js (no banner)"


def embed_json(doc: dict) -> str:
    """JSON safe inside <script type="application/json">: no "<", ">" or "&" can end or open an element.

    Parts encoded already (RawJSON: numbers only) are appended to the top-level object after
    the escaping."""
    raw = [(k, v) for k, v in doc.items() if isinstance(v, RawJSON)]
    text = json.dumps({k: v for k, v in doc.items() if not isinstance(v, RawJSON)}, separators=(",", ":"),
                      allow_nan=False, default=str, ensure_ascii=False)
    text = (text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))
    if raw:
        parts = ",".join(f"{json.dumps(k)}:{v}" for k, v in raw)
        text = text[:-1] + ("," if len(text) > 2 else "") + parts + "}"
    return text


def render(doc: dict) -> str:
    from html import escape

    template = (ASSETS / "report.html").read_text(encoding="utf-8")
    plotly = plotly_js()
    doc["plotly"] = bundle_banner(plotly)   # which bundle the page carries (its footer says)
    parts = {
        "@TITLE@": escape(doc.get("title") or "perflab report"),
        "@CSS@": (ASSETS / "report.css").read_text(encoding="utf-8"),
        "@PLOTLY@": plotly,
        "@DATA@": embed_json(doc),
        "@SCRIPT@": (ASSETS / "report.js").read_text(encoding="utf-8").replace("</script", "<\\/script"),
    }
    out = []
    rest = template
    # One pass over the template's markers: nothing substituted is searched again.
    while True:
        found = [(rest.find(m), m) for m in parts if rest.find(m) >= 0]
        if not found:
            out.append(rest)
            break
        at, marker = min(found)
        out.append(rest[:at])
        out.append(parts[marker])
        rest = rest[at + len(marker):]
    return "".join(out)


def check_writable(path: str) -> None:
    """Fail before any work when the output cannot be written: a one-line error naming it."""
    if os.path.isdir(path):
        raise PerflabError(f"{path}: is a directory; give a file name (e.g. {os.path.join(path, 'report.html')})")
    output.check(path)


def write(path: str, text: str) -> None:
    """Write the whole file or nothing, through a symlink or into a device (core.output)."""
    output.write(path, text)


def report(view: PageView, path: str) -> dict:
    """Render and write the page of a view; returns its document (for the command's summary line)."""
    check_writable(path)
    doc = document(view)
    write(path, render(doc))
    return doc

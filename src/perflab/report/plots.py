"""PNG and SVG pictures of what `log`, `compare` and `detect` print (matplotlib, Agg).

For people who paste plots into mail. Formatting only: the figures come from the
store's rows, perflab.analysis.comparison and perflab.analysis.series / stats.changepoints. User
strings are drawn as plain text (mathtext off: a "$" in a tag is a dollar sign)
with control characters made visible (perflab.core.text.printable).
"""

from __future__ import annotations

import math
import os
from contextlib import contextmanager

from perflab.core import output
from perflab.core.errors import UsageProblem
from perflab.core.text import printable

FORMATS = (".png", ".svg")
MAX_BARS = 40        # compare: metrics drawn per head, the largest changes first
VERDICT_COLORS = {"regression": "#c62828", "improvement": "#2e7d32", "changed": "#8a5a00"}
KIND_COLORS = {"regression": "#c62828", "improvement": "#2e7d32", "change": "#8a5a00"}
DPI = 110
WIDTH = 1400         # pixels, unless --size says otherwise
PANEL = 360          # pixels of height per panel (detect) or the compare plot's minimum


def check_path(path: str, option: str = "--plot") -> None:
    """Before any work: a PNG or SVG name in a directory that can be written."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in FORMATS:
        raise UsageProblem(f"{option} {printable(path, 200)}: the file name must end in .png or .svg")
    output.check(path, option)


@contextmanager
def _figure(*args, **kw):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with matplotlib.rc_context({"text.parse_math": False, "svg.fonttype": "none"}):
        fig = plt.figure(*args, **kw)
        try:
            yield fig
        finally:
            plt.close(fig)


def save(fig, path: str) -> None:
    """Write the whole picture or nothing (core.output); PNG or SVG by extension."""
    ext = os.path.splitext(path)[1].lower()
    with output.staged(path, "--plot", suffix=ext) as tmp:
        # tight: long tick labels (a testcase and its metric) are never clipped at the edge.
        fig.savefig(tmp, format=ext.lstrip("."), dpi=DPI, bbox_inches="tight", pad_inches=0.15)


def _inches(size, height: float) -> tuple[float, float]:
    """figsize from --size (pixels, WxH) or the default width and `height` pixels."""
    w, h = size if size else (WIDTH, height)
    return w / DPI, h / DPI


def _finite(x) -> float:
    return x if x is not None and isinstance(x, (int, float)) and math.isfinite(x) else math.nan


# -- log ------------------------------------------------------------------------

def plot_log(rows, path: str, *, scale: float = 1.0, unit: str = "s", title: str = "perflab log") -> None:
    """real, user and sys per run, oldest first (the `log` rows); runs not finished are marked."""
    with _figure(figsize=(9, 4.2)) as fig:
        ax = fig.add_subplot(1, 1, 1)
        xs = list(range(len(rows)))
        for k, (name, color) in enumerate((("real", "#4a78c2"), ("user", "#f28e2b"), ("sys", "#59a14f"))):
            ys = [_finite(None if getattr(r, f"m{k}") is None else getattr(r, f"m{k}") * scale) for r in rows]
            if any(y == y for y in ys):
                ax.plot(xs, ys, marker="o", markersize=4, linewidth=1, label=name, color=color)
        bad = [i for i, r in enumerate(rows) if r.status != "finished" and r.m0 is not None]
        if bad:
            ax.plot(bad, [rows[i].m0 * scale for i in bad], linestyle="none", marker="x", markersize=9,
                    color="#c62828", label="not finished")
        commented = [i for i, r in enumerate(rows) if r.comment and r.m0 is not None]
        for i in commented[:30]:
            ax.annotate(printable(rows[i].comment, 30), (i, rows[i].m0 * scale), textcoords="offset points",
                        xytext=(0, 8), fontsize=7, ha="center", rotation=20, color="#555")
        if len(rows) <= 30:
            ax.set_xticks(xs)
            ax.set_xticklabels([f"#{r.id}" + (f"\n{printable(r.tag, 14)}" if r.tag else "") for r in rows], fontsize=7)
        else:
            ax.set_xlabel("runs, oldest first")
        ax.set_ylabel(f"time ({unit})")
        ax.set_ylim(bottom=0)
        ax.set_title(printable(title, 100))
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:   # runs without real/user/sys (imported) draw no line
            ax.legend(fontsize="small")
        fig.tight_layout()
        save(fig, path)


# -- compare ----------------------------------------------------------------------

def plot_comparison(result, path: str, size: tuple[int, int] | None = None) -> None:
    """Per head: the %change of each of the benchmark's own metrics with its (FDR-adjusted) interval,
    coloured by verdict; the largest changes first."""
    heads = result.labels[1:]
    panels = []
    for i, label in enumerate(heads):
        rows = [r for r in result.own_rows if r.heads[i] is not None and r.heads[i].pct_change == r.heads[i].pct_change]
        rows.sort(key=lambda r: -r.heads[i].magnitude)
        panels.append((i, label, rows[:MAX_BARS], len(rows)))
    tallest = max([len(p[2]) for p in panels] + [1])
    height = max(PANEL, DPI * (1.2 + 0.28 * tallest * len(panels) + 0.8 * len(panels)))
    with _figure(figsize=_inches(size, height)) as fig:
        for n, (i, label, rows, total) in enumerate(panels):
            ax = fig.add_subplot(len(panels), 1, n + 1)
            ys = list(range(len(rows)))[::-1]
            changes = [r.heads[i].pct_change * 100 for r in rows]
            colors = [VERDICT_COLORS.get(r.heads[i].verdict, "#9aa5b1") for r in rows]
            ax.barh(ys, changes, color=colors, height=0.6)
            for y, r in zip(ys, rows):
                ci = r.heads[i].ci_adjusted
                if ci and all(_finite(b) == b for b in ci):
                    ax.plot([ci[0] * 100, ci[1] * 100], [y, y], color="#333", linewidth=1)
            ax.set_yticks(ys)
            ax.set_yticklabels([f"{r.testcase} {printable(r.metric)}" for r in rows], fontsize=7)
            ax.axvline(0, color="#333", linewidth=0.8)
            more = f" (the {len(rows)} largest of {total})" if total > len(rows) else ""
            ax.set_title(printable(f"{label} vs {result.labels[0]}: %change, interval at the FDR-adjusted level{more}", 140),
                         fontsize=9)
            ax.set_xlabel("%change (red: regression, green: improvement, grey: not called)", fontsize=8)
            ax.grid(axis="x", alpha=0.3)
            if not rows:
                ax.text(0.5, 0.5, "no metric measured on both sides", transform=ax.transAxes, ha="center")
        fig.tight_layout()
        save(fig, path)

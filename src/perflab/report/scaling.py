"""Scaling tables and plots (numbers from stats.scaling; this module only formats and draws).

One variant (operand or tag): will-it-scale's runtest.py table, processes and threads side by
side. Several: per testcase and mode, the variants side by side, each later one with its
%change against the first (of the centres). The centre of a point is the harmonic mean of its
repetitions' workloads (a rate), and the header says so (docs/views.md).
"""

from __future__ import annotations

import math
import os

from perflab.report.numbers import value
from perflab.core import output
from perflab.core.text import printable

CENTRE = "harmonic mean of the repetitions"
DEFAULT_SIZE = (1100, 520)   # pixels of one panel at 110 dpi (report plots)


def _modes(c) -> str:
    return f"{c}es" if c == "process" else f"{c}s"


def _grouped(curves, variants):
    """{testcase: {mode: {variant: curve}}}, variants in their given order."""
    variants = variants if variants and len(variants) == len(curves) else [""] * len(curves)
    out: dict[str, dict[str, dict[str, object]]] = {}
    for v, c in zip(variants, curves):
        out.setdefault(c.testcase, {}).setdefault(c.mode, {})[v] = c
    return out, list(dict.fromkeys(variants))


def _point(curve, tasks):
    return next((p for p in curve.points if p.tasks == tasks), None) if curve is not None else None


def _cells(p) -> tuple[str, str, str]:
    if p is None:
        return "-", "", ""
    cov = p.summary.cov
    spread = f"{cov * 100:4.1f}%" if cov == cov else ""
    eff = f"{p.efficiency * 100:5.1f}%" if p.efficiency == p.efficiency else "-"
    return value(p.summary.center), spread, eff


def _single(test: str, by_mode: dict) -> list[str]:
    modes = [m for m in ("process", "thread") if m in by_mode]
    tasks = sorted({p.tasks for m in modes for p in by_mode[m].points})
    out = [f"{printable(test)} (ops/s of all tasks, {CENTRE}; linear = the 1-task figure x tasks)"]
    header = f"{'tasks':>6}"
    for m in modes:
        header += f"  {_modes(m):>12} {'±%':>5} {'linear':>12} {'eff.':>6}"
    out.append(header)
    for t in tasks:
        line = f"{t:>6}"
        for m in modes:
            p = _point(by_mode[m], t)
            centre, spread, eff = _cells(p)
            line += f"  {centre:>12} {spread:>5} {value(p.linear) if p else '-':>12} {eff or '':>6}"
        out.append(line)
    return out + [""]


def _side_by_side(test: str, mode: str, by_variant: dict, variants: list[str]) -> list[str]:
    shown = [v for v in variants if v in by_variant]
    names = [printable(v or "-", None) for v in shown]   # whole: a variant is told apart by its end
    width = [max(12, len(n)) for n in names]
    tasks = sorted({p.tasks for c in by_variant.values() for p in c.points})
    out = [f"{printable(test)} {_modes(mode)} (ops/s of all tasks, {CENTRE}; ±% coefficient of variation; "
           f"eff. against the 1-task figure x tasks)"]
    header = f"{'tasks':>6}"
    for i, n in enumerate(names):
        header += f"  {n:>{width[i]}} {'±%':>5} {'eff.':>6}" + (f" {'%change':>8}" if i else "")
    out.append(header)
    for t in tasks:
        line = f"{t:>6}"
        first = _point(by_variant[shown[0]], t)
        for i, v in enumerate(shown):
            p = _point(by_variant[v], t)
            centre, spread, eff = _cells(p)
            line += f"  {centre:>{width[i]}} {spread:>5} {eff:>6}"
            if i:
                ok = p is not None and first is not None and first.summary.center
                change = f"{(p.summary.center / first.summary.center - 1) * 100:+.1f}%" if ok else "-"
                line += f" {change:>8}"
        out.append(line.rstrip())
    return out + [""]


def render_scaling(curves, variants: list[str] | None = None) -> str:
    """One table per testcase (one variant), or per testcase and mode with the variants side by side."""
    grouped, order = _grouped(curves, variants)
    out = []
    for test in sorted(grouped):
        by_mode = grouped[test]
        if len(order) == 1:
            out += _single(test, {m: vs[order[0]] for m, vs in by_mode.items()})
            continue
        for mode in [m for m in ("process", "thread") if m in by_mode]:
            out += _side_by_side(test, mode, by_mode[mode], order)
    return "\n".join(out)


def parse_size(text: str | None) -> tuple[int, int]:
    """--size WxH in pixels (from 200x150 to 8000x8000); None: DEFAULT_SIZE."""
    from perflab.core.errors import UsageProblem

    if text is None:
        return DEFAULT_SIZE
    w, sep, h = text.lower().partition("x")
    if not sep or not w.isdigit() or not h.isdigit() or not (200 <= int(w) <= 8000 and 150 <= int(h) <= 8000):
        raise UsageProblem(f"--size {printable(text, 40)}: give WIDTHxHEIGHT in pixels, e.g. 1400x700 "
                           "(200x150 to 8000x8000)")
    return int(w), int(h)


def plot_scaling(curves, path: str, variants: list[str] | None = None, size: tuple[int, int] = DEFAULT_SIZE) -> None:
    """ops/s against tasks per testcase (one panel each): a line per variant and mode, error bars of one
    standard deviation of the repetitions, the linear lines dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    grouped, order = _grouped(curves, variants)
    tests = sorted(grouped)
    dpi = 110
    fig, axes = plt.subplots(len(tests), 1, figsize=(size[0] / dpi, size[1] * len(tests) / dpi), squeeze=False, dpi=dpi)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, test in zip(axes[:, 0], tests):
        for mode, by_variant in sorted(grouped[test].items()):
            style = "-" if mode == "process" else ":"
            for k, v in enumerate(order):
                c = by_variant.get(v)
                if c is None:
                    continue
                color = colors[k % len(colors)]
                label = (f"{printable(v, None)} " if len(order) > 1 else "") + _modes(mode)
                xs = [p.tasks for p in c.points]
                errs = [p.summary.stddev if p.summary.stddev == p.summary.stddev else 0.0 for p in c.points]
                ax.errorbar(xs, [p.summary.center for p in c.points], yerr=errs, marker="o", linestyle=style,
                            color=color, capsize=3, label=label)
                if any(p.linear == p.linear for p in c.points):
                    ax.plot(xs, [p.linear for p in c.points], linestyle="--", linewidth=0.8, color=color, alpha=0.6,
                            label=f"linear ({label})")
        ax.set_title(printable(test))
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(_si))
        ax.set_xlabel("tasks")
        ax.set_ylabel(f"ops/s ({CENTRE}; bars ±1 std. dev.)", fontsize=8)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize="small")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    try:
        with output.staged(path, "--plot", suffix=os.path.splitext(path)[1] or ".png") as tmp:
            fig.savefig(tmp, dpi=dpi)
    finally:
        plt.close(fig)


def _si(x: float, _pos=None) -> str:
    """A tick as 1.5M, 250k: what people read on an ops/s axis."""
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g}{suffix}" if math.isfinite(x) else ""
    return f"{x:g}"

"""Scaling tables and plots (numbers from stats.scaling; this module only formats and draws)."""

from __future__ import annotations

import os

from perflab.report.numbers import value
from perflab.core import output
from perflab.core.text import printable


def render_scaling(curves) -> str:
    """One table per testcase: tasks, then per mode ops/s, linear and efficiency."""
    by_test: dict[str, dict[str, object]] = {}
    for c in curves:
        by_test.setdefault(c.testcase, {})[c.mode] = c
    out = []
    for test in sorted(by_test):
        modes = [m for m in ("process", "thread") if m in by_test[test]]
        tasks = sorted({p.tasks for m in modes for p in by_test[test][m].points})
        out.append(f"{printable(test)} (ops/s of all tasks; linear = the 1-task figure x tasks)")
        header = f"{'tasks':>6}"
        for m in modes:
            header += f"  {m + 'es' if m == 'process' else m + 's':>12} {'±%':>5} {'linear':>12} {'eff.':>6}"
        out.append(header)
        for t in tasks:
            line = f"{t:>6}"
            for m in modes:
                p = next((p for p in by_test[test][m].points if p.tasks == t), None)
                if p is None:
                    line += f"  {'-':>12} {'':>5} {'-':>12} {'':>6}"
                    continue
                cov = p.summary.cov
                spread = f"{cov * 100:4.1f}%" if cov == cov else ""
                eff = f"{p.efficiency * 100:5.1f}%" if p.efficiency == p.efficiency else "-"
                line += f"  {value(p.summary.center):>12} {spread:>5} {value(p.linear):>12} {eff:>6}"
            out.append(line)
        out.append("")
    return "\n".join(out)


def plot_scaling(curves, path: str) -> None:
    """ops/s against tasks per testcase (one panel each), processes and threads, with their linear lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    tests = sorted({c.testcase for c in curves})
    fig, axes = plt.subplots(len(tests), 1, figsize=(7, 3.2 * len(tests)), squeeze=False)
    for ax, test in zip(axes[:, 0], tests):
        for c in (c for c in curves if c.testcase == test):
            xs = [p.tasks for p in c.points]
            ax.plot(xs, [p.summary.center for p in c.points], marker="o", label=f"{c.mode}es" if c.mode == "process" else f"{c.mode}s")
            if any(p.linear == p.linear for p in c.points):
                ax.plot(xs, [p.linear for p in c.points], linestyle="--", linewidth=1, label=f"linear ({c.mode})")
        ax.set_title(test)
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        ax.set_xlabel("tasks")
        ax.set_ylabel("ops/s")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize="small")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    try:
        with output.staged(path, "--plot", suffix=os.path.splitext(path)[1] or ".png") as tmp:
            fig.savefig(tmp)
    finally:
        plt.close(fig)

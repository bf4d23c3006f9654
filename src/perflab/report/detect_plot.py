"""`perflab detect --plot`: one panel per series worth a look, on an axis of commits or runs.

Only the series given are drawn (perflab.analysis.views.detect.series_to_plot chooses
them: those with change points, or the top N asked for), each against its points'
commits (first-parent order, short ids) or run ids, never a bare point index.
Formatting only: the levels and change points come from perflab.stats.changepoints.
"""

from __future__ import annotations

from perflab.core.text import printable
from perflab.report.plots import KIND_COLORS, PANEL, _figure, _inches, save

MAX_TICKS = 8   # tick labels per panel: commit ids are wide


def point_label(history, point) -> str:
    """The x label of a point: its commit's short id in commit order, else its run id(s)."""
    if history.order == "commit" and point.commit:
        return point.commit[:7]
    return "#" + str(point.run_ids[0]) + ("+" if len(point.run_ids) > 1 else "")


def _ticks(n: int) -> list[int]:
    step = max(1, -(-n // MAX_TICKS))
    return list(range(0, n, step))


def _panel(ax, history, res, name: str) -> None:
    s, d = res.series, res.detection
    xs = list(range(len(s.points)))
    ys = [p.value for p in s.points]
    ax.plot(xs, ys, marker="o", markersize=3, linewidth=0.8, color="#4a78c2")
    if d.outliers:
        ax.plot(d.outliers, [ys[i] for i in d.outliers], linestyle="none", marker="o", markersize=5,
                markerfacecolor="none", color="#999", label="spike (set aside)")
    for k, c in enumerate(d.change_points):
        for seg in ([c.before] if k == 0 else []) + [c.after]:
            ax.plot([seg.start, seg.stop - 1], [seg.mean, seg.mean], color="#f28e2b", linewidth=2)
        colour = KIND_COLORS.get(res.kinds[k], "#333")
        ax.axvline(c.index - 0.5, color=colour, linestyle="--", linewidth=1.2)
        # the label sits at the top of the panel, right of the line: clear of the level lines
        ax.annotate(f"{res.kinds[k]} {c.change * 100:+.1f}% at {point_label(history, s.points[c.index])}",
                    (c.index - 0.5, 1), xycoords=("data", "axes fraction"), xytext=(3, 3),
                    textcoords="offset points", fontsize=7, color=colour, va="bottom")
    ticks = _ticks(len(xs))
    ax.set_xticks(ticks)
    ax.set_xticklabels([point_label(history, s.points[i]) for i in ticks], rotation=30, ha="right")
    if len(xs) == 1:
        ax.set_xlim(-1, 1)
    ax.set_title(printable(name, 120), fontsize=8, pad=12)
    ax.set_ylabel(printable(s.unit, 20) or "value", fontsize=8)
    ax.grid(alpha=0.3)
    ax.tick_params(labelsize=7)


def plot_detect(history, shown, total: int, path: str, names, size=None) -> None:
    """Draw the series of `shown` (SeriesResult, in order) into PNG or SVG `path`; `total` is how
    many series the command looked at, `names(result)` the title of a panel."""
    rows = max(1, len(shown))
    with _figure(figsize=_inches(size, PANEL * rows + 60)) as fig:
        for n, res in enumerate(shown):
            _panel(fig.add_subplot(rows, 1, n + 1), history, res, names(res))
        fig.axes[-1].set_xlabel("commit (first-parent order)" if history.order == "commit" else
                                "run (by start time)", fontsize=8)
        fig.suptitle(f"{len(shown)} of {total} series", fontsize=9)
        fig.tight_layout(rect=(0, 0, 1, 1 - 0.3 / fig.get_figheight()))
        save(fig, path)

"""`perflab detect --plot`: one panel per series worth a look, on an axis of what its points are.

Only the series given are drawn (perflab.analysis.views.detect.series_to_plot chooses
them: those with change points, or the top N asked for), each against what its points
are (issue 33): kernel releases in version order, commits (first-parent order, short
ids), or in time order their tags, run ids where they have none; never a bare index.
Formatting only: the levels and change points come from perflab.stats.changepoints.
"""

from __future__ import annotations

from perflab.analysis.series import BY_COMMIT, BY_KERNEL
from perflab.core.text import printable
from perflab.report.plots import KIND_COLORS, PANEL, _figure, _inches, save

MAX_TICKS = 8   # tick labels per panel: commit ids are wide
AXIS = {BY_KERNEL: "kernel release (version order)", BY_COMMIT: "commit (first-parent order)"}


def _run_ids(point) -> str:
    return "#" + str(point.run_ids[0]) + ("+" if len(point.run_ids) > 1 else "")


def point_label(history, point, series=None) -> str:
    """The x label of a point, by what orders its series (the series' own order when given,
    else the history's): its kernel release, its commit's short id, else its tag or run id(s)."""
    order = series.order if series is not None else history.order
    if order == BY_KERNEL and point.kernel:
        return printable(point.kernel, 24)
    if order == BY_COMMIT and point.commit:
        return point.commit[:7]
    if point.tag:
        # a tag shared by several points of the series would name them all alike: the run tells them apart
        shared = series is not None and sum(p.tag == point.tag for p in series.points) > 1
        return printable(point.tag, 20) + (" " + _run_ids(point) if shared else "")
    return _run_ids(point)


def axis_label(order: str) -> str:
    return AXIS.get(order, "run (by start time)")


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
        ax.annotate(f"{res.kinds[k]} {c.change * 100:+.1f}% at {point_label(history, s.points[c.index], s)}",
                    (c.index - 0.5, 1), xycoords=("data", "axes fraction"), xytext=(3, 3),
                    textcoords="offset points", fontsize=7, color=colour, va="bottom")
    ticks = _ticks(len(xs))
    ax.set_xticks(ticks)
    ax.set_xticklabels([point_label(history, s.points[i], s) for i in ticks], rotation=30, ha="right")
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
    orders = {res.series.order for res in shown}
    with _figure(figsize=_inches(size, PANEL * rows + 60)) as fig:
        for n, res in enumerate(shown):
            ax = fig.add_subplot(rows, 1, n + 1)
            _panel(ax, history, res, names(res))
            if len(orders) > 1:          # panels on different axes: each says what its points are
                ax.set_xlabel(axis_label(res.series.order), fontsize=8)
        if len(orders) <= 1 and fig.axes:
            fig.axes[-1].set_xlabel(axis_label(next(iter(orders), history.order)), fontsize=8)
        fig.suptitle(f"{len(shown)} of {total} series", fontsize=9)
        fig.tight_layout(rect=(0, 0, 1, 1 - 0.3 / fig.get_figheight()))
        save(fig, path)

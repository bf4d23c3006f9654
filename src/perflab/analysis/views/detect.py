"""`perflab detect`'s view: the series the filters select and their change points."""

from __future__ import annotations

from dataclasses import dataclass

from perflab.core.errors import PerflabError


@dataclass
class DetectView:
    history: object      # analysis.series.History
    results: list        # analysis.series.SeriesResult, one per series


def detect_view(store, *, benchmark, metrics, box, tag, since, repo, branch, alpha, min_points,
                min_effect, exact_min_effect=None, order=None) -> DetectView:
    """The series and their change points; PerflabError naming near metrics when --metric matches none."""
    from perflab.analysis import series as series_mod

    history = series_mod.build(store, benchmark=benchmark, metrics=metrics, box=box, tag=tag, since=since,
                               repo=repo, branch=branch, order=order)
    if not history.series and metrics:
        _no_metric(store, benchmark, metrics)
    from perflab.analysis.naming import name_series

    name_series(history.series)
    results = series_mod.analyse(history, alpha=alpha, min_size=min_points, min_effect=min_effect,
                                 exact_min_effect=exact_min_effect)
    return DetectView(history, results)


def _no_metric(store, benchmark, metrics) -> None:
    """--metric matched nothing: name the metrics there are."""
    import difflib

    runs = store.find_runs(benchmark=benchmark, limit=200)
    names = sorted({s.metric for s in store.samples([r.id for r in runs])})
    if not names:
        return
    near = sorted({n for m in metrics for n in difflib.get_close_matches(m, names, n=4, cutoff=0.4)})
    shown = near or names[:8]
    raise PerflabError(f"--metric {', '.join(metrics)}: matches no metric of the selected runs; "
                       f"{'near matches' if near else 'metrics'}: {', '.join(shown)}")


def series_to_plot(results: list, top: int | None = None) -> list:
    """The series `detect --plot` draws: those with change points (largest change first); with
    `top`, the first `top` of them, filled up with the series that could see the smallest
    change (never one too short to tell or without noise)."""
    import math

    def size(r) -> float:
        return max(abs(c.change) for c in r.detection.change_points)

    found = sorted((r for r in results if r.detection.change_points), key=size, reverse=True)
    if top is None:
        return found
    rest = [r for r in results if not r.detection.change_points and r.detection.n >= 2 * r.detection.min_size
            and r.detection.noise > 0 and math.isfinite(r.detection.detectable_mid)]
    rest.sort(key=lambda r: r.detection.detectable_mid)
    return (found + rest)[:top]

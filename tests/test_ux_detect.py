"""Issue 22, point 4 and change points people can trust: detect's findings first, its plot of
the series that matter, comparisons without constant rows or per-row caveats, and the
method's excursions and cross-series control."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from perflab.cli.detect import detect_cmd
from perflab.core.model import INFORMATIONAL, LOWER_IS_BETTER, Sample
from perflab.stats import changepoints
from perflab.stats.compare import BLIND, Caveat, Comparison
from perflab.report.notes import Footnotes, caveat_text
from perflab.store import open_store


def _store(path, series: dict[str, list[float]], tag=None):
    store = open_store(str(path))
    n = max(len(v) for v in series.values())
    for i in range(n):
        run = store.create_run(box="box", environment={"testbox": "box"}, benchmark="synthetic",
                               name="synthetic", params={}, tag=tag)
        samples = [Sample(name, vals[i], "s" if name != "exit" else "",
                          LOWER_IS_BETTER if name != "exit" else INFORMATIONAL)
                   for name, vals in series.items() if i < len(vals)]
        store.add_samples(run, 1, samples)
        store.finish_run(run, "finished")
    return str(path)


@pytest.fixture
def history_db(tmp_path):
    rng = np.random.default_rng(3)
    step = list(100 * (1 + 0.01 * rng.standard_normal(40)) * np.r_[np.ones(20), np.full(20, 1.1)])
    series = {"synthetic.stepped": step, "synthetic.quiet": list(100 * (1 + 0.01 * rng.standard_normal(40))),
              "exit": [0.0] * 40, "synthetic.short": [1.0, 2.0, 3.0]}
    return _store(tmp_path / "h.db", series)


def test_detect_prints_findings_first_and_one_line_for_the_rest(history_db):
    out = CliRunner().invoke(detect_cmd, ["--db", history_db]).output
    body = out.split("\n\n", 1)[1]
    assert body.startswith("box synthetic synthetic.stepped")     # the finding comes first
    assert "synthetic.quiet" not in out and "exit" not in out.split("\n\n", 1)[1].split("\n\n")[0]
    assert out.rstrip().endswith("3 series without a change: 1 flat, 1 no change, 1 too short to tell "
                                 "(--verbose lists them)")
    verbose = CliRunner().invoke(detect_cmd, ["--db", history_db, "--verbose"]).output
    assert "synthetic.quiet (s, lower is better): no change in 40 points" in verbose
    assert "exit (informational): constant over 40 points" in verbose
    assert "series without a change" not in verbose


def test_detect_plot_draws_only_series_with_findings_on_run_ids(history_db, tmp_path):
    from perflab.analysis.views.detect import detect_view, series_to_plot
    from perflab.report.detect_plot import point_label
    from perflab.store import open_store as op

    view = detect_view(op(history_db), benchmark=None, metrics=(), box=None, tag=None, since=None, repo=None,
                       branch=None, alpha=0.001, min_points=3, min_effect=0.01)
    shown = series_to_plot(view.results)
    assert [r.series.metric for r in shown] == ["synthetic.stepped"]
    top = series_to_plot(view.results, 3)
    assert [r.series.metric for r in top] == ["synthetic.stepped", "synthetic.quiet"]   # never flat or too short
    assert point_label(view.history, shown[0].series.points[0]).startswith("#")
    png = tmp_path / "d.png"
    result = CliRunner().invoke(detect_cmd, ["--db", history_db, "--plot", str(png)])
    assert result.exit_code == 0 and png.stat().st_size > 10_000
    assert "(1 of 4 series)" in result.output
    from matplotlib.image import imread

    h1 = imread(str(png)).shape[0]
    CliRunner().invoke(detect_cmd, ["--db", history_db, "--plot", str(png), "--top", "2"])
    assert imread(str(png)).shape[0] > 1.5 * h1                   # two panels, not twelve nor one
    bad = CliRunner().invoke(detect_cmd, ["--db", history_db, "--top", "2"])
    assert bad.exit_code != 0 and "--top needs --plot" in bad.output


def test_short_excursion_and_close_steps_are_found():
    rng = np.random.default_rng(11)
    level = np.full(500, 100.0)
    level[200:228] *= 1.03                                        # 3% for 28 points, then back
    level[350:] *= 1.06
    level[362:] *= 0.93                                           # a second step 12 points later
    x = level * np.exp(0.02 * rng.standard_normal(500))
    found = [c.index for c in changepoints.detect(x).change_points]
    assert len(found) == 4 and all(abs(f - t) <= 5 for f, t in zip(found, (200, 228, 350, 362)))


def test_p_values_are_controlled_across_series():
    rng = np.random.default_rng(5)
    strong = changepoints.detect(np.r_[np.full(100, 100.0), np.full(100, 110.0)] * np.exp(0.01 * rng.standard_normal(200)))
    nulls = [changepoints.detect(100 * np.exp(0.02 * rng.standard_normal(200))) for _ in range(10)]
    alone = changepoints.across_series([strong], 0.001)
    m = len(strong.change_points) + len(strong.dropped_p)      # every candidate counts, kept or dropped
    assert alone == pytest.approx(0.001 * len(strong.change_points) / m)
    # a made-up candidate with p just under alpha: called alone, not among 60 null candidates
    weak = changepoints.Detection(200, [], 1.0, 100.0, dropped_p=[])
    weak.change_points = [strong.change_points[0].__class__(**{**strong.change_points[0].as_dict(), "p_value": 9e-4,
                                                                 "before": strong.change_points[0].before,
                                                                 "after": strong.change_points[0].after})]
    for d in nulls:
        d.dropped_p = [0.5] * 6
    cutoff = changepoints.across_series([strong, weak, *nulls], 0.001)
    assert strong.change_points[0].p_value <= cutoff < 9e-4


def _cmp(detectable):
    return Comparison(None, None, 0.0, None, 0.5, 0.5, "no change", "welch-log",
                      [Caveat(BLIND, f"could not have seen a 5% change: these samples detect {detectable * 100:.1f}% "
                                     "with 90% power")], detectable=detectable)


def test_blind_caveat_beyond_100_percent_is_said_in_words_and_shared():
    huge, small = _cmp(185.088), _cmp(0.08)
    assert caveat_text(huge.warnings[0], huge) == ("cannot detect changes of this size with these samples "
                                                   "(90% power needs a change beyond 100%)")
    notes = Footnotes()
    marks = [notes.caveats(c) for c in (small, _cmp(0.09), huge)]
    assert marks == [" ¹", " ¹", " ²"]                              # rows share one footnote
    assert "18508" not in "\n".join(notes.lines())


def test_compare_drops_constant_metrics_and_numbers_caveats(tmp_path):
    from perflab.analysis.comparison import compare
    from perflab.report import lkp

    db = tmp_path / "c.db"
    rng = np.random.default_rng(2)
    store = open_store(str(db))
    for tag, scale in (("base", 1.0), ("head", 1.2)):
        for _ in range(3):
            run = store.create_run(box="box", environment={"testbox": "box"}, benchmark="synthetic",
                                   name="synthetic", params={}, tag=tag)
            store.add_samples(run, 1, [Sample("synthetic.time", scale * (1 + 0.01 * rng.standard_normal()), "s",
                                              LOWER_IS_BETTER), Sample("exit", 0.0, "", INFORMATIONAL)])
            store.finish_run(run, "finished")
    result = compare(store, ["base", "head"])
    assert [r.metric for r in result.rows] == ["synthetic.time"]
    assert any("exit=0" in w for w in result.warnings)
    text = lkp.render(result)
    assert "[few samples" not in text and "synthetic.time ¹" in text
    assert "  ¹ few samples (n=3 vs 3): only large changes can be detected" in text


def _plotted(monkeypatch, history, results):
    """(x tick labels, change-point annotations, x axis label) of each panel plot_detect draws."""
    from perflab.report import detect_plot

    panels = []

    def keep(fig, path):
        for ax in fig.axes:
            panels.append(([t.get_text() for t in ax.get_xticklabels()],
                           [t.get_text() for t in ax.texts], ax.get_xlabel()))

    monkeypatch.setattr(detect_plot, "save", keep)
    detect_plot.plot_detect(history, results, len(results), "x.png", lambda r: r.series.metric)
    return panels


def test_detect_plot_labels_points_by_kernel_commit_or_tag(monkeypatch):
    # Issue 33, "What to build" 1: the plot names points by what they are, not by run ids.
    import datetime as dt

    from perflab.analysis.series import BY_COMMIT, BY_KERNEL, BY_TIME, History, Point, Series, SeriesResult

    kernels = ["6.1.0-47-amd64", "6.1.0-50-amd64", "6.1.0-53-amd64", "6.1.0-56-amd64", "6.12.107", "6.12.117"]
    values = [100.0, 99.4, 99.4, 99.4, 91.0, 91.0]

    def series(order, **each):
        points = [Point([10 - i], dt.datetime(2026, 11, 1 + i), f"{i:x}" * 40, samples=[v], run_means=[v],
                        **{k: f(i) for k, f in each.items()}) for i, v in enumerate(values)]
        return Series("box", "wis", "", f"wis.{order}", "ops/s", 1, points, order=order)

    def result(s):
        d = changepoints.detect(np.array([p.value for p in s.points]), min_size=1)
        return SeriesResult(s, d, ["regression"] * len(d.change_points))

    by_kernel = result(series(BY_KERNEL, kernel=lambda i: kernels[i], tag=lambda i: "t"))
    (ticks, notes, axis), = _plotted(monkeypatch, History([by_kernel.series], BY_KERNEL), [by_kernel])
    assert ticks == kernels and axis == "kernel release (version order)"
    assert notes and all(" at 6.1" in n or " at 6.12" in n for n in notes), notes

    by_commit = result(series(BY_COMMIT, kernel=lambda i: kernels[i]))
    (ticks, _, axis), = _plotted(monkeypatch, History([by_commit.series], BY_COMMIT), [by_commit])
    assert ticks == [f"{i:x}" * 7 for i in range(6)] and axis == "commit (first-parent order)"

    tags = ["v1", "v2", "v2", None, "v3", "v4"]
    by_time = result(series(BY_TIME, tag=lambda i: tags[i], kernel=lambda i: kernels[i]))
    (ticks, _, axis), = _plotted(monkeypatch, History([by_time.series], BY_TIME), [by_time])
    assert ticks == ["v1", "v2 #9", "v2 #8", "#7", "v3", "v4"] and axis == "run (by start time)"

    # panels of different orders each say what their axis is
    panels = _plotted(monkeypatch, History([by_kernel.series, by_time.series], BY_TIME), [by_kernel, by_time])
    assert [p[2] for p in panels] == ["kernel release (version order)", "run (by start time)"]

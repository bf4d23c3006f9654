"""The sections of `report html`'s view (perflab.analysis.views.page): the comparison's
environment differences and monitor time series, the trends, the distributions."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass


@dataclass
class EnvDiff:
    """The environment facts that differ between the base's last run and a head's."""

    head: str
    base_run: int
    head_run: int
    diffs: list[tuple[str, object, object]]


@dataclass
class MonitorLine:
    """One run's, repetition's and process's values of a monitor metric; t in seconds from the timed part's start."""

    run: int
    repetition: int
    t: list
    v: list


@dataclass
class MonitorSide:
    label: str
    lines: list[MonitorLine]
    omitted: int          # lines beyond the page's limit


@dataclass
class MonitorChart:
    monitor: str
    metric: str
    unit: str
    sides: list[MonitorSide]


@dataclass
class ComparisonSection:
    result: object                  # analysis.comparison.ComparisonResult
    env_diff: list[EnvDiff]
    monitor_series: list[MonitorChart]


@dataclass
class Trends:
    """The series drawn (analysis.series SeriesResults, with their change points), the history
    they come from (its order and commits) and every run their points pool."""

    history: object
    results: list
    run_ids: set[int]


@dataclass
class DistributionRow:
    """A comparison row's sides: the values are in the comparison's records; row: the first record's index."""

    row: int


@dataclass
class DistributionSeries:
    """A series' runs per tag, the most recent tags."""

    testcase: str
    box: str
    metric: str
    unit: str
    variants: list[tuple[str, list[int]]]    # (tag, or variant and tag: analysis.variant; run ids)
    omitted_tags: int


def comparison(store, result, max_charts: int, max_lines: int) -> ComparisonSection:
    from perflab.core import environment

    base_env = result.selections[0].runs[-1].environment or {}
    env_diff = [EnvDiff(sel.label, result.selections[0].runs[-1].id, sel.runs[-1].id,
                        environment.diff(base_env, sel.runs[-1].environment or {}))
                for sel in result.selections[1:]]
    return ComparisonSection(result, env_diff, monitor_series(store, result, max_charts, max_lines))


def monitor_series(store, result, max_charts: int, max_lines: int) -> list[MonitorChart]:
    """The time series (store.monitor_series) of the monitor metrics that moved, per side:
    one line per run, repetition and process."""
    shown = result.shown_monitor_rows()[:max_charts]
    if not shown or not hasattr(store, "monitor_series"):
        return []
    cache: dict[tuple[int, str], list] = {}
    out = []
    for row in shown:
        name = row.metric[len(row.monitor) + 1:]
        # The series keeps a counter as its rate: "proc-stat.ctxt" and "proc-stat.ctxt.per_s" are field "ctxt".
        fields = (name, name.removesuffix(".per_s"))
        sides = []
        for i, sel in enumerate(result.selections):
            if i and row.heads[i - 1] is None:
                continue
            key = (i, row.monitor)
            if key not in cache:
                cache[key] = store.monitor_series(sel.run_ids, row.monitor)
            lines: dict[tuple, MonitorLine] = {}
            for run_id, _monitor, repetition, process, t, values in cache[key]:
                field = next((f for f in fields if f in (values or {})), None)
                if field is None:
                    continue
                line = lines.setdefault((run_id, repetition, process), MonitorLine(run_id, repetition, [], []))
                line.t.append(t)
                line.v.append(values[field])
            if lines:
                sides.append(MonitorSide(sel.label, list(lines.values())[:max_lines], max(0, len(lines) - max_lines)))
        if sides:
            out.append(MonitorChart(row.monitor, row.metric, row.unit, sides))
    return out


def trends(history, notes: list[str], max_trends: int, threshold: float | None = None) -> Trends:
    """The change points of the first max_trends series (history.series is cut to those), found as
    `detect` finds them: an exact series (icount, instruction counts) against the exact rule's
    minimum effect (stats.exact) unless a threshold is given, so that a -0.6% step between two
    kernels is drawn where compare and detect call it."""
    from perflab.analysis import naming
    from perflab.analysis import series as series_mod
    from perflab.stats.exact import EXACT_MIN_EFFECT

    shown = history.series
    if len(shown) > max_trends:
        notes.append(f"{len(shown)} series: the first {max_trends} are drawn (narrow with --benchmark, --metric, --box)")
        shown = shown[:max_trends]
    history.series = shown
    naming.name_series(shown)
    results = series_mod.analyse(history, exact_min_effect=EXACT_MIN_EFFECT if threshold is None else threshold)
    run_ids: set[int] = set()
    for res in results:
        for p in res.series.points:
            run_ids.update(p.run_ids)
    return Trends(history, results, run_ids)


def distributions(result, history, runs, notes: list[str], max_shown: int, max_variants: int) -> list:
    """Which samples each box holds: a comparison row's sides, or a series' runs per tag."""
    if result is not None:
        # The benchmark's own rows, the significant first, then by size of change.
        order = {id(r): i for i, r in enumerate(result.rows)}
        rows = sorted(result.own_rows, key=lambda r: (not r.significant(), -r.change_size(), r.metric))
        if len(rows) > max_shown:
            notes.append(f"{len(rows)} compared metrics: distributions of the first {max_shown} "
                         "(significant first) are drawn")
        heads = len(result.labels) - 1
        return [DistributionRow(order[id(r)] * heads) for r in rows[:max_shown]]
    from perflab.analysis import naming, variant

    out: list = []
    naming.name_series(history.series)
    for s in history.series[:max_shown]:
        by_tag: dict[str, list] = {}
        latest: dict[str, dt.datetime] = {}
        # A box per tag and variant: eleven kernels under one tag are eleven boxes, not one.
        ids = [rid for p in s.points for rid in p.run_ids]
        variants = {rid: variant.of(runs[rid]) for rid in ids}
        kinds = {v.identity: v for v in variants.values()}
        vlabel = dict(zip(kinds, naming.variant_labels(list(kinds.values())))) if len(kinds) > 1 else {}
        tags = {runs[rid].tag for rid in ids}
        for rid in ids:
            r = runs[rid]
            label = r.tag if r.tag else "(untagged)"
            if vlabel:
                kind = vlabel[variants[rid].identity]
                label = kind if len(tags) == 1 else f"{kind} ({label})"
            by_tag.setdefault(label, []).append(rid)
            latest[label] = max(latest.get(label, r.started), r.started)
        tags = sorted(by_tag, key=lambda t: latest[t])[-max_variants:]
        out.append(DistributionSeries(s.name, s.box, s.metric, s.unit, [(t, by_tag[t]) for t in tags],
                                      len(by_tag) - len(tags)))
    if len(history.series) > max_shown:
        notes.append(f"distributions of the first {max_shown} of {len(history.series)} series are drawn")
    return out

"""`perflab report html`'s JSON document, from the page's view (perflab.analysis.views.page).

Formatting only: every figure was computed by the view's builder. NaN and infinities become
null (JSON has neither); the samples are written as JSON text here, once (see samples()).
docs/html.md describes the document's parts.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from itertools import groupby, repeat
from operator import itemgetter

from perflab.analysis.series import BY_COMMIT, BY_KERNEL
from perflab.analysis.views.page import PageView, SideBySide
from perflab.analysis.views.sections import ComparisonSection, DistributionRow, Trends
from perflab.stats.compare import IMPROVEMENT, REGRESSION
from perflab.stats.descriptive import ESTIMATOR_WORDS, EXACT


class RawJSON(str):
    """A part of the page's JSON encoded already (numbers and brackets only: nothing to escape)."""


def num(x) -> float | None:
    """JSON has no NaN or infinity: those become null (shown as "-")."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def iso(t: dt.datetime | None) -> str | None:
    return t.strftime("%Y-%m-%d %H:%M:%S") if t else None


def document(view: PageView) -> dict:
    """The page's data: a JSON-serialisable document, but for its samples, JSON text already
    (RawJSON), which embed_json splices in."""
    doc: dict = {"title": view.title, "generated": iso(dt.datetime.now(dt.timezone.utc)) + " UTC",
                 "filters": view.filters, "notes": view.notes}
    try:
        from perflab import __version__
        doc["version"] = __version__
    except ImportError:  # pragma: no cover
        doc["version"] = "?"
    if view.comparison is not None:
        doc["comparison"] = comparison(view.comparison, view.side_by_side)
    doc["trends"] = trends(view.trends)
    doc["runs"], doc["envs"] = runs(view.runs)
    doc["metrics"], doc["samples"], doc["sample_count"] = samples(view.sample_rows)
    doc["distributions"] = distributions(view.distributions, doc["metrics"])
    for section, render in FAMILY_SECTIONS.items():
        doc[section] = render(view.families.get(section))
    return doc


# -- comparison ---------------------------------------------------------------

def comparison(section: ComparisonSection, side: SideBySide | None = None) -> dict:
    """Every number of `compare` (the json layout's records), the detectable change beside each;
    with several heads, the side-by-side grid too (grid())."""
    from perflab.report.tabular import records

    result = section.result
    recs = records(result)
    i = 0
    for row in result.rows:
        for head, cmp in enumerate(row.heads):
            rec = recs[i]
            i += 1
            rec["testcase"] = row.testcase
            # Computed with the verdict (stats.compare): the Welch test's own standard error.
            rec["detectable"] = num(cmp.detectable) if cmp else None
            rec["shown"] = row.monitor is None or result.monitor_changed(row) or result.monitors == "all"
    for rec in recs:
        for key in ("base_stats", "head_stats"):
            if rec[key]:
                # Numbers made JSON-safe; a name (an estimator) passes as it is.
                rec[key] = {k: v if isinstance(v, str) else num(v) for k, v in rec[key].items()}
        for key in ("base_values", "head_values"):
            rec[key] = [num(v) for v in rec[key]] if rec[key] is not None else None
    env_diff = [{"head": d.head, "base_run": d.base_run, "head_run": d.head_run,
                 "diffs": [[k, str(a), str(b)] for k, a, b in d.diffs]} for d in section.env_diff]
    out = {
        "headline": headline(result) if side is None else side_headline(result, side),
        "labels": result.labels, "alpha": result.alpha, "threshold": result.threshold,
        "runs": {sel.label: sel.run_ids for sel in result.selections},
        "families": [[{"name": group.name, "tested": group.tested, "informational": group.informational,
                       "untested": group.untested} for group in groups] for groups in result.fdr_groups],
        "geomeans": [{u: num(v) for u, v in g.items()} for g in result.median_geomeans],
        "warnings": list(result.warnings),
        "measured_differently": list(result.measured_differently),
        "only_in": [[a, b] for a, b in result.one_sided],
        "monitor_only_in": len(result.one_sided_monitors),
        "common": {k: str(v) for k, v in (result.common or {}).items()},
        "env_diff": env_diff,
        "monitor_counts": result.monitor_counts(),
        # The window the monitors' figures cover (docs/monitors.md, "Windows"), when any are shown.
        **({"monitor_windows": result.monitor_windows} if result.monitor_windows else {}),
        "monitors": result.monitors,
        "rows": recs,
        "monitor_series": [{"monitor": c.monitor, "metric": c.metric, "unit": c.unit,
                            "sides": [{"label": s.label,
                                       "lines": [{"run": ln.run, "repetition": ln.repetition,
                                                  "t": [num(t) for t in ln.t], "v": [num(v) for v in ln.v]}
                                                 for ln in s.lines],
                                       "omitted": s.omitted} for s in c.sides]}
                           for c in section.monitor_series],
    }
    if side is not None:
        out["grid"] = grid(result, side)
    return out


def grid(result, side: SideBySide) -> dict:
    """One row per metric of the benchmark's own, one cell per variant (mmtests' habit): the base's
    centre, then each head's centre, %change and verdict as the comparison called it (null where
    the head did not measure it: said once, in "absent")."""
    rows = []
    for row in result.own_rows:
        cells = []
        for cmp in row.heads:
            if cmp is None:
                cells.append(None)
                continue
            cells.append({"center": num(cmp.head.center), "cov": num(cmp.head.cov), "pct": num(cmp.pct_change),
                          "verdict": cmp.verdict, "exact": bool(cmp.exact),
                          "ci": [num(b) for b in cmp.ci_adjusted] if cmp.ci_adjusted else None})
        rows.append({"testcase": row.testcase, "metric": row.metric, "unit": row.unit,
                     "base": num(row.base.center), "base_cov": num(row.base.cov), "cells": cells})
    return {"columns": side.columns, "rows": rows, "absent": [f"{column}: {what}" for column, what in side.absent]}


def side_headline(result, side: SideBySide) -> str:
    """Several heads in one line: the heads grouped by what they called, against the base
    ("against 6.1.0-47 (2 metrics): 2 regressions at 6.1.0-50, 6.1.0-53; no change at 6.12.117")."""
    groups: dict[tuple[int, int], list[str]] = {}
    for calls in side.calls:
        groups.setdefault((calls.regressions, calls.improvements), []).append(calls.column)
    parts = []
    for (regressions, improvements), columns in groups.items():
        said = [_count(n, word) for n, word in ((regressions, "regression"), (improvements, "improvement")) if n]
        parts.append(f"{', '.join(said) or 'no change'} at {', '.join(columns)}")
    metrics = max((c.compared for c in side.calls), default=0)
    return f"against {side.columns[0]} ({_count(metrics, 'metric')}): " + "; ".join(parts)


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def headline(result) -> str:
    """The verdict the page opens with: "2 regressions, 1 improvement among 40 metrics; base v6.7 (9 runs), head v6.8 (9 runs)"."""
    heads = []
    for i, label in enumerate(result.labels[1:]):
        rows = [r for r in result.own_rows if r.heads[i] is not None]
        verdicts = [r.heads[i].verdict for r in rows]
        text = (f"{_count(verdicts.count(REGRESSION), 'regression')}, {_count(verdicts.count(IMPROVEMENT), 'improvement')}"
                f" among {_count(len(rows), 'metric')}")
        heads.append(text if len(result.labels) == 2 else f"{label}: {text}")
    sides = [f"{'base' if i == 0 else 'head'} {sel.label} ({_count(len(sel.runs), 'run')})"
             for i, sel in enumerate(result.selections)]
    return "; ".join(heads + [", ".join(sides)])


# -- trends -------------------------------------------------------------------

def _figure_words(points) -> str:
    """What a trend's points are: the least disturbed sample (exact points whose samples settle),
    the metric kind's estimator (the others), or both, said."""
    exact = {p.figure is not None for p in points}
    kind = ESTIMATOR_WORDS.get(points[0].estimator, "") if points else ""
    if exact == {True}:
        return ESTIMATOR_WORDS[EXACT]
    if exact == {True, False}:
        return f"{ESTIMATOR_WORDS[EXACT]} where its samples settle, else {kind}"
    return kind


def trends(found: Trends) -> list[dict]:
    """Per series: its points (the runs of each, its level), the levels between change points, the change points.

    A point's date, commit and tag are the page's run records (runs[...]): not repeated here."""
    history = found.history
    out = []
    for res in found.results:
        s, d = res.series, res.detection
        # A series' own order: in one history, guest series across kernels are in kernel order, others in time.
        order = s.order
        trend = {"testbox": s.box, "benchmark": s.benchmark, "params": s.params, "name": s.name, "metric": s.metric,
                 "unit": s.unit, "direction": s.direction, "order": order,
                 "runs": [p.run_ids for p in s.points], "y": [num(p.value) for p in s.points],
                 # what each point's y is (stats.descriptive: the estimator compare uses)
                 "figure": _figure_words(s.points)}
        if order == BY_KERNEL:
            trend["labels"] = [p.kernel for p in s.points]   # the x axis names kernels, not runs
        if history.order == BY_COMMIT:
            commits = [history.commits.get(p.commit or "") for p in s.points]
            trend["x"] = [c.position if c else None for c in commits]
            trend["subjects"] = [c.subject if c else None for c in commits]
        levels = []
        for k, c in enumerate(d.change_points):
            if k == 0:
                levels.append([c.before.start, c.before.stop, num(c.before.mean)])
            levels.append([c.after.start, c.after.stop, num(c.after.mean)])
        trend.update({
            "levels": levels, "outliers": list(d.outliers),
            "noise_cov": num(d.noise_cov), "detectable_mid": num(d.detectable_mid),
            "changes": [{"index": c.index, "change": num(c.change), "ci": [num(c.ci[0]), num(c.ci[1])],
                         "p": num(c.p_value), "detectable": num(c.detectable), "kind": k}
                        for c, k in zip(d.change_points, res.kinds)],
        })
        out.append(trend)
    return out


# -- runs, samples, environments ----------------------------------------------

def runs(found: dict[int, object]) -> tuple[dict, list]:
    envs: list[dict] = []
    env_index: dict[object, int] = {}
    out = {}
    for rid, r in sorted(found.items()):
        facts = r.environment or {}
        # The store keeps each set of facts once: its id names it (no need to compare the facts).
        key = getattr(r, "environment_id", None) or json.dumps(facts, sort_keys=True, default=str)
        if key not in env_index:
            env_index[key] = len(envs)
            envs.append({k: str(v) for k, v in facts.items()})
        out[str(rid)] = {"tag": r.tag, "commit": r.commit, "dirty": bool(r.dirty), "started": iso(r.started),
                         "status": r.status, "testbox": r.box, "benchmark": r.benchmark, "name": r.name,
                         "comment": r.comment, "params": {k: str(v) for k, v in (r.params or {}).items()},
                         "env": env_index[key]}
    return out, envs


def samples(rows_of: dict[int, list]) -> tuple[list[str], RawJSON, int]:
    """Every sample of the page's runs as JSON, {run: [[metric index, value, value, ...], ...]},
    values in repetition order (the store returns them ordered by run, metric, repetition) at
    7 significant digits (the statistics use the stored values); and how many there are.

    Written as text here, once: 50,000 floats through json.dumps cost more than the rest of
    the page's JSON. The per-sample work (formatting, joining) is in C (map, str.join)."""
    metrics: list[str] = []
    index: dict[str, int] = {}
    run_parts, count = [], 0
    key, value = itemgetter(1), itemgetter(2)
    for rid, rows in rows_of.items():
        groups = []
        for metric, group in groupby(rows, key):
            k = index.get(metric)
            if k is None:
                k = index[metric] = len(metrics)
                metrics.append(metric)
            values = list(map(value, group))
            count += len(values)
            text = ",".join(map(format, values, repeat(".7g", len(values))))
            if "n" in text:   # nan, inf: JSON has neither (shown as "-")
                text = ",".join("null" if "n" in v else v for v in text.split(","))
            groups.append(f"[{k},{text}]")
        if groups:
            run_parts.append(f'"{rid}":[{",".join(groups)}]')
    return metrics, RawJSON("{" + ",".join(run_parts) + "}"), count


# -- distributions, family sections ---------------------------------------------

def distributions(found: list, metrics: list[str]) -> list[dict]:
    """Which samples each box holds: a comparison row's sides ({"row": i}: the values are in the
    comparison's rows), or a series' runs per tag ({"metric": index, "variants": [{label, runs}]})."""
    index = {m: i for i, m in enumerate(metrics)}
    out = []
    for d in found:
        if isinstance(d, DistributionRow):
            out.append({"row": d.row})
            continue
        out.append({"testcase": d.testcase, "testbox": d.box, "metric": index.get(d.metric), "unit": d.unit,
                    "variants": [{"label": t, "runs": rids} for t, rids in d.variants],
                    "omitted_tags": d.omitted_tags})
    return out


def scaling(view) -> list[dict]:
    if view is None:
        return []
    by_test: dict[str, list] = {}
    variants = view.variants if len(view.variants) == len(view.curves) else [""] * len(view.curves)
    for v, c in zip(variants, view.curves):
        if len({p.tasks for p in c.points}) < 2:
            continue     # one task count is no curve: its figure is in the trends and the distributions
        by_test.setdefault(c.testcase, []).append({
            "variant": v, "stddev": [num(p.summary.stddev) for p in c.points],
            "mode": c.mode, "tasks": [p.tasks for p in c.points], "ops": [num(p.summary.center) for p in c.points],
            "linear": [num(p.linear) for p in c.points], "efficiency": [num(p.efficiency) for p in c.points],
            "cov": [num(p.summary.cov) for p in c.points]})
    return [{"testcase": t, "modes": by_test[t]} for t in sorted(by_test)]


def lmbench(view) -> str | None:
    """The LMbench 2.0 summary (report.lmbench's text): a row per operand, or per run."""
    from perflab.report.lmbench import render_summary

    return render_summary(view.rows, icount=view.icount) if view is not None else None


def kernbench(view) -> str | None:
    """kernbench's blocks (report.kernbench's text): a column per operand, or per tag."""
    if view is None:
        return None
    from perflab.report.kernbench import render_report

    return render_report(view)


# A family view hook's PAGE_SECTION -> its part of the document, in the document's order.
FAMILY_SECTIONS = {"scaling": scaling, "lmbench": lmbench, "kernbench": kernbench}

"""`perflab report html`: one self-contained HTML file with every view perflab prints.

The page is a template (html_assets/report.html), its stylesheet and script, plotly.js
from the plotly package (its offline bundle, inlined: nothing is fetched from a network)
and one JSON document with the data. This module gathers that document from the
store and from the modules that compute the figures (perflab.analysis.comparison,
perflab.analysis.series with stats.changepoints, stats.scaling, stats.kernbench, stats.power)
and writes the file; it computes no statistic itself. The script builds every table
and chart from the JSON, setting user strings as text (textContent), never as markup;
in the JSON every "<", ">" and "&" is escaped so no string can end the script element.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import sys
import tempfile
from dataclasses import dataclass
from importlib import util
from itertools import groupby, repeat
from operator import itemgetter
from pathlib import Path

from perflab.core.errors import PerflabError, UsageProblem

ASSETS = Path(__file__).with_name("html_assets")
# Beyond these the page would take longer to open than a reader waits; what is left
# out is said on the page.
MAX_TRENDS = 120
MAX_DISTRIBUTIONS = 60
MAX_VARIANTS = 12        # distributions per tag, without operands: the most recent tags
MAX_LMBENCH_ROWS = 40
MAX_MONITOR_CHARTS = 12  # time series of the monitors that moved
MAX_MONITOR_LINES = 24   # per side: (run, repetition, process) lines of one metric


@dataclass
class Filters:
    """What `report html` selects: operands (base, heads) and run filters."""

    operands: tuple[str, ...] = ()
    benchmark: str | None = None
    metrics: tuple[str, ...] = ()   # substrings of metric names, as compare's --metric
    box: str | None = None
    tag: str | None = None
    since: dt.datetime | None = None
    repo: str | None = None
    branch: str | None = None
    alpha: float = 0.05
    threshold: float = 0.01
    cross_box: bool = False
    monitors: str = "changed"       # compare's --monitors: which monitor rows the page shows
    title: str | None = None

    def describe(self) -> str:
        """The filters as given (control characters made visible: messages go to a terminal)."""
        from perflab.core.text import printable

        parts = [f"--benchmark {self.benchmark}" if self.benchmark else "",
                 " ".join(f"--metric {m}" for m in self.metrics), f"--box {self.box}" if self.box else "",
                 f"--tag {self.tag}" if self.tag else "", f"--since {self.since:%Y-%m-%d %H:%M}" if self.since else ""]
        return printable(" ".join(p for p in parts if p), 300)


def _num(x) -> float | None:
    """JSON has no NaN or infinity: those become null (shown as "-")."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _iso(t: dt.datetime | None) -> str | None:
    return t.strftime("%Y-%m-%d %H:%M:%S") if t else None


_RUN_ID = itemgetter(0)


class _OneRead:
    """The store, each query answered from it once: the comparison, the trends and the page ask
    for overlapping runs (a report of 1,000 runs read its 50,000 samples three times) and for
    the same run list (find_runs three times)."""

    def __init__(self, store):
        self._store = store
        self._rows: dict[int, list] = {}
        self._found: dict[tuple, list] = {}

    def __getattr__(self, name):
        return getattr(self._store, name)

    def find_runs(self, **kw):
        if kw.get("ids") is not None or kw.get("uuids") is not None:
            return self._store.find_runs(**kw)
        key = tuple(sorted((k, v) for k, v in kw.items() if v is not None))
        if key not in self._found:
            self._found[key] = self._store.find_runs(**kw)
        return list(self._found[key])

    def read(self, run_ids) -> list[int]:
        """Read the samples of the runs not read yet; the ids, sorted."""
        ids = sorted(set(run_ids))
        missing = [i for i in ids if i not in self._rows]
        for chunk in range(0, len(missing), 5000):
            part = missing[chunk:chunk + 5000]
            for i in part:
                self._rows[i] = []
            # Ordered by run: one slice per run (groupby works in C; 50,000 appends did not).
            for rid, rows in groupby(self._store.samples(part), _RUN_ID):
                self._rows[rid] = list(rows)
        return ids

    def samples(self, run_ids):
        # The store's order (run, metric, repetition): runs ascending, each run's rows as read.
        rows = self._rows
        return [row for i in self.read(run_ids) for row in rows[i]]

    def rows_of(self, run_id: int) -> list:
        return self._rows[run_id]


class _RawJSON(str):
    """A part of the page's JSON encoded already (numbers and brackets only: nothing to escape)."""


def gather(store, f: Filters) -> dict:
    """The page's data: a JSON-serialisable document (see docs/html.md for its parts), but for
    its samples, JSON text already (_RawJSON), which embed_json splices in."""
    from perflab.analysis import series as series_mod
    from perflab.analysis.selection import USABLE_STATUSES

    if len(f.operands) == 1:
        raise UsageProblem("report html: one operand given; give a base and at least one head to compare "
                           "(or none: every run matching the filters)")
    doc: dict = {"title": f.title or "perflab report", "generated": _iso(dt.datetime.now(dt.timezone.utc)) + " UTC",
                 "filters": f.describe(), "notes": []}
    try:
        from perflab import __version__
        doc["version"] = __version__
    except ImportError:  # pragma: no cover
        doc["version"] = "?"
    store = _OneRead(store)
    runs = [r for r in store.find_runs(benchmark=f.benchmark, tag=f.tag, box=f.box, since=f.since)
            if r.status in USABLE_STATUSES]
    store.read([r.id for r in runs])
    result = None
    if f.operands:
        from perflab.analysis.comparison import compare

        result = compare(store, list(f.operands), alpha=f.alpha, threshold=f.threshold, cross_box=f.cross_box,
                         benchmark=f.benchmark, metrics=list(f.metrics) or None, monitors=f.monitors)
    if not runs and result is None:
        what = f.describe() or "(no filter)"
        total = len(store.find_runs(limit=1))
        raise PerflabError(f"report html: no usable run matches {what}"
                           + ("" if total else "; the store holds no runs yet") + "; no file written")
    globs = tuple(f"*{m}*" for m in f.metrics)
    history = series_mod.build(store, benchmark=f.benchmark, metrics=globs, box=f.box, tag=f.tag, since=f.since,
                               repo=f.repo, branch=f.branch)
    page_runs = {r.id: r for r in runs}   # store rows of every run the page speaks of
    if result is not None:
        for sel in result.selections:
            for r in sel.runs:
                page_runs[r.id] = r
        doc["comparison"] = _comparison(result)
        doc["comparison"]["monitor_series"] = _monitor_series(store, result)
        keys = {(row.testbox, row.benchmark, json.dumps(row.params, sort_keys=True, default=str), row.metric)
                for row in result.own_rows}
        # The trends of what was compared (a cross-box comparison pools testboxes: match without them).
        loose = {k[1:] for k in keys}
        history.series = [s for s in history.series
                          if (s.testbox, s.benchmark, s.params, s.metric) in keys or (s.benchmark, s.params, s.metric) in loose]
    if not history.series and result is None:
        raise PerflabError(f"report html: {len(runs)} run(s) match {f.describe() or '(no filter)'} but no metric"
                           + (f" matches --metric {', '.join(f.metrics)}" if f.metrics else " holds samples")
                           + "; no file written")
    doc["trends"], trend_runs = _trends(history, series_mod, doc["notes"])
    if history.skipped:
        doc["notes"].append(f"{len(history.skipped)} run(s) left out of the trends: "
                            + "; ".join(f"#{rid} {why}" for rid, why in history.skipped[:5])
                            + (" ..." if len(history.skipped) > 5 else ""))
    missing = sorted(trend_runs - set(page_runs))
    if missing:
        page_runs.update({r.id: r for r in store.find_runs(ids=missing)})
    doc["runs"], doc["envs"] = _runs(page_runs)
    doc["metrics"], doc["samples"], doc["sample_count"] = _samples(store, sorted(page_runs))
    doc["distributions"] = _distributions(result, history, page_runs, doc["metrics"], doc["notes"])
    doc["scaling"] = _scaling(store, list(page_runs.values()) if result is None else
                              [r for sel in result.selections for r in sel.runs])
    chosen = [(sel.label, sel.runs) for sel in result.selections] if result is not None else None
    doc["lmbench"] = _lmbench(store, chosen, list(page_runs.values()), doc["notes"])
    doc["kernbench"] = _kernbench(store, chosen, list(page_runs.values()))
    return doc


# -- comparison ---------------------------------------------------------------

def _comparison(result) -> dict:
    """Every number of `compare` (the json layout's records), the detectable change beside each."""
    from perflab.core import environment
    from perflab.report.tabular import records

    recs = records(result)
    i = 0
    for row in result.rows:
        for head, cmp in enumerate(row.heads):
            rec = recs[i]
            i += 1
            rec["testcase"] = row.testcase
            # Computed with the verdict (stats.compare): the Welch test's own standard error.
            rec["detectable"] = _num(cmp.detectable) if cmp else None
            rec["shown"] = row.monitor is None or result.monitor_changed(row) or result.monitors == "all"
    for rec in recs:
        for key in ("base_stats", "head_stats"):
            if rec[key]:
                rec[key] = {k: _num(v) for k, v in rec[key].items()}
        for key in ("base_values", "head_values"):
            rec[key] = [_num(v) for v in rec[key]] if rec[key] is not None else None
    base_env = result.selections[0].runs[-1].environment or {}
    env_diff = []
    for sel in result.selections[1:]:
        diffs = environment.diff(base_env, sel.runs[-1].environment or {})
        env_diff.append({"head": sel.label, "base_run": result.selections[0].runs[-1].id, "head_run": sel.runs[-1].id,
                         "diffs": [[k, str(a), str(b)] for k, a, b in diffs]})
    return {
        "labels": result.labels, "alpha": result.alpha, "threshold": result.threshold,
        "runs": {sel.label: sel.run_ids for sel in result.selections},
        "families": [[{"name": fam.name, "tested": fam.tested, "informational": fam.informational,
                       "untested": fam.untested} for fam in fams] for fams in result.families],
        "geomeans": [{u: _num(v) for u, v in g.items()} for g in result.median_geomeans],
        "warnings": list(result.warnings),
        "only_in": [[a, b] for a, b in result.one_sided],
        "monitor_only_in": len(result.one_sided_monitors),
        "common": {k: str(v) for k, v in (result.common or {}).items()},
        "env_diff": env_diff,
        "monitor_counts": result.monitor_counts(),
        "monitors": result.monitors,
        "rows": recs,
    }


def _monitor_series(store, result) -> list[dict]:
    """The time series (store.monitor_series) of the monitor metrics that moved, per side:
    one line per run, repetition and process, t in seconds from the start of the timed part."""
    shown = result.shown_monitor_rows()[:MAX_MONITOR_CHARTS]
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
            lines: dict[tuple, dict] = {}
            for run_id, _monitor, repetition, process, t, values in cache[key]:
                field = next((f for f in fields if f in (values or {})), None)
                if field is None:
                    continue
                line = lines.setdefault((run_id, repetition, process), {"run": run_id, "repetition": repetition,
                                                                         "t": [], "v": []})
                line["t"].append(_num(t))
                line["v"].append(_num(values[field]))
            if lines:
                sides.append({"label": sel.label, "lines": list(lines.values())[:MAX_MONITOR_LINES],
                              "omitted": max(0, len(lines) - MAX_MONITOR_LINES)})
        if sides:
            out.append({"monitor": row.monitor, "metric": row.metric, "unit": row.unit, "sides": sides})
    return out


# -- trends -------------------------------------------------------------------

def _trends(history, series_mod, notes: list[str]) -> tuple[list[dict], set[int]]:
    """Per series: its points (the runs of each, its level), the levels between change points, the change points.

    A point's date, commit and tag are the page's run records (runs[...]): not repeated here."""
    from perflab.analysis.series import BY_COMMIT

    shown = history.series
    if len(shown) > MAX_TRENDS:
        notes.append(f"{len(shown)} series: the first {MAX_TRENDS} are drawn (narrow with --benchmark, --metric, --box)")
        shown = shown[:MAX_TRENDS]
    history.series = shown
    results = series_mod.analyse(history)
    out, run_ids = [], set()
    for res in results:
        s, d = res.series, res.detection
        for p in s.points:
            run_ids.update(p.run_ids)
        trend = {"testbox": s.testbox, "benchmark": s.benchmark, "params": s.params, "metric": s.metric,
                 "unit": s.unit, "direction": s.direction, "order": history.order,
                 "runs": [p.run_ids for p in s.points], "y": [_num(p.value) for p in s.points]}
        if history.order == BY_COMMIT:
            commits = [history.commits.get(p.commit or "") for p in s.points]
            trend["x"] = [c.position if c else None for c in commits]
            trend["subjects"] = [c.subject if c else None for c in commits]
        levels = []
        for k, c in enumerate(d.change_points):
            if k == 0:
                levels.append([c.before.start, c.before.stop, _num(c.before.mean)])
            levels.append([c.after.start, c.after.stop, _num(c.after.mean)])
        trend.update({
            "levels": levels, "outliers": list(d.outliers),
            "noise_cov": _num(d.noise_cov), "detectable_mid": _num(d.detectable_mid),
            "changes": [{"index": c.index, "change": _num(c.change), "ci": [_num(c.ci[0]), _num(c.ci[1])],
                         "p": _num(c.p_value), "detectable": _num(c.detectable), "kind": k}
                        for c, k in zip(d.change_points, res.kinds)],
        })
        out.append(trend)
    return out, run_ids


# -- runs, samples, environments ----------------------------------------------

def _runs(runs: dict[int, object]) -> tuple[dict, list]:
    envs: list[dict] = []
    env_index: dict[object, int] = {}
    out = {}
    for rid, r in sorted(runs.items()):
        facts = r.environment or {}
        # The store keeps each set of facts once: its id names it (no need to compare the facts).
        key = getattr(r, "environment_id", None) or json.dumps(facts, sort_keys=True, default=str)
        if key not in env_index:
            env_index[key] = len(envs)
            envs.append({k: str(v) for k, v in facts.items()})
        out[str(rid)] = {"tag": r.tag, "commit": r.commit, "dirty": bool(r.dirty), "started": _iso(r.started),
                         "status": r.status, "testbox": r.testbox, "benchmark": r.benchmark, "name": r.name,
                         "comment": r.comment, "params": {k: str(v) for k, v in (r.params or {}).items()},
                         "env": env_index[key]}
    return out, envs


def _samples(store: _OneRead, run_ids: list[int]) -> tuple[list[str], _RawJSON, int]:
    """Every sample of the page's runs as JSON, {run: [[metric index, value, value, ...], ...]},
    values in repetition order (the store returns them ordered by run, metric, repetition) at
    7 significant digits (the statistics use the stored values); and how many there are.

    Written as text here, once: 50,000 floats through json.dumps cost more than the rest of
    the page's JSON. The per-sample work (formatting, joining) is in C (map, str.join)."""
    metrics: list[str] = []
    index: dict[str, int] = {}
    run_parts, count = [], 0
    key, value = itemgetter(1), itemgetter(2)
    store.read(run_ids)
    for rid in run_ids:
        groups = []
        for metric, rows in groupby(store.rows_of(rid), key):
            k = index.get(metric)
            if k is None:
                k = index[metric] = len(metrics)
                metrics.append(metric)
            values = list(map(value, rows))
            count += len(values)
            text = ",".join(map(format, values, repeat(".7g", len(values))))
            if "n" in text:   # nan, inf: JSON has neither (shown as "-")
                text = ",".join("null" if "n" in v else v for v in text.split(","))
            groups.append(f"[{k},{text}]")
        if groups:
            run_parts.append(f'"{rid}":[{",".join(groups)}]')
    return metrics, _RawJSON("{" + ",".join(run_parts) + "}"), count


# -- distributions --------------------------------------------------------------

def _distributions(result, history, runs, metrics, notes) -> list[dict]:
    """Which samples each box holds: a comparison row's sides ({"row": i}: the values are in the
    comparison's rows), or a series' runs per tag ({"metric": index, "variants": [{label, runs}]})."""
    out = []
    if result is not None:
        # The benchmark's own rows, the significant first, then by size of change.
        order = {id(r): i for i, r in enumerate(result.rows)}
        rows = sorted(result.own_rows, key=lambda r: (not r.significant(), -r.change_size(), r.metric))
        if len(rows) > MAX_DISTRIBUTIONS:
            notes.append(f"{len(rows)} compared metrics: distributions of the first {MAX_DISTRIBUTIONS} "
                         "(significant first) are drawn")
        heads = len(result.labels) - 1
        return [{"row": order[id(r)] * heads} for r in rows[:MAX_DISTRIBUTIONS]]
    index = {m: i for i, m in enumerate(metrics)}
    for s in history.series[:MAX_DISTRIBUTIONS]:
        by_tag: dict[str, list] = {}
        latest: dict[str, dt.datetime] = {}
        for p in s.points:
            for rid in p.run_ids:
                r = runs[rid]
                label = r.tag if r.tag else "(untagged)"
                by_tag.setdefault(label, []).append(rid)
                latest[label] = max(latest.get(label, r.started), r.started)
        tags = sorted(by_tag, key=lambda t: latest[t])[-MAX_VARIANTS:]
        out.append({"testcase": "/".join([s.benchmark] + [str(v) for v in json.loads(s.params).values()
                                                          if v not in (None, "", [], {})]),
                    "testbox": s.testbox, "metric": index.get(s.metric), "unit": s.unit,
                    "variants": [{"label": t, "runs": by_tag[t]} for t in tags],
                    "omitted_tags": len(by_tag) - len(tags)})
    if len(history.series) > MAX_DISTRIBUTIONS:
        notes.append(f"distributions of the first {MAX_DISTRIBUTIONS} of {len(history.series)} series are drawn")
    return out


# -- scaling, LMbench, kernbench ------------------------------------------------

def _scaling(store, runs) -> list[dict]:
    key_of = {}
    for r in runs:
        p = r.params or {}
        if r.benchmark == "will-it-scale" and {"test", "mode", "nr_task"} <= set(p):
            try:
                key_of[r.id] = (str(p["test"]), str(p["mode"]), int(p["nr_task"]))
            except (TypeError, ValueError):
                continue
    if not key_of:
        return []
    # Imported here: stats.scaling needs scipy.stats, a second of start-up a report without
    # will-it-scale runs does not pay.
    from perflab.benchmarks.will_it_scale import WORKLOAD
    from perflab.stats.scaling import curves

    workloads: dict[tuple, list[float]] = {}
    for smp in store.samples(list(key_of)):
        if smp.metric == WORKLOAD:
            workloads.setdefault(key_of[smp.run_id], []).append(smp.value)
    by_test: dict[str, list] = {}
    for c in curves(workloads):
        by_test.setdefault(c.testcase, []).append({
            "mode": c.mode, "tasks": [p.tasks for p in c.points], "ops": [_num(p.summary.center) for p in c.points],
            "linear": [_num(p.linear) for p in c.points], "efficiency": [_num(p.efficiency) for p in c.points],
            "cov": [_num(p.summary.cov) for p in c.points]})
    return [{"testcase": t, "modes": by_test[t]} for t in sorted(by_test)]


def _lmbench(store, chosen, runs, notes) -> str | None:
    """The LMbench 2.0 summary (report.lmbench's text): a row per operand, or per run."""
    if chosen is not None:
        groups = [(label, [r for r in rs if r.benchmark == "lmbench"]) for label, rs in chosen]
        groups = [(label, rs) for label, rs in groups if rs]
    else:
        mine = [r for r in runs if r.benchmark == "lmbench"]
        if len(mine) > MAX_LMBENCH_ROWS:
            notes.append(f"LMbench summary: the last {MAX_LMBENCH_ROWS} of {len(mine)} runs")
            mine = mine[-MAX_LMBENCH_ROWS:]
        groups = [(f"{(r.environment or {}).get('kernel_release', '?')}{'-' + r.tag if r.tag else ''} #{r.id}", [r])
                  for r in mine]
    if not groups:
        return None
    from perflab.benchmarks.lmbench.catalog import FIGURES
    from perflab.report.lmbench import render_summary
    from perflab.stats.scaling import pooled_means

    sums = store.metric_sums([r.id for _, rs in groups for r in rs], FIGURES)
    rows_of: dict[int, list[int]] = {}
    for i, (_, rs) in enumerate(groups):
        for r in rs:
            rows_of.setdefault(r.id, []).append(i)
    means = pooled_means(sums, rows_of, len(groups))
    return render_summary([(label, row) for (label, _), row in zip(groups, means)])


def _kernbench(store, chosen, runs) -> str | None:
    """kernbench's blocks (report.kernbench's text): a column per operand, or per tag."""
    if chosen is not None:
        columns = [(label, [r for r in rs if r.benchmark == "kernbench"]) for label, rs in chosen]
        columns = [(label, rs) for label, rs in columns if rs]
    else:
        by_tag: dict[str, list] = {}
        for r in runs:
            if r.benchmark == "kernbench":
                by_tag.setdefault(r.tag or "(untagged)", []).append(r)
        columns = list(by_tag.items())
    if not columns:
        return None
    from perflab.report.kernbench import report_columns

    return report_columns(store, columns)


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

    Parts encoded already (_RawJSON: numbers only) are appended to the top-level object after
    the escaping."""
    raw = [(k, v) for k, v in doc.items() if isinstance(v, _RawJSON)]
    text = json.dumps({k: v for k, v in doc.items() if not isinstance(v, _RawJSON)}, separators=(",", ":"),
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
    target = Path(path)
    if target.is_dir():
        raise PerflabError(f"{path}: is a directory; give a file name (e.g. {os.path.join(path, 'report.html')})")
    directory = target.parent if str(target.parent) else Path(".")
    if not directory.is_dir():
        raise PerflabError(f"{path}: directory {directory} does not exist")
    if not os.access(directory, os.W_OK | os.X_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise PerflabError(f"{path}: cannot write here (permission denied)")


def write(path: str, text: str) -> None:
    """Write the whole file or nothing (a temporary file beside it, renamed)."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".perflab-", suffix=".html.tmp")
    except OSError as e:
        raise PerflabError(f"{path}: cannot write: {e.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as e:
        raise PerflabError(f"{path}: cannot write: {e.strerror}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def report(store, f: Filters, path: str) -> dict:
    """Gather, render and write; returns the document (for the command's summary line)."""
    check_writable(path)
    doc = gather(store, f)
    write(path, render(doc))
    return doc

"""`perflab report html`'s view: every section of the page, built from a store and Filters.

The sections, in the page's order: the comparison of the operands (with the environment
differences and the time series of the monitors that moved), the trends (series with
their change points), the runs the page speaks of and their samples, the distributions,
and the sections of the families with a view hook (scaling curves, the LMbench summary,
kernbench's blocks). report.html turns this into the page's JSON and the page.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, field
from itertools import groupby
from operator import itemgetter

from perflab.core.errors import PerflabError, UsageProblem

# Beyond these the page would take longer to open than a reader waits; what is left
# out is said on the page.
MAX_TRENDS = 120
MAX_DISTRIBUTIONS = 60
MAX_VARIANTS = 12        # distributions per tag, without operands: the most recent tags
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
    threshold: float | None = None  # None: the one rule's minimum effects (1%, exact 0.1%), as compare's
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


_RUN_ID = itemgetter(0)


class OneRead:
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


@dataclass
class HeadCalls:
    """What one head's comparison with the base called, over the benchmark's own metrics."""

    column: str          # its short label (SideBySide.columns)
    regressions: int
    improvements: int
    compared: int        # metrics it measured (the base did too)


@dataclass
class SideBySide:
    """Several heads at once, read as mmtests prints them: one row per metric, one column per
    variant. The figures are the comparison's (result.rows); this says what the page adds:
    short column names, each head's calls for the one-line headline, and what a variant did not
    measure, once per variant instead of a row per metric."""

    columns: list[str]             # per operand, base first: the part of its label that tells it apart
    calls: list[HeadCalls]         # per head
    absent: list[tuple[str, str]]  # (column, what it did not measure: "no page_fault1 runs")


_LABEL_SEPARATORS = re.compile(r"([-_ ])")


def short_labels(labels: list[str]) -> list[str]:
    """The labels without the words all share at their start and end ("wis-6.1.0-47-amd64",
    "wis-6.12.107+deb12-amd64" -> "6.1.0-47", "6.12.107+deb12"): six columns of a 1400-pixel
    table. The labels as given when that would leave one empty or two alike."""
    words = [_LABEL_SEPARATORS.split(label) for label in labels]
    if len(words) < 2:
        return list(labels)
    lead = 0   # common leading parts (a word and its separator)
    while all(len(w) > lead + 2 for w in words) and len({tuple(w[lead:lead + 2]) for w in words}) == 1:
        lead += 2
    tail = 0
    while all(len(w) > lead + tail + 2 for w in words) and len({tuple(w[len(w) - tail - 2:len(w) - tail]) for w in words}) == 1:
        tail += 2
    short = ["".join(w[lead:len(w) - tail]) for w in words]
    return short if all(short) and len(set(short)) == len(short) else list(labels)


def side_by_side(result) -> SideBySide | None:
    """The side-by-side reading of a comparison of more than one head (None for one head)."""
    from perflab.stats.compare import IMPROVEMENT, REGRESSION

    heads = len(result.labels) - 1
    if heads < 2:
        return None
    columns = short_labels(list(result.labels))
    own = result.own_rows
    calls = []
    for i in range(heads):
        verdicts = [r.heads[i].verdict for r in own if r.heads[i] is not None]
        calls.append(HeadCalls(columns[i + 1], verdicts.count(REGRESSION), verdicts.count(IMPROVEMENT), len(verdicts)))
    by_testcase: dict[str, list] = {}
    for row in own:
        by_testcase.setdefault(row.testcase, []).append(row)
    absent = []
    for i in range(heads):
        missing = []
        for testcase, rows in by_testcase.items():
            lacking = [r.metric for r in rows if r.heads[i] is None]
            if len(lacking) == len(rows):
                missing.append(f"no {testcase} runs")
            elif lacking:
                missing.append(f"no {', '.join(lacking)} in {testcase}")
        if missing:
            absent.append((columns[i + 1], "; ".join(missing)))
    return SideBySide(columns, calls, absent)


@dataclass
class PageView:
    title: str
    filters: str                                   # Filters.describe()
    notes: list[str]                               # what the page left out, in the order it was decided
    comparison: object | None                      # sections.ComparisonSection
    trends: object                                 # sections.Trends
    runs: dict[int, object]                        # every run the page speaks of (store rows)
    sample_rows: dict[int, list]                   # run id -> its samples, ordered by metric, repetition
    distributions: list                            # sections.DistributionRow or DistributionSeries
    families: dict[str, object] = field(default_factory=dict)   # PAGE_SECTION -> a family hook's view or None
    side_by_side: SideBySide | None = None         # with more than one head


def build_page(store, f: Filters) -> PageView:
    """Every section's view; PerflabError when nothing matches (no file is written)."""
    from perflab.analysis import series as series_mod
    from perflab.analysis.selection import USABLE_STATUSES
    from perflab.analysis.views import page_hooks, sections

    if len(f.operands) == 1:
        raise UsageProblem("report html: one operand given; give a base and at least one head to compare "
                           "(or none: every run matching the filters)")
    notes: list[str] = []
    store = OneRead(store)
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
    comparison = None
    if result is not None:
        for sel in result.selections:
            for r in sel.runs:
                page_runs[r.id] = r
        comparison = sections.comparison(store, result, MAX_MONITOR_CHARTS, MAX_MONITOR_LINES)
        from perflab.analysis.selection import VARIANT_KEY, group_params

        # A row of one of an operand's variants (its parameters gain `variant`) is of the series
        # of its parameters, keyed as compare keys a group (selection.group_params: without a
        # guest's boot options and build, which the variant says); the series are of one line
        # each (analysis.series).
        keys = {(row.box, row.benchmark, json.dumps({k: v for k, v in row.params.items() if k != VARIANT_KEY},
                                                    sort_keys=True, default=str), row.metric)
                for row in result.own_rows}
        # The trends of what was compared (a cross-box comparison pools boxes: match without them).
        loose = {k[1:] for k in keys}

        def grouped(s) -> str:
            guest = s.variant is None or s.variant.target.guest
            return group_params(json.loads(s.params), s.benchmark, guest)

        history.series = [s for s in history.series if (s.box, s.benchmark, grouped(s), s.metric) in keys
                          or (s.benchmark, grouped(s), s.metric) in loose]
        # Of those, the lines the compared runs are on (not every flavour's of the same parameters).
        compared = {r.id for sel in result.selections for r in sel.runs}
        on_line = [s for s in history.series if any(rid in compared for p in s.points for rid in p.run_ids)]
        history.series = on_line or history.series
    if not history.series and result is None:
        raise PerflabError(f"report html: {len(runs)} run(s) match {f.describe() or '(no filter)'} but no metric"
                           + (f" matches --metric {', '.join(f.metrics)}" if f.metrics else " holds samples")
                           + "; no file written")
    trends = sections.trends(history, notes, MAX_TRENDS, f.threshold)
    if history.skipped:
        notes.append(f"{len(history.skipped)} run(s) left out of the trends: "
                     + "; ".join(f"#{rid} {why}" for rid, why in history.skipped[:5])
                     + (" ..." if len(history.skipped) > 5 else ""))
    missing = sorted(trends.run_ids - set(page_runs))
    if missing:
        page_runs.update({r.id: r for r in store.find_runs(ids=missing)})
    ids = store.read(sorted(page_runs))
    sample_rows = {rid: store.rows_of(rid) for rid in ids}
    distributions = sections.distributions(result, history, page_runs, notes, MAX_DISTRIBUTIONS, MAX_VARIANTS)
    view = PageView(f.title or "perflab report", f.describe(), notes, comparison, trends, page_runs, sample_rows,
                    distributions, side_by_side=side_by_side(result) if result is not None else None)
    chosen = [(sel.label, sel.runs) for sel in result.selections] if result is not None else None
    for hook in page_hooks():
        view.families[hook.PAGE_SECTION] = hook.page_section(store, chosen, list(page_runs.values()), notes)
    return view

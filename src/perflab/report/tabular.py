"""json and csv: every number of the comparison, for programs and spreadsheets.

Strings are exact in json (its own escapes keep control characters off a
terminal); csv, printed as it is, shows a control character as `\x1b` (as
the text layouts do: a tag holding an escape must not retitle the reader's
window), and a cell that a spreadsheet would run as a formula is guarded
(perflab.core.spreadsheet).
`ci_low`/`ci_high` are the interval at the FDR-adjusted level `ci_level`,
which excludes zero exactly when `p_adjusted` < alpha; the unadjusted one
(each end a one-sided 1 - alpha bound) is `ci_unadjusted_low`/`_high`.
Every row kept is here whatever `--monitors` shows (`none` drops monitor rows
before the statistics): `monitor` names the monitor of a monitor metric
(empty for the benchmark's own), `noise` says why the text layouts' changed
view leaves a significant monitor row out (perflab.analysis.comparison's display rules).
An exact metric (perflab.stats.exact) has `exact` true and its `resolution` (json: only
its records have them; csv: the columns are empty for the others): `test` is "exact",
`p_adjusted` is null and the interval is the change ± `resolution`.
`estimator` names what each side's `center` is (stats.descriptive.estimator: "hmean" for a
higher-is-better rate, "mean" otherwise, "exact" for an exact metric's least disturbed sample):
a field of the record beside the numbers, so a reader of `*_stats` finds numbers only.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math

from perflab.analysis.comparison import ComparisonResult
from perflab.analysis.views.comparison import ComparisonView
from perflab.core.spreadsheet import guard
from perflab.core.text import printable

SUMMARY_FIELDS = ("n", "mean", "hmean", "median", "stddev", "cov", "min", "max", "center",
                  "bamean", "median_low", "median_high")


def _clean(v):
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    return v


def _summary(s) -> dict:
    return {k: _clean(getattr(s, k)) for k in SUMMARY_FIELDS}


def _bound(ci, i):
    return _clean(ci[i]) if ci else None


def records(result: ComparisonResult) -> list[dict]:
    out = []
    for row in result.rows:
        for i, cmp in enumerate(row.heads):
            rec = {
                "testbox": row.box, "benchmark": row.benchmark, "params": row.params, "metric": row.metric,
                "unit": row.unit, "direction": row.direction, "base": result.labels[0], "head": result.labels[i + 1],
                "family": row.fdr_group,
                "monitor": row.monitor,
                "noise": row.noise() if row.significant() else None,
                # What `center` is (stats.descriptive: hmean, mean, exact): a name, beside the numbers.
                "estimator": row.base.estimator,
                "base_stats": _summary(row.base),
                "head_stats": _summary(cmp.head) if cmp else None,
                "pct_change": _clean(cmp.pct_change) if cmp else None,
                "median_change": _clean(cmp.median_change) if cmp else None,
                "ci_low": _bound(cmp.ci_adjusted, 0) if cmp else None,
                "ci_high": _bound(cmp.ci_adjusted, 1) if cmp else None,
                "ci_level": _clean(cmp.ci_level) if cmp else None,
                "ci_unadjusted_low": _bound(cmp.ci, 0) if cmp else None,
                "ci_unadjusted_high": _bound(cmp.ci, 1) if cmp else None,
                "p_value": _clean(cmp.p_value) if cmp else None,
                "p_adjusted": _clean(cmp.p_adjusted) if cmp else None,
                "family_size": cmp.fdr_group_size if cmp else None,
                # The smallest change these samples detect with 90% power (null: none finite).
                "detectable_change": _clean(cmp.detectable) if cmp else None,
                "test": cmp.test if cmp else None,
                "verdict": cmp.verdict if cmp else "absent from head",
                "warnings": [str(w) for w in cmp.warnings] if cmp else [],
                "base_values": row.base_values,
                "head_values": row.head_values[i],
            }
            if cmp is not None and cmp.exact:
                # Only an exact metric's record has these (the others' are as they were).
                rec["exact"], rec["resolution"] = True, _clean(cmp.resolution)
            out.append(rec)
    return out


def _group(f) -> dict:
    """An FDR group as json has it: `exact` (metrics called against their resolution) only when some are."""
    return {k: v for k, v in dataclasses.asdict(f).items() if k != "exact" or v}


def render_json(view: ComparisonView) -> str:
    result = view.result
    doc = {
        "operands": result.labels,
        "runs": {sel.label: sel.run_ids for sel in result.selections},
        "alpha": result.alpha, "threshold": result.threshold,
        **({"exact_threshold": result.exact_minimum} if any(f.exact for g in result.fdr_groups for f in g) else {}),
        "primary": result.primary,
        "families": {label: [_group(f) for f in groups] for label, groups in zip(result.labels[1:], result.fdr_groups)},
        "common": result.common,
        "environment_differences": [list(x) for x in result.env_diff] if result.env_diff else [],
        "monitors": result.monitors,
        # The window the monitors' figures cover (docs/monitors.md, "Windows"), when any are shown.
        **({"monitor_windows": result.monitor_windows} if result.monitor_windows else {}),
        "only_in": [{"operand": a, "group": b} for a, b in result.one_sided],
        "monitor_only_in": [{"operand": a, "monitor": m, "group": b} for a, m, b, _absent in result.one_sided_monitors],
        "warnings": result.warnings,
        "metrics": records(result),
    }
    return json.dumps(doc, indent=1, default=str) + "\n"


def render_csv(view: ComparisonView) -> str:
    buf = io.StringIO()
    cols = ["testbox", "benchmark", "params", "metric", "unit", "direction", "base", "head", "family", "monitor",
            "estimator"]
    cols += [f"base_{k}" for k in SUMMARY_FIELDS] + [f"head_{k}" for k in SUMMARY_FIELDS]
    cols += ["pct_change", "median_change", "ci_low", "ci_high", "ci_level", "ci_unadjusted_low", "ci_unadjusted_high",
             "p_value", "p_adjusted", "family_size", "detectable_change", "test", "verdict", "noise", "warnings",
             "exact", "resolution"]
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    w.writeheader()
    for rec in records(view.result):
        flat = {k: rec[k] for k in cols if k in rec}
        flat["params"] = json.dumps(rec["params"], sort_keys=True)
        for side in ("base", "head"):
            for k in SUMMARY_FIELDS:
                flat[f"{side}_{k}"] = (rec[f"{side}_stats"] or {}).get(k)
        flat["warnings"] = "; ".join(rec["warnings"])
        flat["exact"] = "exact" if rec.get("exact") else ""
        w.writerow({k: guard("" if v is None else repr(v) if isinstance(v, float)
                             else printable(v, None) if isinstance(v, str) else v) for k, v in flat.items()})
    return buf.getvalue()

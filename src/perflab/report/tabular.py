"""json and csv: every number of the comparison, for programs and spreadsheets."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math

from perflab.comparison import ComparisonResult

SUMMARY_FIELDS = ("n", "mean", "hmean", "median", "stddev", "cov", "min", "max", "center")


def _clean(v):
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    return v


def _summary(s) -> dict:
    return {k: _clean(getattr(s, k)) for k in SUMMARY_FIELDS}


def records(result: ComparisonResult) -> list[dict]:
    out = []
    for row in result.rows:
        for i, cmp in enumerate(row.heads):
            rec = {
                "testbox": row.testbox, "benchmark": row.benchmark, "params": row.params, "metric": row.metric,
                "unit": row.unit, "direction": row.direction, "base": result.labels[0], "head": result.labels[i + 1],
                "base_stats": _summary(row.base),
                "head_stats": _summary(cmp.head) if cmp else None,
                "pct_change": _clean(cmp.pct_change) if cmp else None,
                "ci_low": _clean(cmp.ci[0]) if cmp and cmp.ci else None,
                "ci_high": _clean(cmp.ci[1]) if cmp and cmp.ci else None,
                "p_value": _clean(cmp.p_value) if cmp else None,
                "p_adjusted": _clean(cmp.p_adjusted) if cmp else None,
                "test": cmp.test if cmp else None,
                "verdict": cmp.verdict if cmp else "absent from head",
                "warnings": list(cmp.warnings) if cmp else [],
                "base_values": row.base_values,
                "head_values": row.head_values[i],
            }
            out.append(rec)
    return out


def render_json(result: ComparisonResult) -> str:
    doc = {
        "operands": result.labels,
        "runs": {sel.label: sel.run_ids for sel in result.selections},
        "alpha": result.alpha, "threshold": result.threshold,
        "common": result.common,
        "environment_differences": [list(x) for x in result.env_diff] if result.env_diff else [],
        "only_in": [{"operand": a, "group": b} for a, b in result.one_sided],
        "warnings": result.warnings,
        "metrics": records(result),
    }
    return json.dumps(doc, indent=1, default=str) + "\n"


def render_csv(result: ComparisonResult) -> str:
    buf = io.StringIO()
    cols = ["testbox", "benchmark", "params", "metric", "unit", "direction", "base", "head"]
    cols += [f"base_{k}" for k in SUMMARY_FIELDS] + [f"head_{k}" for k in SUMMARY_FIELDS]
    cols += ["pct_change", "ci_low", "ci_high", "p_value", "p_adjusted", "test", "verdict", "warnings"]
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    w.writeheader()
    for rec in records(result):
        flat = {k: rec[k] for k in cols if k in rec}
        flat["params"] = json.dumps(rec["params"], sort_keys=True)
        for side in ("base", "head"):
            for k in SUMMARY_FIELDS:
                flat[f"{side}_{k}"] = (rec[f"{side}_stats"] or {}).get(k)
        flat["warnings"] = "; ".join(rec["warnings"])
        w.writerow({k: ("" if v is None else repr(v) if isinstance(v, float) else v) for k, v in flat.items()})
    return buf.getvalue()

"""Layouts of `perflab detect`: text for people, json for programs. Formatting only:
the figures come from perflab.stats.changepoints and the kinds from perflab.analysis.series."""

from __future__ import annotations

import json
import math

from perflab.core.model import HIGHER_IS_BETTER, LOWER_IS_BETTER
from perflab.report.numbers import ci_percent, percent, value
from perflab.analysis.series import BY_COMMIT, BY_KERNEL, History, Point, SeriesResult
from perflab.stats.changepoints import RELEVANT_CHANGE
from perflab.stats.exact import EXACT_FACTOR, EXACT_LIMIT
from perflab.core.text import printable

_DIRECTION = {LOWER_IS_BETTER: "lower is better", HIGHER_IS_BETTER: "higher is better"}
SKIPPED_SHOWN = 10


def _when(point: Point) -> str:
    return point.started.strftime("%Y-%m-%d %H:%M") + " UTC"


def _position(history: History, point: Point, order: str | None = None) -> str:
    """What a point is: a commit with its subject when the repository is known, a kernel release
    in a series ordered by kernel, else the run and its date."""
    runs = ",".join(f"#{r}" for r in point.run_ids[:3]) + ("..." if len(point.run_ids) > 3 else "")
    if order == BY_KERNEL and point.kernel:
        return f"kernel {printable(point.kernel, 80)} (run {runs})"
    commit = history.commits.get(point.commit or "") if history.order == BY_COMMIT else None
    if commit is not None:
        return f"{commit.sha[:12]} \"{printable(commit.subject, 70)}\" (run {runs})"
    tail = f", commit {printable(point.commit[:12])}" if point.commit else ""
    tag = f"tag {printable(point.tag, 40)}, " if point.tag else ""
    build = f"{printable(point.build, 80)}, " if point.build else ""
    return f"{tag}{build}run {runs} ({_when(point)}{tail})"


def _exact(resolution: float) -> str:
    return f"exact ±{resolution * 100:.2g}%"


def _p(p: float) -> str:
    return "-" if math.isnan(p) else (f"{p:.1e}" if p < 0.001 else f"{p:.3f}")


def _header(history: History, results: list[SeriesResult], alpha: float, min_points: int) -> list[str]:
    points = sum(len(r.series.points) for r in results)
    order = (f"first-parent history of {printable(history.branch)} in {printable(history.repo, 200)}"
             if history.order == BY_COMMIT else _orders(results))
    calls = sum(len(r.detection.change_points) for r in results)
    lines = [f"perflab detect: {len(results)} series, {history.runs} runs, {points} points, ordered by {order}: "
             f"{calls} change point{'' if calls == 1 else 's'}",
             f"  (levels of at least {min_points} points; isolated spikes set aside; "
             f"t-test of the per-run means either side, adjusted for the positions searched, at alpha {alpha:g}, "
             f"false discoveries controlled across series; "
             f"'detectable' is the smallest change these points find with 90% power)"]
    exact = sum(r.detection.exact for r in results)
    if exact:
        lines.append(f"  ({exact} exact series: instruction counts, icount instruction-time or levels that agree to "
                     f"{EXACT_LIMIT * 100:g}%, split where the level moves by more than {EXACT_FACTOR:g} times its "
                     "resolution, no t-test; one point a side is enough)")
    if history.skipped:
        shown = ", ".join(f"#{rid} ({printable(why, 100)})" for rid, why in history.skipped[:SKIPPED_SHOWN])
        more = f", ... ({len(history.skipped) - SKIPPED_SHOWN} more)" if len(history.skipped) > SKIPPED_SHOWN else ""
        lines.append(f"  skipped {len(history.skipped)} run{'' if len(history.skipped) == 1 else 's'}: {shown}{more}")
    return lines


def _orders(results: list[SeriesResult]) -> str:
    """"run start time", "kernel release (version order)", or both with their series counts."""
    by_kernel = sum(r.series.order == BY_KERNEL for r in results)
    if not by_kernel:
        return "run start time"
    if by_kernel == len(results):
        return "kernel release (version order)"
    return (f"kernel release (version order) in {by_kernel} series, run start time in "
            f"{len(results) - by_kernel}")


def series_name(result: SeriesResult) -> str:
    """A series as the text layout and the plot titles name it."""
    s = result.series
    what = s.name or printable(s.benchmark)   # analysis.naming: family and the parameters that differ
    unit = f"{printable(s.unit)}, " if s.unit else ""
    direction = _DIRECTION.get(s.direction, "informational")
    return f"{printable(s.box)} {what} {printable(s.metric, 120)} ({unit}{direction})"


def _quiet_reason(d) -> str:
    """Why a series without a change point says nothing: the words of the summary line."""
    if d.n < 2 * d.min_size:
        return "too short to tell"
    if not d.exact and d.noise == 0:
        return "flat"
    if d.blind:
        return f"blind to {percent(RELEVANT_CHANGE, signed=False, decimals=0)}"
    return "no change"


def _quiet_line(r: SeriesResult, noise: str, spikes: str) -> str:
    """One series without a change point, in full (--verbose)."""
    d = r.detection
    if d.n < 2 * d.min_size:
        return (f"{series_name(r)}: too short to tell ({d.n} point{'' if d.n == 1 else 's'}; "
                f"a level change needs {2 * d.min_size})")
    if d.exact:
        return (f"{series_name(r)}: no change in {d.n} points ({noise}{spikes}; a change beyond "
                f"{percent(d.detectable_mid, signed=False, decimals=2)} would be called)")
    if d.noise == 0:
        return f"{series_name(r)}: constant over {d.n} points{spikes}"
    blind = (f"; these points could not have seen a {percent(RELEVANT_CHANGE, signed=False, decimals=0)} change"
             if d.blind else "")
    return (f"{series_name(r)}: no change in {d.n} points ({noise}{spikes}; detectable: "
            f"{percent(d.detectable_mid, signed=False)} mid-series, "
            f"{percent(d.detectable_end, signed=False)} in the last {d.min_size} points{blind})")


def summary_line(results: list[SeriesResult]) -> str:
    """The series without a change point in one line: "29 series without a change: 25 too short to tell, 4 flat"."""
    quiet = [r for r in results if not r.detection.change_points]
    counts: dict[str, int] = {}
    for r in quiet:
        reason = _quiet_reason(r.detection)
        counts[reason] = counts.get(reason, 0) + 1
    parts = [f"{n} {k}" for k, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]   # the commonest first
    return f"{len(quiet)} series without a change: {', '.join(parts)} (--verbose lists them)"


def render_text(history: History, results: list[SeriesResult], alpha: float, min_points: int,
                verbose: bool = False) -> str:
    """Findings first (the series with change points); the rest in one summary line, or
    each in full with `verbose`."""
    lines = _header(history, results, alpha, min_points)
    found = [r for r in results if r.detection.change_points]
    quiet = [r for r in results if not r.detection.change_points]
    for r in found + (quiet if verbose else []):
        d, points = r.detection, r.series.points
        noise = f"noise {percent(d.noise_cov, signed=False)}" if not math.isnan(d.noise_cov) else "noise -"
        if d.exact:
            noise = _exact(d.resolution)
        spikes = f", {len(d.outliers)} spike{'' if len(d.outliers) == 1 else 's'} set aside" if d.outliers else ""
        if d.serial_correlation:
            spikes += f", serially correlated (lag-1 {d.serial_correlation:.2f}: tests widened)"
        lines.append("")
        if not d.change_points:
            lines.append(_quiet_line(r, noise, spikes))
            continue
        count = len(d.change_points)
        lines.append(f"{series_name(r)}: {count} change point{'' if count == 1 else 's'} in {d.n} points ({noise}{spikes})")
        for c, kind in zip(d.change_points, r.kinds):
            dec = 2 if d.exact else 1
            lines.append(f"  {kind.upper():11} {percent(c.change, decimals=dec):>7} {ci_percent(c.ci, dec)}  "
                         f"at {_position(history, points[c.index], r.series.order)}")
            lines.append(f"  {'':11} previous {_position(history, points[c.index - 1], r.series.order)}")
            lines.append(f"  {'':11} level {value(c.before.mean)} ± {value(c.before.stddev)} (n={c.before.n}) -> "
                         f"{value(c.after.mean)} ± {value(c.after.stddev)} (n={c.after.n})  "
                         + (_exact(d.resolution) if d.exact else f"p={_p(c.p_value)}")
                         + f"  detectable {percent(c.detectable, signed=False, decimals=2 if d.exact else 1)}")
    if quiet and not verbose:
        lines += ["", summary_line(results)]
    return "\n".join(lines)


def _point_json(history: History, point: Point, order: str | None = None) -> dict:
    commit = history.commits.get(point.commit or "")
    return {"runs": point.run_ids, "started": point.started.isoformat() + "Z", "commit": point.commit,
            "subject": commit.subject if commit else None,
            **({"kernel": point.kernel} if order == BY_KERNEL else {}),
            **({"build": point.build} if point.build else {})}


def _finite(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else x


def render_json(history: History, results: list[SeriesResult], alpha: float, min_points: int,
                verbose: bool = False) -> str:
    """Every series, with or without change points (`verbose` changes nothing: json is complete)."""
    out = {
        "order": history.order,
        "repo": history.repo,
        "branch": history.branch,
        "alpha": alpha,
        "min_points": min_points,
        "runs": history.runs,
        "skipped": [{"run": rid, "reason": why} for rid, why in history.skipped],
        "series": [],
    }
    for r in results:
        d, s = r.detection, r.series
        out["series"].append({
            "testbox": s.box, "benchmark": s.benchmark, "params": json.loads(s.params) if s.params else {},
            "metric": s.metric, "unit": s.unit, "direction": s.direction,
            "points": d.n, "noise": _finite(d.noise), "noise_cov": _finite(d.noise_cov), "level": _finite(d.level),
            "serial_correlation": d.serial_correlation, "alpha": d.alpha,
            **({"order": s.order} if s.order != history.order else {}),
            "spikes": [_point_json(history, s.points[i], s.order) | {"index": i} for i in d.outliers],
            "detectable_mid": _finite(d.detectable_mid), "detectable_end": _finite(d.detectable_end),
            "blind_to": RELEVANT_CHANGE if d.blind else None,
            "min_points": d.min_size,
            **({"exact": True, "resolution": d.resolution} if d.exact else {}),
            "change_points": [{
                "kind": kind, "index": c.index,
                "at": _point_json(history, s.points[c.index], s.order),
                "previous": _point_json(history, s.points[c.index - 1], s.order),
                "change": c.change, "ci95": [_finite(c.ci[0]), _finite(c.ci[1])], "p_value": _finite(c.p_value), "test": c.test,
                "detectable": _finite(c.detectable),
                "before": {"n": c.before.n, "mean": c.before.mean, "stddev": _finite(c.before.stddev),
                           "first": c.before.start, "last": c.before.stop - 1},
                "after": {"n": c.after.n, "mean": c.after.mean, "stddev": _finite(c.after.stddev),
                                "first": c.after.start, "last": c.after.stop - 1},
            } for c, kind in zip(d.change_points, r.kinds)],
        })
    return json.dumps(out, indent=1)


STYLES = {"text": render_text, "json": render_json}

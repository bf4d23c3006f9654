"""Bisecting an exact metric: one run per commit, two at each end to confirm determinism.

A metric is exact (perflab.stats.exact) by construction (the record's `exact`:
instruction counts, icount instruction-time), or by measurement: three runs of each
end agree within EXACT_LIMIT. Then

- the ends: two runs of each, in pairs in random order (three when only
  measurement can say the metric is exact); if an end's runs disagree beyond
  EXACT_LIMIT the bisection says so and falls back to the statistical path (the
  runs taken count there); the ends differ when their ratio is beyond
  EXACT_FACTOR times the measured resolution (and the --threshold), else the
  bisection is refused as "ends do not differ";
- a step: one run; it is good or bad when it is closer to that end's level by
  more than the resolution (a value midway within the resolution gets one more
  run, at most MAX_STEP_RUNS, then the nearer end, flagged);
- the culprit: confirmed when it differs from its parent by more than
  EXACT_FACTOR resolutions in the ends' direction (no new runs: git names a first
  bad commit only when its parent was judged good).
"""

from __future__ import annotations

import math

import numpy as np

from perflab.stats import exact, sequential
from perflab.stats.sequential import BAD, GOOD

MAX_STEP_RUNS = 3


def by_construction(b) -> bool:
    """Whether the bisected metric is exact by construction, as its record says."""
    return bool(b.rec.exact)


def counted(ends) -> bool:
    """Whether a bisection's exact ends (its `exact`: the dict check_ends keeps, or the result's
    ExactEnds; None when not exact) are exact because the metric is a count, by construction:
    then its change is in the code path. A timing that merely agreed within EXACT_LIMIT at the
    ends (a sleep on a quiet machine) was bisected the exact way, but is still a timing whose
    kind the counting tells (automate.change_kind)."""
    if ends is None:
        return False
    return bool(ends["by_unit"] if isinstance(ends, dict) else ends.by_unit)


def _level(values) -> float:
    return float(np.median(values))


def check_ends(b) -> sequential.EndsVerdict | None:
    """The ends of an exact metric (module docstring); None: not exact, go the statistical way."""
    good, bad = b.rec.good, b.rec.bad
    known = by_construction(b)
    need = 2 if known else exact.MEASURED_MIN
    while len(b.end_pairs) < 2:
        b._end_pair(starting=True)
    g, x = b.samples[good], b.samples[bad]
    if not known and max(exact.spread(g), exact.spread(x)) > exact.EXACT_LIMIT:
        return None   # the common case of a timing: no word, the statistical path as always
    while len(b.end_pairs) < need:
        b._end_pair(starting=True)
    g, x = b.samples[good], b.samples[bad]
    if not exact.is_exact(g, x, assume_exact=known):
        if not known:
            return None   # a timing that only looked steady at first
        b.exact_note = (f"{b.rec.metric} is not exact here: the ends' runs disagree beyond "
                        f"{exact.EXACT_LIMIT * 100:g}% (good {exact.spread(g) * 100:.3g}%, bad "
                        f"{exact.spread(x) * 100:.3g}% apart); falling back to the statistical test")
        b.say(f"ends: {b.exact_note}")
        return None
    res = exact.resolution(g, x)
    v = exact.compare_exact(g, x, resolution=res, threshold=b.settings.exact_threshold, direction=b.rec.direction)
    lo, hi = v.interval
    b.say(f"ends: good {good[:12]} n={len(g)}, bad {bad[:12]} n={len(x)}: {v.pct_change * 100:+.4f}% "
          f"(exact: resolution {v.resolution * 100:.2g}%, called beyond {v.bar * 100:.2g}%)")
    called = exact.change_called(v.pct_change, res, b.settings.exact_threshold)
    reason = "" if called else (f"exact: within {exact.EXACT_FACTOR:g} x the resolution "
                                f"{v.resolution * 100:.2g}% or below the {b.settings.exact_threshold * 100:g}% threshold")
    verdict = sequential.EndsVerdict(called, v.pct_change, (lo, hi), math.nan, 0.0, v.bar, len(g), len(x),
                                     v.resolution, True, reason)
    if called:
        b.exact = {"resolution": v.resolution, "bar": v.bar, "by_unit": known,
                   "good": _level(g), "bad": _level(x)}
        b.ends_checked = {good: len(g), bad: len(x)}
    return verdict


def decide(b, commit: str) -> dict:
    """One run of `commit`; more (at most MAX_STEP_RUNS, the median judged) only when it sits midway
    within the resolution, or lies beyond EXACT_FACTOR resolutions from both ends (a disturbed run
    of a metric exact only by measurement, or a third level). The StepRecord's fields."""
    g, x, res = b.exact["good"], b.exact["bad"], b.exact["resolution"]
    while True:
        b.measure(commit, 1, "step")
        v = _level(b.samples[commit])
        to_good, to_bad = abs(v / g - 1), abs(v / x - 1)
        n = len(b.samples[commit])
        far = min(to_good, to_bad) > exact.EXACT_FACTOR * res
        clear = abs(to_good - to_bad) > res and not far
        if clear or n >= MAX_STEP_RUNS:
            verdict = GOOD if to_good < to_bad else BAD
            return {"verdict": verdict, "n": n, "llr": 0.0, "p_bad": 1.0 if verdict == BAD else 0.0,
                    "position": (v - g) / (x - g) if x != g else math.nan,
                    "forced": abs(to_good - to_bad) <= res, "between": far, "exact": True}


def confirm(b, culprit: str, parent: str) -> dict:
    """The culprit against its parent from their runs (a parent never measured gets one run)."""
    role = {b.rec.good: GOOD, b.rec.bad: BAD}
    if not b.samples[parent]:
        b.measure(parent, 1, role.get(parent, "parent"))
    res = b.exact["resolution"]
    v = exact.compare_exact(b.samples[parent], b.samples[culprit], resolution=res, threshold=0.0,
                            direction=b.rec.direction)
    ends = b.exact["bad"] / b.exact["good"] - 1
    same_way = v.pct_change * ends > 0
    ok = exact.change_called(v.pct_change, res) and same_way
    return {"verdict": "confirmed" if ok else "refuted", "pairs": 0, "exact": True, "parent": parent,
            "culprit": culprit, "change": v.pct_change, "ci": list(v.interval), "ends_change": ends,
            "resolution": exact.effective_resolution(res), "bar": exact.bar(res), "dropped": 0}


def evidence(b, culprit: str, parent: str) -> dict:
    """The culprit against the good end, for the result (an exact comparison, no t-test)."""
    good = b.samples[b.rec.good]
    values = b.samples[culprit]
    v = exact.compare_exact(good, values, resolution=b.exact["resolution"], threshold=b.settings.exact_threshold,
                            direction=b.rec.direction)
    return {"exact": True, "n_good": len(good), "n_culprit": len(values), "culprit_values": list(values),
            "good_mean": _level(good), "culprit_mean": _level(values), "change": v.pct_change,
            "ci": list(v.interval), "verdict": v.verdict, "resolution": v.resolution, "p_value": math.nan,
            "detectable": v.bar, "dropped": 0, "llr": None, "p_bad": None, "parent": parent,
            "parent_p_bad": None, "parent_is_good_end": parent == b.rec.good}

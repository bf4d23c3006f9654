"""Before a culprit is named: is the noise what the tests assume, and does the culprit hold up against its parent?

The sequential test's error rate per step holds for a steady level plus
independent noise. `noise_findings` looks for what breaks that in the samples
the bisection took (perflab.stats.stationarity): an end whose samples fall in
two clusters, an end whose level moved while it was measured, an end measured
again later at another level, serially correlated runs. Only what is large
against the change being bisected (RELEVANT of it) is said.

`confirm_culprit` measures the culprit git bisect named against its parent in
pairs taken one right after the other, the order random within each pair (a
randomised multiple interleaved trial: a slow stretch of the machine hits
either side alike), until perflab.stats.sequential.confirm calls it confirmed
or refuted at the bisection's alpha, or CONFIRM_MAX pairs leave it undecided.
Only a confirmed culprit is named as the first bad commit. `contradicted` says which step a
refuted confirmation's pairs show was misjudged, for another pass of git bisect.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from perflab.core.bisection import Confirmation, StepRecord
from perflab.stats import sequential, stationarity
from perflab.stats.sequential import BAD, GOOD

RELEVANT = 0.25    # a departure from the assumptions matters when it is this share of the ends' change or more


def _ends_change(b) -> float:
    """The ends' change on the log scale when every end sample is positive, else relative."""
    (g, x), _logged = sequential.transform(b.samples[b.rec.good], b.samples[b.rec.bad])
    (g, x), _ = sequential.drop_disturbed(g, x)
    return abs(float(x.mean() - g.mean())) if g.size and x.size else math.nan


def noise_findings(b) -> list[str]:
    """What in the bisection's samples breaks the sequential test's assumptions, in words."""
    out: list[str] = []
    size = abs(math.expm1(_ends_change(b))) if math.isfinite(_ends_change(b)) else math.nan
    floor = RELEVANT * size if math.isfinite(size) else 0.0
    for role, commit in (("good", b.rec.good), ("bad", b.rec.bad)):
        values = b.samples[commit]
        split = stationarity.bimodal(values)
        if split and abs(split.factor) >= floor:
            out.append(f"the {role} end's samples fall in two clusters: {split.n_low} near {split.low:.4g} and "
                       f"{split.n_high} near {split.high:.4g} ({split.factor * 100:+.0f}%)")
        shifts = [s for s in stationarity.level_shifts(values) if abs(s.change) >= floor]
        if shifts:
            moves = ", ".join(f"{s.change * 100:+.1f}% at sample {s.index + 1}" for s in shifts[:3])
            out.append(f"the {role} end's level moved while it was measured ({moves})")
        first = b.ends_checked.get(commit, 0)
        later = values[first:]
        if len(later) >= 2 and first >= 2:
            moved = stationarity.drift(values[:first], later, min_effect=floor)
            if moved.drifted:
                out.append(f"the {role} end measured again between steps lies {moved.change * 100:+.1f}% from its "
                           f"first {first} samples (p={moved.p_value:.2g}): the machine drifted")
        rho = stationarity.serial_correlation(values)
        if len(values) >= 8 and rho > max(0.5, 2 / math.sqrt(len(values))):
            out.append(f"the {role} end's runs are serially correlated (lag-1 {rho:+.2f}): the machine's level "
                       "wanders from run to run")
    return out


def _delta(b) -> tuple[float, float, bool, float]:
    """The ends' change on the tests' scale, its standard error, whether on logs, and good's level."""
    good, bad = b.samples[b.rec.good], b.samples[b.rec.bad]
    (g, x), logged = sequential.transform(good, bad)
    scale = 1.0 if logged else float(np.mean(good))
    # The ends are always measured in pairs first (Bisection.check_ends): their ratios keep the change
    # when each end's single runs fall at two speeds, whose means would mix them by chance.
    if len(b.end_pairs) >= 2:
        d, logged = sequential.paired_differences(*zip(*b.end_pairs))
        (d,), _ = sequential.drop_disturbed(d)
        return float(d.mean()), float(d.std(ddof=1) / math.sqrt(d.size)), logged, scale
    (g, x), _ = sequential.drop_disturbed(g, x)
    se = math.sqrt(g.var(ddof=1) / g.size + x.var(ddof=1) / x.size) if g.size > 1 and x.size > 1 else math.inf
    return float(x.mean() - g.mean()), se, logged, scale


def _pair_noise(b) -> float:
    """One pair's spread from the ends' run-to-run noise: sqrt(2) x a robust sigma of one run, from
    the median absolute deviation of successive differences within each end's samples in the
    order taken, pooled over both ends (stretches at one speed and spikes barely count)."""
    steps = []
    for commit in (b.rec.good, b.rec.bad):
        (x,), _logged = sequential.transform(b.samples[commit])
        steps.append(np.diff(x))
    d = np.concatenate(steps) if steps else np.zeros(0)
    if d.size < 3:
        return 0.0
    # A successive difference has the spread of a pair's: sqrt(2) x one run's.
    return 1.4826 * float(np.median(np.abs(d - np.median(d))))


def _slot(b, commit: str, default: str) -> str:
    """An end's own worktree when the commit is an end, else a worktree of its own for the confirmation."""
    return {b.rec.good: sequential.GOOD, b.rec.bad: sequential.BAD}.get(commit, default)


def confirm_culprit(b, culprit: str, parent: str) -> Confirmation:
    """`culprit` against `parent` in randomly ordered pairs until the test calls it (see the module's docstring)."""
    s = b.settings
    delta, delta_se, logged, scale = _delta(b)
    pairs: list[tuple[float, float]] = []
    roles = {culprit: _slot(b, culprit, "culprit"), parent: _slot(b, parent, "parent")}
    others = []
    if b.paired:
        for group in (b.end_pairs, *b.pairs.values()):
            if len(group) >= 2:
                others.append(sequential.paired_differences(*zip(*group))[0])
    noise = _pair_noise(b)
    verdict = None
    while True:
        order = (parent, culprit) if b.rng.random() < 0.5 else (culprit, parent)
        got = {c: b._one(c, roles[c]) for c in order}
        pairs.append((got[parent], got[culprit]))
        d, _ = sequential.paired_differences(*zip(*pairs))
        verdict = sequential.confirm(d, delta, delta_se, s.alpha, logged, scale, others, s.threshold, noise)
        if verdict.verdict is not None or len(pairs) >= s.confirm_max:
            break
    return Confirmation(verdict.verdict or "undecided", parent, culprit, pairs=len(pairs), used=verdict.n,
                        dropped=verdict.dropped, change=verdict.change, ci=tuple(verdict.ci),
                        ends_change=math.expm1(delta) if logged else delta / scale if scale else math.nan,
                        llr=verdict.llr, values=[list(p) for p in pairs])


def contradicted(b, result, steps: list[StepRecord]) -> StepRecord | None:
    """After a refuted confirmation: the step a disturbance misjudged, measured again and corrected.

    Refuted: the culprit and its parent measured alike, one right after the other, so one of the
    two steps that led git to the culprit was misjudged. Which one is measured, not inferred from
    absolute levels taken at other times: the culprit again in fresh pairs with the good end (the
    paired test, whatever the bisection's pairing), and when that says bad, the parent the same
    way. The first whose fresh verdict differs from its step's is returned, corrected. None when
    neither does, when the one to measure is an end, or when it was corrected before (no step is
    corrected twice). Whatever the next pass names is confirmed against its parent in turn."""
    checked, named = result.confirmation, result.unconfirmed
    if b.exact or checked is None or checked.verdict != "refuted" or named is None:
        return None
    judged = {s.commit: s for s in steps if s.verdict != "skip"}
    b.say(f"the confirmation refuted {named.sha[:12]} against {checked.parent[:12]}: one of their steps was "
          "misjudged; measuring them again in pairs with the good end")
    for commit, was, role in ((named.sha, BAD, "culprit"), (checked.parent, GOOD, "parent")):
        step = judged.get(commit)
        if step is None or step.corrected or step.verdict != was:
            return None
        # In the confirmation's worktree of it (built there already; a kernel is not built again).
        fresh = b.decide_again(commit, _slot(b, commit, role))
        if fresh.verdict != was:
            b.say(f"{commit[:12]} measured again: {fresh.verdict} (P(bad)={fresh.p_bad:.4f}); its step said "
                  f"{was}; bisecting again with it {fresh.verdict}")
            return replace(fresh, corrected=True)
        b.say(f"{commit[:12]} measured again: {was}, as its step said")
    return None

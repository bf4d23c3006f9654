"""Profile shares compared: which symbols' children%/self% moved between base and head.

Input per side: one {("children"|"self", symbol): percent} per repetition
that has perf-profile data. A symbol missing from a repetition was below the
monitor's storage floor there and counts as 0 (a share under the floor is
not distinguishable from none). The change is in percentage points (head
mean - base mean), as LKP prints perf-profile changes. Significance: Welch's
t-test per share through perflab.stats.compare (informational metrics,
two-sided), the p-values adjusted by Benjamini-Hochberg over every share
tested in the comparison; with fewer than 2 repetitions on a side no test
is possible and the verdict says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from perflab.core.model import INFORMATIONAL
from perflab.stats.compare import MIN_SAMPLES, compare_many
from perflab.stats.verdicts import CHANGED, INSUFFICIENT, NO_CHANGE  # noqa: F401 (CHANGED re-exported)

KINDS = ("children", "self")
MIN_POINTS = 0.1   # a share must move by at least this many percentage points to be called
MIN_SHARE = 1.0    # symbols compared: children% mean over both sides' repetitions from this


@dataclass
class ShareChange:
    base: float          # mean percent over the base repetitions
    head: float
    change: float        # head - base, percentage points
    p_adjusted: float    # NaN when no test was possible
    verdict: str         # changed | no change | insufficient samples


@dataclass
class SymbolChange:
    symbol: str
    children: ShareChange
    self: ShareChange

    @property
    def size(self) -> float:
        return max(abs(self.children.change), abs(self.self.change))

    @property
    def verdict(self) -> str:
        verdicts = {self.children.verdict, self.self.verdict}
        if CHANGED in verdicts:
            return CHANGED
        return INSUFFICIENT if INSUFFICIENT in verdicts else NO_CHANGE

    @property
    def p_adjusted(self) -> float:
        ps = [p for p in (self.children.p_adjusted, self.self.p_adjusted) if not math.isnan(p)]
        return min(ps) if ps else math.nan


@dataclass
class ProfileComparison:
    base_repetitions: int
    head_repetitions: int
    symbols: list[SymbolChange]   # largest change first
    tested: int                   # shares in the FDR group
    alpha: float
    min_share: float = MIN_SHARE
    below_floor: int = 0          # symbols left out: children% mean under min_share


def compare_profiles(base: list[dict[tuple[str, str], float]], head: list[dict[tuple[str, str], float]],
                     top: int | None = None, alpha: float = 0.05, min_points: float = MIN_POINTS,
                     min_share: float = MIN_SHARE) -> ProfileComparison:
    """The symbols whose shares changed most, with their significance.

    Only symbols whose children% averages at least `min_share` over all
    repetitions of both sides are compared (a filter on the level, not on the
    change, so the tests stay valid): a system-wide profile holds hundreds of
    symbols near 0%, and each would widen the FDR group without being news.
    """
    everything = {sym for side in (base, head) for rep in side for _, sym in rep}
    reps = [*base, *head]
    symbols = sorted(sym for sym in everything
                     if reps and sum(rep.get(("children", sym), 0.0) for rep in reps) / len(reps) >= min_share)
    pairs, keys = [], []
    for sym in symbols:
        for kind in KINDS:
            b = [rep.get((kind, sym), 0.0) for rep in base]
            h = [rep.get((kind, sym), 0.0) for rep in head]
            pairs.append((b, h, INFORMATIONAL))
            keys.append((sym, kind))
    results = compare_many(pairs, alpha=alpha, threshold=0.0) if pairs else []
    shares: dict[tuple[str, str], ShareChange] = {}
    for (b, h, _), key, cmp in zip(pairs, keys, results):
        mb = float(np.mean(b)) if b else math.nan
        mh = float(np.mean(h)) if h else math.nan
        change = mh - mb
        if len(b) < MIN_SAMPLES or len(h) < MIN_SAMPLES:
            verdict, p = INSUFFICIENT, math.nan
        else:
            # compare_many's own verdict needs a relative change, undefined from 0%: a symbol
            # that appears or vanishes is called on its adjusted p and the points it moved.
            p = cmp.p_adjusted
            verdict = CHANGED if (p < alpha and abs(change) >= min_points) else NO_CHANGE
        shares[key] = ShareChange(mb, mh, change, p, verdict)
    changes = [SymbolChange(sym, shares[(sym, "children")], shares[(sym, "self")]) for sym in symbols]
    changes.sort(key=lambda c: (-c.size, -max(c.children.base, c.children.head), c.symbol))
    if top is not None:
        changes = changes[:top]
    tested = sum(1 for s in shares.values() if not math.isnan(s.p_adjusted))
    return ProfileComparison(len(base), len(head), changes, tested, alpha, min_share, len(everything) - len(symbols))


@dataclass
class SymbolShare:
    symbol: str
    children: float      # mean percent over the repetitions (0 where under the storage floor)
    self: float


@dataclass
class ProfileShares:
    repetitions: int
    symbols: list[SymbolShare]    # largest children% first, `top` of them
    total: int                    # symbols stored in any repetition


def profile_shares(reps: list[dict[tuple[str, str], float]], top: int | None = None) -> ProfileShares:
    """One side's profile as `perf report --children` sorts it: children% first, then self%.

    Means over the repetitions, a symbol absent from one counting 0 there (under the
    monitor's storage floor), as in compare_profiles, so one side read alone shows the
    same figures as its column of a comparison.
    """
    everything = {sym for rep in reps for _, sym in rep}
    n = len(reps)

    def mean(kind: str, sym: str) -> float:
        return sum(rep.get((kind, sym), 0.0) for rep in reps) / n if n else math.nan

    shares = [SymbolShare(sym, mean("children", sym), mean("self", sym)) for sym in everything]
    shares.sort(key=lambda s: (-s.children, -s.self, s.symbol))
    return ProfileShares(n, shares[:top] if top is not None else shares, len(everything))


# -- insn-profile: instructions per function, counted (perflab.monitors.insns) -------------------

USER = "[user]"          # the user-space instructions of the window, as one row


@dataclass
class InstructionChange:
    symbol: str
    base: float       # instructions per operation (or per window), mean over the repetitions
    head: float
    change: float     # head - base
    spread: float     # the range of the repetitions, both sides added: what does not repeat

    @property
    def changed(self) -> bool:
        return self.change != 0 and abs(self.change) > self.spread


@dataclass
class InstructionComparison:
    base_repetitions: int
    head_repetitions: int
    per: str                          # "operation" or "window"
    base_total: float                 # the whole window, per operation or per window
    head_total: float
    symbols: list[InstructionChange]  # largest |change| first, `top` of them
    shown_change: float               # the listed rows' changes added
    compared: int                     # rows compared (functions, [user], [other])

    @property
    def total_change(self) -> float:
        return self.head_total - self.base_total


def _per_rows(reps: list[dict[str, float]], per_op: list[float] | None) -> list[dict[str, float]]:
    """Each repetition's instructions by row scaled to one operation: a row's share of the window
    times the benchmark's instruction-time per operation (per_op); unscaled without it."""
    out = []
    for i, rep in enumerate(reps):
        total = sum(rep.values())
        scale = per_op[i] / total if per_op is not None and total else 1.0
        out.append({k: v * scale for k, v in rep.items()})
    return out


def compare_instructions(base: list[dict[str, float]], head: list[dict[str, float]],
                         base_per_op: list[float] | None = None, head_per_op: list[float] | None = None,
                         top: int | None = None) -> InstructionComparison:
    """Which functions' instructions changed between base and head, sorted by their share of the
    change. Input per repetition: {function (or [user], [other]): instructions of the window}.

    With per-op figures for both sides (the benchmark's instruction-time per operation, one per
    repetition) the rows are instructions per operation and add up to it; else per window.
    The counts are exact: a change is called when it exceeds the range the repetitions spread
    over (0 under icount, or nearly), not by a test.
    """
    per = "operation" if base_per_op is not None and head_per_op is not None else "window"
    b = _per_rows(base, base_per_op if per == "operation" else None)
    h = _per_rows(head, head_per_op if per == "operation" else None)
    names = sorted({k for rep in (*b, *h) for k in rep})

    def mean(reps, k):
        return sum(rep.get(k, 0.0) for rep in reps) / len(reps) if reps else math.nan

    def spread(reps, k):
        values = [rep.get(k, 0.0) for rep in reps]
        return max(values) - min(values) if values else 0.0

    rows = [InstructionChange(k, mean(b, k), mean(h, k), mean(h, k) - mean(b, k), spread(b, k) + spread(h, k))
            for k in names]
    rows.sort(key=lambda r: (-abs(r.change), -max(r.base, r.head), r.symbol))
    shown = rows[:top] if top is not None else rows
    base_total = sum(sum(rep.values()) for rep in b) / len(b) if b else math.nan
    head_total = sum(sum(rep.values()) for rep in h) / len(h) if h else math.nan
    return InstructionComparison(len(base), len(head), per, base_total, head_total, shown,
                                 sum(r.change for r in shown), len(rows))

"""What a bisection found, as values: made by perflab.automate.bisect, printed by perflab.report.bisect.

Plain dataclasses with no behaviour beyond naming what they hold: the renderer reads them
and computes nothing, the robot reads the culprit and its evidence, and the bisection's
record on disk keeps their JSON form (dataclasses.asdict; the keys are the field names).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum


class SkipCause(StrEnum):
    """Why a commit could not be measured (and git bisect skipped it)."""

    BUILD = "build"      # the build command failed, or made no kernel image
    BOOT = "boot"        # the kernel it built did not boot
    RUN = "run"          # the benchmark failed at it


@dataclass(frozen=True)
class Skip:
    """A commit the bisection skipped: the one-line reason, what failed, and a kernel's console tail."""

    why: str
    cause: SkipCause
    console: str = ""


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str
    author: str
    date: str


@dataclass(frozen=True)
class UntestedCommit(Commit):
    """A commit git bisect could not rule out as the first bad one because it could not be measured."""

    why: str = ""
    cause: SkipCause | None = None


@dataclass
class StepRecord:
    """One step of git bisect: the commit and the verdict the test gave it (or why it was skipped)."""

    commit: str
    verdict: str              # good | bad | skip
    n: int = 0                # runs at the commit (disturbed ones included)
    llr: float = 0.0
    p_bad: float | None = None
    position: float | None = None
    forced: bool = False      # decided at max_step without reaching the test's bounds
    paired: bool = False      # judged on pairs (commit, good) taken one after the other
    drift: bool = False       # judged against end samples measured beside it (it lay outside the ends' range)
    between: bool = False     # clearly different from both ends (a partial change?): the nearer end won
    why: str = ""             # for skips
    console: str = ""         # a kernel that did not boot: its console's tail
    exact: bool = False       # an exact metric's step: one run, judged against the resolution
    cause: SkipCause | None = None   # for skips: what failed at the commit
    corrected: bool = False   # decided again in fresh pairs after a refuted confirmation (first runs: the other)


@dataclass(frozen=True)
class EndsChange:
    """How the bad end differs from the good one, as the test that let the bisection start saw it."""

    change: float                     # a fraction: bad vs good
    ci: tuple[float, float]
    p_value: float                    # nan for an exact metric (no test)
    detectable: float                 # the smallest change these samples detect (exact: the bar a change must pass)
    n_good: int
    n_bad: int


@dataclass(frozen=True)
class ExactEnds:
    """An exact metric's ends: the resolution measured, the bar a change must pass, the ends' levels."""

    resolution: float
    bar: float
    by_unit: bool             # exact by construction (the record's `exact`; the stored key keeps its old name),
                              # else by measurement: its ends' runs agreed
    good: float
    bad: float


@dataclass
class Evidence:
    """The named commit against the good end (and what its parent was judged)."""

    n_good: int
    n_culprit: int
    culprit_values: list[float]
    good_mean: float
    culprit_mean: float
    change: float
    ci: tuple[float, float] | None
    p_value: float
    verdict: str              # the comparison's word: regression, improvement, no change ...
    detectable: float         # exact: the bar a change must pass
    parent: str               # what the culprit was judged against ("" when it is the good end)
    parent_is_good_end: bool
    dropped: int = 0          # disturbed samples left out
    llr: float | None = None
    p_bad: float | None = None            # the step's P(bad); None for an exact metric
    parent_p_bad: float | None = None     # the parent's step P(bad), when it was a step
    exact: bool = False
    resolution: float = math.nan          # exact: the resolution the change is judged against


@dataclass
class Confirmation:
    """The named commit against its parent (or nearest measured good ancestor), measured again."""

    verdict: str              # confirmed | refuted | undecided | failed (the parent or culprit could not be measured)
    parent: str
    culprit: str
    pairs: int = 0            # pairs (culprit, parent) taken; 0 for an exact metric
    change: float = math.nan
    ci: tuple[float, float] = (math.nan, math.nan)
    ends_change: float = math.nan
    dropped: int = 0          # disturbed pairs left out
    used: int = 0             # pairs the test used
    llr: float = math.nan
    values: list[list[float]] = field(default_factory=list)   # the pairs, (parent, culprit)
    exact: bool = False
    resolution: float = math.nan
    bar: float = math.nan     # exact: a change is called beyond this
    why: str = ""             # failed: why


@dataclass
class BisectionResult:
    """Everything `perflab bisect` prints at the end."""

    id: str
    repo: str
    metric: str
    tag: str
    good: str
    bad: str
    alpha: float                          # the per-step error rate of the sequential test
    ends: EndsChange
    culprit: Commit | None                # named and confirmed
    candidates: list[Commit]              # git's list, when skipped commits leave several
    evidence: Evidence | None
    log: str                              # `git bisect log`
    runs_used: int                        # timed runs of this bisection (stored ones included)
    commits_measured: int
    steps: list[StepRecord]
    skipped: int = 0                      # commits skipped
    noise: list[str] = field(default_factory=list)    # what in the samples breaks the tests' assumptions
    confirmation: Confirmation | None = None
    unconfirmed: Commit | None = None     # named by git bisect, but the confirmation did not hold
    exact: ExactEnds | None = None
    exact_note: str = ""                  # why an exact-looking metric went the statistical way
    # The culprit is the first measured bad commit, and these untested commits before it could
    # also be the first bad one.
    ambiguous_with: list[UntestedCommit] = field(default_factory=list)
    # The kind of the culprit's change (stats.change_kind.ChangeKind's sentence), or why it has none.
    change_kind: str = ""
    # The culprit reverted on the bad end and measured beside the ends (automate.revert.revert_check), one line.
    revert_check: str = ""

    @property
    def state(self) -> str:
        """culprit | ambiguous (named, with untested commits before it) | unconfirmed | candidates."""
        if self.culprit is not None:
            return "ambiguous" if self.ambiguous_with else "culprit"
        return "unconfirmed" if self.unconfirmed is not None else "candidates"

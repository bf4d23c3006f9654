"""A first bad commit next to commits that could not be tested.

When a commit that does not build (or boot, or run the benchmark) sits right before the
culprit, `git bisect` ends with "There are only 'skip'ped commits left to test. The first
bad commit could be any of: ...", listing the skipped commits and the first commit it saw
bad. That list holds exactly one commit that was measured: the first measured bad commit
after the last measured good one. The bisection names that commit, as a kernel engineer
reads such an end (LKP's bisection reports it the same way), and lists the untested
commits before it that could also be the cause, each with why it was not tested. It is
confirmed like any culprit, against its nearest measured good ancestor instead of its
parent (the parent could not be measured). docs/bisect.md, "Untestable commits next to
the culprit".
"""

from __future__ import annotations

from perflab.core.git import git
from perflab.stats.sequential import BAD, GOOD


def first_measured_bad(b, shas: list[str], steps) -> tuple[str, list[str]] | None:
    """(the one measured bad commit among git's candidates, the skipped candidates that could
    also be the first bad commit), or None when git's candidates are not of that shape."""
    bad = {s.commit for s in steps if s.verdict == BAD} | {b.rec.bad}
    skipped = set(b.rec.skips)
    measured = [c for c in shas if c in bad]
    others = [c for c in shas if c not in bad]
    if not measured or any(c not in skipped for c in others):
        return None
    # The first measured bad one: no other measured bad candidate is its ancestor.
    first = [c for c in measured if not any(o != c and _ancestor(b.repo, o, c) for o in measured)]
    if len(first) != 1:
        return None
    culprit = first[0]
    # A skipped commit after the culprit cannot be the first bad commit: only those before it are listed.
    before = [c for c in others if _ancestor(b.repo, c, culprit)]
    return (culprit, before) if before else None


def nearest_good(b, culprit: str, steps) -> str:
    """The culprit's nearest ancestor judged good (the good end at the latest): what it is confirmed against."""
    good = {s.commit for s in steps if s.verdict == GOOD}
    between = git(b.repo, "rev-list", "--first-parent", "--ancestry-path", f"{b.rec.good}..{culprit}^",
                  check=False).stdout.split()
    return next((c for c in between if c in good), b.rec.good)


def _ancestor(repo, older: str, newer: str) -> bool:
    return git(repo, "merge-base", "--is-ancestor", older, newer, check=False).returncode == 0

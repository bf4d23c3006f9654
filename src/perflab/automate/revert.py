"""The revert check: a culprit reverted on a later commit, measured beside the base and that commit.

A posted series' culprit on its head (perflab series), the robot's on its branch tip, a
bisection's on its bad end (`bisect --revert`). The revert is a commit made without a checkout
(revert_on_head: only objects are added to the repository); base, head and the reverted head are
measured in rounds through the caller's Measurer (the order random per round) and judged by
judge_revert: for an exact metric within its resolution, else statistically (docs/bisect.md,
"After the culprit: the revert check").
"""

from __future__ import annotations

import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from perflab.core.errors import PerflabError
from perflab.core.git import IDENT, BuildFailed, git
from perflab.core.steps import step

REVERT_ROUNDS = 6      # rounds of (base, head, reverted head) for a timed metric; an exact one takes 2
RESTORES, PARTLY, DOES_NOT, CANNOT = "restores", "partly", "does not", "cannot revert"


@dataclass
class RevertCheck:
    """The culprit reverted on the head of the series, measured beside the base and the head."""

    patch: str                         # "[PATCH 4/9] mm: ..."
    verdict: str                       # RESTORES | PARTLY | DOES_NOT | CANNOT
    metric: str
    reverted: str = ""                 # the commit `git revert` made on the head
    base: float = float("nan")         # each side's level in the rounds taken (an exact metric's figure)
    head: float = float("nan")
    level: float = float("nan")        # the reverted head's
    undone: float = float("nan")       # (head - reverted) / (head - base): 1 is all of the change
    rounds: int = 0
    exact: bool = False
    why: str = ""                      # CANNOT: git's words
    on: str = "head"                   # what it was reverted on: a series' head, the robot's branch tip
    base_name: str = "base"            # what the reverted one is set against: the base, the last good commit
    later: str = "later patches"       # what the culprit can interact with

    @property
    def sentence(self) -> str:
        if self.verdict == CANNOT:
            if self.why.startswith("conflicts in "):
                return f"{self.patch} cannot be reverted on the {self.on}: it {self.why[:9]} with {self.later}{self.why[9:]}"
            return f"{self.patch} cannot be reverted on the {self.on}: {self.why}"
        figures = (f"{self.metric}: {self.base_name} {self.base:.6g}, {self.on} {self.head:.6g}, {self.on} with it "
                   f"reverted {self.level:.6g} ({'exact, ' if self.exact else ''}{self.rounds} round"
                   f"{'' if self.rounds == 1 else 's'})")
        if self.verdict == RESTORES:
            return (f"reverting {self.patch} on the {self.on} restores {self.metric} ({self.undone * 100:.0f}% of "
                    f"the change undone); {figures}")
        if self.verdict == PARTLY:
            return (f"reverting {self.patch} on the {self.on} undoes {self.undone * 100:.0f}% of the change only: "
                    f"the culprit is interacting with {self.later}; {figures}")
        return (f"reverting {self.patch} on the {self.on} does not restore {self.metric}: the culprit is "
                f"interacting with {self.later}; {figures}")

    def to_dict(self) -> dict:
        return asdict(self)


def revert_on_head(repo: Path, head: str, culprit: str, subject: str) -> tuple[str | None, str]:
    """The commit that reverts `culprit` on `head`, made without a checkout: the culprit's diff
    applied in reverse to an index of the head's tree (three-way where the context moved), then
    committed on the head. Only objects are added to `repo`: no branch, index or file of it
    changes. (the new commit, "") or (None, git's words on what conflicts)."""
    with tempfile.TemporaryDirectory(prefix="perflab-revert-") as scratch:
        env = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}     # made by read-tree: the repo's stays as it is
        git(repo, "read-tree", head, env=env)
        diff = git(repo, "diff", "--binary", "--full-index", culprit, f"{culprit}^").stdout
        if diff.strip():
            done = git(repo, "apply", "--cached", "--3way", "-", input=diff, env=env, check=False)
            if done.returncode != 0:
                files = [line[2:].strip() for line in (done.stderr + done.stdout).splitlines() if line.startswith("U ")]
                if files:
                    return None, f"conflicts in {', '.join(files[:4])}"
                return None, (done.stderr.strip() or "git apply failed").splitlines()[0]
        tree = git(repo, "write-tree", env=env).stdout.strip()
    message = f'Revert "{subject}"\n\nThis reverts commit {culprit} (perflab\'s revert check).\n'
    return git(repo, *IDENT, "commit-tree", tree, "-p", head, "-m", message).stdout.strip(), ""


def judge_revert(patch: str, metric: str, direction: int, reverted: str, values: dict[str, list[float]],
                 base: str, head: str, exact_metric: bool, alpha: float = 0.05) -> RevertCheck:
    """Whether the reverted head is back at the base: for an exact metric within its resolution
    (perflab.stats.exact), else the reverted head differs from the head (Welch, one-sided towards
    the base) and has undone at least half of the change."""
    import numpy as np

    from perflab.stats import exact
    from perflab.stats.compare import compare_many

    b, h, r = values[base], values[head], values[reverted]
    rounds = min(len(b), len(h), len(r))
    if exact_metric:
        lb, lh, lr = (exact.exact_figure(v, direction) for v in (b, h, r))
    else:
        lb, lh, lr = (float(np.mean(v)) for v in (b, h, r))
    undone = (lh - lr) / (lh - lb) if lh != lb else float("nan")
    check = RevertCheck(patch, DOES_NOT, metric, reverted, lb, lh, lr, undone, rounds, exact_metric)
    if exact_metric:
        back = exact.compare_exact(b, r, resolution=exact.resolution(b, h, r))
        check.verdict = RESTORES if not back.called else PARTLY if 0.1 <= undone else DOES_NOT
        return check
    away = compare_many([(h, r, direction)], alpha=alpha, threshold=0.0)[0]
    moved_back = np.isfinite(away.p_value) and away.p_value < alpha and undone > 0
    check.verdict = (RESTORES if moved_back and undone >= 0.5 else PARTLY if moved_back else DOES_NOT)
    return check


def revert_check(repo: Path, head: str, base: str, culprit: str, subject: str, name: str, measurer, job,
                 metric: str, direction: int, *, exact_metric: bool, tag: str, seed: str, say,
                 words: dict | None = None) -> RevertCheck:
    """The culprit reverted on `head` (revert_on_head: no checkout) and measured beside `base` and
    `head` in rounds (2 for an exact metric, REVERT_ROUNDS for a timed one), judged by judge_revert.
    The series' check, the robot's on its branch tip and `bisect --revert` on the bad end; `words`:
    RevertCheck's names of the sides (on, base_name, later)."""
    from dataclasses import replace

    from perflab.automate.measurer import measure_rounds

    words = words or {}
    sha, why = revert_on_head(repo, head, culprit, subject)
    if sha is None:
        check = RevertCheck(name, CANNOT, metric, why=why, **words)
        say(f"revert check: {check.sentence}")
        return check
    rounds = 2 if exact_metric else REVERT_ROUNDS
    on = words.get("on", "head")
    say(f"revert check: {name} reverted on the {on} {head[:12]} as {sha[:12]}; measuring "
        f"{words.get('base_name', 'base')}, {on} and the reverted {on} in {rounds} rounds")
    try:
        with step(f"revert check: {rounds} rounds of {words.get('base_name', 'base')}, {on} and reverted {on}"):
            values = measure_rounds(measurer, job.with_(tag=tag, comment=f"perflab: revert check of {culprit[:12]}"),
                                    {"good": base, "bad": head, "revert": sha}, rounds, metric, seed=seed + "-revert",
                                    say=say)
    except BuildFailed as e:
        return RevertCheck(name, CANNOT, metric, sha, why=f"the reverted {on} does not build: {e.why}", **words)
    except PerflabError as e:
        return RevertCheck(name, CANNOT, metric, sha, why=f"it could not be measured: {e}", **words)
    check = replace(judge_revert(name, metric, direction, sha, values, base, head, exact_metric), **words)
    say(f"revert check: {check.sentence}")
    return check

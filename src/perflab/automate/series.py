"""A patch series as it arrives (a mailbox of `git format-patch` mails, or a directory of them),
tested against its base: applied in perflab's own clone of the repository, its base and head
measured, and on a change the patch that made it named, bisecting inside the series
(docs/bisect.md, "A patch series").

- The base is the `base-commit:` trailer (`git format-patch --base`, b4) or `--base REF`.
- The clone shares the repository's objects (`git clone --shared`): the user's repository and
  checkout gain nothing. Each mail is applied with `git am`; a mail that does not apply is one
  line naming "[PATCH n/m] subject" and git's words on the hunk.
- The measuring and the bisection are `perflab bisect`'s (automate.bisect), between the base and
  the head of the applied series: the series' commits are its commit list, one patch a step.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from perflab.core import paths
from perflab.core.git import BuildFailed, git, repo_root
from perflab.core.errors import PerflabError, UsageProblem

_FROM = re.compile(r"^From [0-9a-f]{40} ", re.MULTILINE)
_BASE = re.compile(r"^base-commit: ([0-9a-f]{7,40})\s*$", re.MULTILINE)
_NUMBER = re.compile(r"\[[^\]]*?(\d+)/(\d+)\]")
IDENT = ["-c", "user.name=perflab", "-c", "user.email=perflab@localhost"]


@dataclass
class Patch:
    index: int          # 1.. in the series' order
    total: int
    subject: str        # as the mail says it, "[PATCH 4/9] mm: ..."
    mail: str
    sha: str = ""       # the commit `git am` made of it

    @property
    def name(self) -> str:
        m = _NUMBER.search(self.subject)
        return self.subject if m else f"[PATCH {self.index}/{self.total}] {self.subject}"


@dataclass
class Series:
    patches: list[Patch]
    base: str | None                       # from the base-commit: trailer
    cover: str = ""                        # the cover letter's subject ([PATCH 0/N]), if any
    skipped: list[str] = field(default_factory=list)


def _subject(mail: str) -> str:
    lines = mail.splitlines()
    for i, line in enumerate(lines):
        if line.lower().startswith("subject:"):
            text = line[8:].strip()
            for more in lines[i + 1:]:          # a folded header goes on indented
                if not more[:1].isspace() or not more.strip():
                    break
                text += " " + more.strip()
            return text
        if not line.strip():
            break                                # the headers end at the first empty line
    return ""


def read_series(path: str) -> Series:
    """A mailbox (or a directory of *.patch mails) -> the series in order; UsageProblem in one line."""
    p = Path(path).expanduser()
    try:
        if p.is_dir():
            mails = [f.read_text(errors="replace") for f in sorted(p.glob("*.patch"))]
        else:
            text = p.read_text(errors="replace")
            starts = [m.start() for m in _FROM.finditer(text)]
            mails = [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)])]
    except OSError as e:
        raise UsageProblem(f"--mbox {path}: {e.strerror}") from None
    if not mails:
        raise UsageProblem(f"--mbox {path}: no patch mail in it (git format-patch writes 'From SHA ...' first)")
    base = next((m.group(1) for mail in mails for m in [_BASE.search(mail)] if m), None)
    cover, patches = "", []
    for mail in mails:
        subject = _subject(mail)
        if "\ndiff --git " not in mail and "\n--- " not in mail:
            cover = cover or subject            # the cover letter (0/N) holds no diff
            continue
        patches.append(Patch(0, 0, subject, mail))
    if not patches:
        raise UsageProblem(f"--mbox {path}: its mails hold no diff")
    for i, patch in enumerate(patches, 1):
        patch.index, patch.total = i, len(patches)
    return Series(patches, base, cover)


def apply(repo: str, series: Series, base: str | None = None, say: Callable[[str], None] = lambda _m: None) -> tuple[Path, str]:
    """The series applied on its base in perflab's clone of `repo`: (the clone, the base commit).
    Each patch gets its commit (Patch.sha). PerflabError in one line naming the patch that fails."""
    root = repo_root(repo)
    wanted = base or series.base
    if not wanted:
        raise UsageProblem("the series names no base (no base-commit: trailer, as git format-patch --base "
                           "writes): give --base REF")
    found = git(root, "rev-parse", "--verify", "--quiet", f"{wanted}^{{commit}}", check=False).stdout.strip()
    if not found:
        raise UsageProblem(f"base {wanted} is not a commit of {repo}" + ("" if base else " (the base-commit: trailer)"))
    clone = paths.cache_home() / "series" / f"clone-{hashlib.sha256(str(root).encode()).hexdigest()[:16]}"
    if not (clone / ".git").exists():
        clone.parent.mkdir(parents=True, exist_ok=True)
        git(clone.parent, "clone", "-q", "--shared", "--no-checkout", str(root), str(clone))
    git(clone, "am", "--abort", check=False)
    git(clone, "checkout", "-q", "--force", "--detach", found)
    git(clone, "clean", "-qfdx")
    for patch in series.patches:
        with tempfile.NamedTemporaryFile("w", suffix=".patch", delete=False) as f:
            f.write(patch.mail)
        done = git(clone, *IDENT, "am", "-q", "--keep-cr", "--committer-date-is-author-date", f.name, check=False)
        Path(f.name).unlink(missing_ok=True)
        if done.returncode != 0:
            said = [line.strip() for line in (done.stderr + done.stdout).splitlines()
                    if line.startswith(("error:", "fatal:"))]
            git(clone, "am", "--abort", check=False)
            raise PerflabError(f"{patch.name} does not apply to {found[:12]}"
                               + (f" after {patch.index - 1} patches" if patch.index > 1 else "")
                               + f": {'; '.join(said[:2]) or 'git am failed'}")
        patch.sha = git(clone, "rev-parse", "HEAD").stdout.strip()
    # A ref keeps the applied commits from git's garbage collection while they are measured.
    git(clone, "update-ref", "refs/heads/perflab-series", series.patches[-1].sha)
    return clone, found


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
    fd, index = tempfile.mkstemp(prefix="perflab-revert-", suffix=".index")
    os.close(fd)
    os.unlink(index)           # git makes it: an empty file is not an index
    env = {"GIT_INDEX_FILE": index}
    try:
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
        sha = git(repo, *IDENT, "commit-tree", tree, "-p", head, "-m", message).stdout.strip()
        return sha, ""
    finally:
        Path(index).unlink(missing_ok=True)


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


@dataclass
class SeriesResult:
    series: Series
    base: str
    head: str
    clone: Path
    bisection: object | None = None        # automate.bisect.Result, when base and head differ
    unchanged: str = ""                    # why there was nothing to bisect
    revert: RevertCheck | None = None      # the culprit reverted on the head
    kind: object | None = None             # stats.change_kind.ChangeKind of base -> head, or a str: why none
    series_path: str = ""                  # the mailbox or directory it was read from

    @property
    def culprit(self) -> Patch | None:
        c = getattr(self.bisection, "culprit", None)
        return next((p for p in self.series.patches if c is not None and p.sha == c.sha), None)


SERIES_PREFIX = "perflab-series-"


def run(store, *, repo: str, mbox: str, job, metric: str, build: str, base: str | None = None,
        tag: str | None = None, kernel: str | None = None, vm_mode: str | None = None,
        revert: bool = True, kind: bool = True, build_timeout: float | None = None,
        say: Callable[[str], None] = lambda _m: None) -> SeriesResult:
    """Apply, then bisect between the base and the head of the series (perflab bisect's measuring,
    its checks and its confirmation of a culprit); then revert the culprit on the head and measure
    it (`revert`), and label a timed change by counting base and head (`kind`).

    One Measurer for all of it: the builds of the bisection (a kernel tree's images) serve the checks."""
    import secrets

    from perflab import jobs
    from perflab.automate import bisect
    from perflab.automate.bisect.record import check_metric
    from perflab.automate.bisect.trees import OWNER_FILE, _alive
    from perflab.automate.measurer import Here, KeptTrees, KernelDirs, MeasurerSpec, kernel_spec, measurer_for
    from perflab.core.git import Worktrees, prune_stale
    from perflab.store.db import process_start_time

    series = read_series(mbox)
    clone, base_sha = apply(repo, series, base, say)
    head = series.patches[-1].sha
    say(f"{len(series.patches)} patches applied on {base_sha[:12]}: head {head[:12]}")
    result = SeriesResult(series, base_sha, head, clone, series_path=str(mbox))
    spec = kernel_spec(kernel, vm_mode, jobs.resolve(job)) if kernel else None
    for left in prune_stale(clone, SERIES_PREFIX, OWNER_FILE, _alive):     # a killed run's
        shutil.rmtree(Path(left).parent, ignore_errors=True)
    trees = Worktrees(clone, SERIES_PREFIX, OWNER_FILE, {"pid": os.getpid(), "start": process_start_time(os.getpid()),
                                                          "repo": str(clone)})
    dirs = KernelDirs(clone, trees.base / "kernel-src", trees.base / "kernel-build", trees.base / "kernel-images",
                      owned=False) if spec else None
    # A kernel tree's slots hold only HEAD (its commits are built by the Measurer's KernelBuilds).
    measurer = measurer_for(store, MeasurerSpec(Here(lambda b, t: KeptTrees(trees, b, t, files=spec is None),
                                                     kernel_dirs=dirs),
                                                build, build_timeout, spec), say)
    seed = secrets.token_hex(4)
    try:
        try:
            result.bisection = bisect.start(store, repo=str(clone), good=base_sha, bad=head, build_cmd=build, job=job,
                                            metric=metric, tag=tag, say=say, kernel=kernel, vm_mode=vm_mode,
                                            measurer=measurer, build_timeout=build_timeout)
        except bisect.EndsDoNotDiffer as e:
            result.unchanged = str(e)
            return result
        b = result.bisection
        rec = b.record
        # The record's job: for a kernel tree, without a kernel (the Measurer boots each commit's).
        direction, _unit = check_metric(rec.job, metric)
        culprit = result.culprit
        if revert and culprit is not None:
            result.revert = revert_check(clone, head, base_sha, culprit.sha, _subject_of(culprit), culprit.name,
                                         measurer, rec.job, metric, direction, exact_metric=b.exact is not None,
                                         tag=rec.tag, seed=seed, say=say)
            rec.result["revert"] = result.revert.to_dict()
        if kind:
            from perflab.automate import change_kind

            if b.exact is not None:
                result.kind = f"{metric} is exact here (counted): a change of it is in the code path"
            else:
                try:
                    result.kind = change_kind.label(measurer, rec.job, metric, direction, base_sha, head,
                                                    b.ends.change, tag=f"{rec.tag}-kind", seed=seed, say=say)
                except (BuildFailed, PerflabError) as e:
                    result.kind = f"not labelled: {e}"
            rec.result["kind"] = result.kind if isinstance(result.kind, str) else result.kind.to_dict()
        rec.result["series"] = {"patches": [{"name": p.name, "sha": p.sha} for p in series.patches],
                                "cover": series.cover, "base": base_sha, "head": head, "mbox": str(mbox)}
        rec.save()
        return result
    finally:
        if hasattr(measurer, "close"):
            measurer.close()
        if dirs is not None and dirs.src.exists():      # KernelBuilds' worktree of the clone (not owned)
            git(clone, "worktree", "remove", "--force", str(dirs.src), check=False)
        trees.close()


def _subject_of(patch: Patch) -> str:
    """The commit's subject as git am wrote it: the mail's, without its [PATCH n/m] tag."""
    return re.sub(r"^\[[^\]]*\]\s*", "", patch.subject)


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


def report(store, result: SeriesResult, *, subject_tag: str = "perflab", user_repo: str = "", build: str = "",
           command: str = "", mail: dict | None = None):
    """The series' mail (analysis.regression.RegressionReport with its SeriesFacts): base against head
    in every metric of the job, the headline metric's patch named, the kind and the revert check."""
    from perflab.analysis import regression

    b = result.bisection
    culprit = result.culprit
    if b is None or culprit is None:
        return None
    tag = b.record.tag
    rep = regression.build(store, f"tag={tag},commit={result.base}", f"tag={tag},commit={result.head}",
                           tag=subject_tag, repo=str(result.clone), build_command=build or None, mail=mail,
                           headline=b.metric)
    kind = result.kind if isinstance(result.kind, str) or result.kind is None else result.kind.sentence
    rep.series = regression.SeriesFacts(
        patch=culprit.name, index=culprit.index, total=culprit.total,
        culprit=regression.commit_info(str(result.clone), culprit.sha), cover=result.series.cover,
        mbox=str(Path(result.series_path).resolve()) if result.series_path else "", user_repo=user_repo,
        metric=b.metric, command=command, patches=[p.name for p in result.series.patches])
    rep.change_kind = kind or ""
    rep.revert_check = result.revert.sentence if result.revert else ""
    if rep.where is None and result.kind is not None and not isinstance(result.kind, str):
        # The counted runs of the kind's check, when they counted per function (valgrind; insn-profile).
        rep.where = regression.where_view(store, f"tag={tag}-kind,commit={result.base}",
                                          f"tag={tag}-kind,commit={result.head}", None)
    return rep

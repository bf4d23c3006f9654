"""A patch series as it arrives (a mailbox of `git format-patch` mails, or a directory of them),
tested against its base: applied in perflab's own clone of the repository, its base and head
measured, and on a change the patch that made it named, bisecting inside the series
(docs/bisect.md, "A patch series").

- The base is the `base-commit:` trailer (`git format-patch --base`, b4) or `--base REF`.
- The clone owns its objects (hard links to the repository's, execution/vm/kbuild.Clone, as a
  recipe's): the user's repository and checkout gain nothing, and a `git gc --prune=now` there
  cannot take an object the clone needs. Each mail is applied with `git am`; a mail that does not apply is one
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
from dataclasses import dataclass
from pathlib import Path

from perflab.automate.revert import RevertCheck, revert_check
from perflab.core import paths
from perflab.core.git import IDENT, git, repo_root
from perflab.core.errors import PerflabError, UsageProblem
from perflab.execution.vm import kbuild

_FROM = re.compile(r"^From [0-9a-f]{40} ", re.MULTILINE)
_BASE = re.compile(r"^base-commit: ([0-9a-f]{7,40})\s*$", re.MULTILINE)
_NUMBER = re.compile(r"\[[^\]]*?(\d+)/(\d+)\]")


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


def apply(repo: str, series: Series, base: str | None = None) -> tuple[Path, str]:
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
    clone.parent.mkdir(parents=True, exist_ok=True)
    # The kernel builds' clone (execution/vm/kbuild.py): its objects its own, so a gc in the user's
    # repository cannot break it; checked out clean at the base.
    kbuild.Clone(root, clone).at(found, lambda _line: None)
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
    from perflab import jobs
    from perflab.automate import bisect
    from perflab.automate.bisect.record import check_metric
    from perflab.automate.bisect.trees import OWNER_FILE, _alive
    from perflab.automate.measurer import Here, KeptTrees, KernelDirs, MeasurerSpec, kernel_spec, measurer_for
    from perflab.core.git import Worktrees, prune_stale
    from perflab.store.db import process_start_time

    series = read_series(mbox)
    clone, base_sha = apply(repo, series, base)
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
                                         tag=rec.tag, seed=rec.id, say=say)
            rec.result["revert"] = result.revert.to_dict()
        if kind:
            from perflab.automate import change_kind

            result.kind = change_kind.label_or_why(measurer, rec.job, metric, direction, base_sha, head, b.ends.change,
                                                   exact=b.exact is not None, tag=f"{rec.tag}-kind", seed=rec.id,
                                                   say=say)
            rec.result["kind"] = change_kind.stored(result.kind)
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


def report(store, result: SeriesResult, *, subject_tag: str = "perflab", user_repo: str = "", build: str = "",
           command: str = "", mail: dict | None = None):
    """The series' mail (analysis.regression.RegressionReport with its SeriesFacts): base against head
    in every metric of the job, the headline metric's patch named, the kind and the revert check."""
    from perflab.analysis import regression
    from perflab.automate import change_kind

    b = result.bisection
    culprit = result.culprit
    if b is None or culprit is None:
        return None
    tag = b.record.tag
    rep = regression.build(store, f"tag={tag},commit={result.base}", f"tag={tag},commit={result.head}",
                           tag=subject_tag, repo=str(result.clone), build_command=build or None, mail=mail,
                           headline=b.metric)
    rep.series = regression.SeriesFacts(
        patch=culprit.name, index=culprit.index, total=culprit.total,
        culprit=regression.commit_info(str(result.clone), culprit.sha), cover=result.series.cover,
        mbox=str(Path(result.series_path).resolve()) if result.series_path else "", user_repo=user_repo,
        command=command)
    rep.change_kind = change_kind.sentence_of(result.kind)
    rep.revert_check = result.revert.sentence if result.revert else ""
    if rep.where is None and result.kind is not None and not isinstance(result.kind, str):
        # The counted runs of the kind's check, when they counted per function (valgrind; insn-profile).
        rep.where = regression.where_view(store, f"tag={tag}-kind,commit={result.base}",
                                          f"tag={tag}-kind,commit={result.head}", None,
                                          first=(rep.headline.benchmark, rep.headline.params))
    return rep

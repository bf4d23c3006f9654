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
from dataclasses import dataclass, replace
from pathlib import Path

from perflab.automate.revert import RevertCheck, revert_check
from perflab.core import paths
from perflab.core.git import IDENT, git, repo_root
from perflab.core.errors import PerflabError, UsageProblem
from perflab.core.steps import step
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
    file: str = ""      # the file it was read from, when the series is a directory of *.patch

    @property
    def name(self) -> str:
        m = _NUMBER.search(self.subject)
        return self.subject if m else f"[PATCH {self.index}/{self.total}] {self.subject}"


@dataclass
class Series:
    patches: list[Patch]
    base: str | None                       # from the base-commit: trailer
    cover: str = ""                        # the cover letter's subject ([PATCH 0/N]), if any
    without_diff: int = 0                  # mails that hold no diff (the cover letter): git am stops at them

    def am_args(self, path: str) -> tuple[str, ...]:
        """What `git am` takes to apply the series read from `path` as perflab applied it: a
        directory's patch files in order (`git am DIR` reads a maildir, and applies nothing from
        a directory of *.patch), or the mailbox file, its cover letter dropped."""
        if self.patches and all(p.file for p in self.patches):
            return tuple(p.file for p in self.patches)
        mbox = str(Path(path).expanduser().resolve())
        return ("--empty=drop", mbox) if self.without_diff else (mbox,)


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
            files = sorted(p.glob("*.patch"))
            mails = [f.read_text(errors="replace") for f in files]
        else:
            files = []
            text = p.read_text(errors="replace")
            starts = [m.start() for m in _FROM.finditer(text)]
            mails = [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)])]
    except OSError as e:
        raise UsageProblem(f"--mbox {path}: {e.strerror}") from None
    if not mails:
        raise UsageProblem(f"--mbox {path}: no patch mail in it (git format-patch writes 'From SHA ...' first)")
    base = next((m.group(1) for mail in mails for m in [_BASE.search(mail)] if m), None)
    cover, patches, without_diff = "", [], 0
    for at, mail in enumerate(mails):
        subject = _subject(mail)
        if "\ndiff --git " not in mail and "\n--- " not in mail:
            cover = cover or subject            # the cover letter (0/N) holds no diff
            without_diff += 1
            continue
        patches.append(Patch(0, 0, subject, mail, file=str(files[at].resolve()) if files else ""))
    if not patches:
        raise UsageProblem(f"--mbox {path}: its mails hold no diff")
    for i, patch in enumerate(patches, 1):
        patch.index, patch.total = i, len(patches)
    return Series(patches, base, cover, without_diff)


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
    clone = clone_of(root)
    clone.parent.mkdir(parents=True, exist_ok=True)
    # The kernel builds' clone (execution/vm/kbuild.py): its objects its own, so a gc in the user's
    # repository cannot break it; checked out clean at the base.
    kbuild.Clone(root, clone).at(found, lambda _line: None)
    with step(f"applying {len(series.patches)} patches on {found[:12]} (git am)"):
        _apply_mails(clone, series, found)
    # A ref keeps the applied commits from git's garbage collection while they are measured.
    git(clone, "update-ref", "refs/heads/perflab-series", series.patches[-1].sha)
    return clone, found


def clone_of(root: Path) -> Path:
    """perflab's clone of the repository at `root` (the cache's `series/clone-HASH`)."""
    return paths.cache_home() / "series" / f"clone-{hashlib.sha256(str(root).encode()).hexdigest()[:16]}"


# Kernel images kept beside a clone's build directory (each ~15 MB with its System.map); the
# oldest beyond these are removed after a series (the build directory rebuilds one incrementally).
KEPT_IMAGES = 16


def kernel_dirs(clone: Path):
    """Where a kernel tree's commits are built for the series of `clone`: kept between series
    (`clone-HASH-kernel/`: the source worktree, kbuild's output directory, each commit's image), so
    the next series on the same base rebuilds only what its patches change and the base's image is
    not built again, and no tree of 75,000 files is removed at the end of each. kbuild's locks keep
    two series on one clone from building there at once."""
    from perflab.automate.measurer import KernelDirs

    top = clone.with_name(clone.name + "-kernel")
    return KernelDirs(clone, top / "src", top / "build", top / "images", owned=False)


def _prune_images(images: Path, keep: int = KEPT_IMAGES) -> None:
    """The `keep` newest images of a clone's kernel builds; the older ones removed."""
    if not images.is_dir():
        return
    entries = sorted((p for p in images.iterdir() if p.is_dir() and not p.name.startswith(".")),
                     key=lambda p: p.stat().st_mtime, reverse=True)
    for old in entries[keep:]:
        shutil.rmtree(old, ignore_errors=True)


def _apply_mails(clone: Path, series: Series, found: str) -> None:
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


def headline_metric(job) -> str:
    """The metric a series is judged by when --metric is not given: the job's one headline metric.

    The headline metrics are the catalog's primary ones that have a direction (not the
    secondary resource figures, not an informational count); when the job is counted
    (`measure:`), the instrument's (the count is why it was asked for). UsageProblem listing
    them when there is not exactly one."""
    from perflab import jobs
    from perflab.analysis.comparison.fdr import is_primary
    from perflab.core.model import INFORMATIONAL

    job = jobs.resolve(job)
    catalog = {}
    for instrument in job.instruments:
        catalog.update(instrument.metrics())
    if not catalog:
        catalog = dict(job.family.metrics(job.parsed))
    named = sorted(name for name, m in catalog.items()
                   if m.direction != INFORMATIONAL and is_primary(name, None, job.benchmark))
    if len(named) != 1:
        raise UsageProblem(f"give --metric: the {job.benchmark} job has {len(named)} headline metrics "
                           f"({', '.join(named) or 'none'})")
    return named[0]


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
    from perflab.automate.bisect import exact as exactpath
    from perflab.automate.bisect.record import check_metric
    from perflab.automate.bisect.trees import OWNER_FILE, _alive
    from perflab.automate.measurer import Here, KeptTrees, MeasurerSpec, kernel_spec, measurer_for
    from perflab.core.git import Worktrees, prune_stale
    from perflab.store.db import process_start_time

    series = read_series(mbox)
    clone, base_sha = apply(repo, series, base)
    head = series.patches[-1].sha
    say(f"{len(series.patches)} patches applied on {base_sha[:12]}: head {head[:12]}")
    result = SeriesResult(series, base_sha, head, clone, series_path=str(mbox))
    spec = kernel_spec(kernel, vm_mode, jobs.resolve(job)) if kernel else None
    for left in prune_stale(clone, SERIES_PREFIX, OWNER_FILE, _alive):     # a killed run's
        with step(f"removing {Path(left).parent} (a killed series' worktrees)"):
            shutil.rmtree(Path(left).parent, ignore_errors=True)
    trees = Worktrees(clone, SERIES_PREFIX, OWNER_FILE, {"pid": os.getpid(), "start": process_start_time(os.getpid()),
                                                          "repo": str(clone)})
    dirs = kernel_dirs(clone) if spec else None
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
            # (revert_check says its step: the reverted head's build and the rounds it measures)
            result.revert = revert_check(clone, head, base_sha, culprit.sha, _subject_of(culprit), culprit.name,
                                         measurer, rec.job, metric, direction, exact_metric=b.exact is not None,
                                         tag=rec.tag, seed=rec.id, say=say)
            rec.result["revert"] = result.revert.to_dict()
        if kind:
            from perflab.automate import change_kind

            result.kind = change_kind.label_or_why(measurer, rec.job, metric, direction, base_sha, head, b.ends.change,
                                                   exact=exactpath.counted(b.exact), tag=f"{rec.tag}-kind", seed=rec.id,
                                                   say=say)
            rec.result["kind"] = change_kind.stored(result.kind)
        rec.result["series"] = {"patches": [{"name": p.name, "sha": p.sha} for p in series.patches],
                                "cover": series.cover, "base": base_sha, "head": head, "mbox": str(mbox)}
        rec.save()
        return result
    finally:
        # The kernel builds (dirs) stay for the next series: removing a kernel tree's checkout and
        # build directory took 25-40 s here, and the next series would build everything again.
        with step("cleaning up the series' worktrees"):
            if hasattr(measurer, "close"):
                measurer.close()
            trees.close()
            if dirs is not None:
                _prune_images(dirs.images)


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
        command=command, am=result.series.am_args(result.series_path) if result.series_path else ())
    # The table's columns: which side is which, not two labels that differ past their 16th character
    # (the operands stay in the table's header, after these names).
    rep.comparison = replace(rep.comparison, labels=["base", "head"])
    rep.change_kind = change_kind.sentence_of(result.kind)
    rep.revert_check = result.revert.sentence if result.revert else ""
    if rep.where is None and result.kind is not None and not isinstance(result.kind, str):
        # The counted runs of the kind's check, when they counted per function (valgrind; insn-profile).
        rep.where = regression.where_view(store, f"tag={tag}-kind,commit={result.base}",
                                          f"tag={tag}-kind,commit={result.head}", None,
                                          first=(rep.headline.benchmark, rep.headline.params))
    return rep

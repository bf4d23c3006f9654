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
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from perflab.core import paths
from perflab.core.git import git, repo_root
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


@dataclass
class SeriesResult:
    series: Series
    base: str
    head: str
    clone: Path
    bisection: object | None = None        # automate.bisect.Result, when base and head differ
    unchanged: str = ""                    # why there was nothing to bisect

    @property
    def culprit(self) -> Patch | None:
        c = getattr(self.bisection, "culprit", None)
        return next((p for p in self.series.patches if c is not None and p.sha == c.sha), None)


def run(store, *, repo: str, mbox: str, job, metric: str, build: str, base: str | None = None,
        tag: str | None = None, kernel: str | None = None, vm_mode: str | None = None,
        say: Callable[[str], None] = lambda _m: None) -> SeriesResult:
    """Apply, then bisect between the base and the head of the series (perflab bisect's measuring,
    its checks and its confirmation of a culprit)."""
    from perflab.automate import bisect

    series = read_series(mbox)
    clone, base_sha = apply(repo, series, base, say)
    head = series.patches[-1].sha
    say(f"{len(series.patches)} patches applied on {base_sha[:12]}: head {head[:12]}")
    result = SeriesResult(series, base_sha, head, clone)
    try:
        result.bisection = bisect.start(store, repo=str(clone), good=base_sha, bad=head, build_cmd=build, job=job,
                                        metric=metric, tag=tag, say=say, kernel=kernel, vm_mode=vm_mode)
    except bisect.EndsDoNotDiffer as e:
        result.unchanged = str(e)
    return result

"""Commits checked out and built on a box, for queued jobs that name a `source`.

`perflab bisect --box` and `perflab robot --box` measure commits on a lab box:
the atomic job they queue carries

    "source": {"repo": URL, "commit": SHA, "build": CMD, "build_timeout": S}

and the box's worker makes that commit ready before running the job: it fetches
the commit into a bare mirror of the repository (one per URL, under the
worker's spool directory), adds a detached worktree at it, runs the build
command there through the runner's executor, and runs the job in that worktree
(so the run is stored with its commit, and `./prog` means the program built
there). Built worktrees are kept for the next job at the same commit — a
bisection alternates between its ends and the commit under test — up to
`keep` per repository, the least recently used removed first.

A build that fails is the commit's fault (the bisection skips it, exit 125
semantics): BuildFailed. A repository or commit that cannot be fetched is the
submitter's (a URL the box cannot reach, a commit not pushed there): SourceError.

The worker measures such a job with a LocalMeasurer (perflab.automate.measurer)
whose Trees are these checkouts: `Checkouts.trees(source)`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from perflab.automate.measurer import build
from perflab.core.errors import PerflabError
from perflab.core.git import BuildFailed, GitError, add_worktree, git, prune_worktrees, remove_worktree
from perflab.core.steps import step
from perflab.core.text import printable

__all__ = ["BuildFailed", "Checkouts", "SourceError", "check_source", "describe"]


class SourceError(PerflabError):
    """The source of a job cannot be fetched or checked out on this box."""


def check_source(source) -> dict:
    """The `source` entry of a queued job, checked; SourceError naming the key at fault."""
    if not isinstance(source, dict):
        raise SourceError("job key 'source': expected a mapping with repo, commit and build")
    repo, commit = source.get("repo"), source.get("commit")
    if not isinstance(repo, str) or not repo.strip():
        raise SourceError("job key 'source.repo': expected the URL or path of a git repository")
    if not isinstance(commit, str) or len(commit) != 40 or any(c not in "0123456789abcdef" for c in commit):
        raise SourceError(f"job key 'source.commit' {printable(str(commit), 60)!r}: expected a full commit sha")
    build = source.get("build") or ""
    if not isinstance(build, str):
        raise SourceError("job key 'source.build': expected a shell command")
    timeout = source.get("build_timeout")
    if timeout is not None and not (isinstance(timeout, (int, float)) and timeout > 0):
        raise SourceError(f"job key 'source.build_timeout' {timeout!r}: expected seconds > 0")
    return {"repo": repo, "commit": commit, "build": build, "build_timeout": timeout}


class Checkouts:
    def __init__(self, directory: Path, keep: int = 4):
        self.directory = directory
        self.keep = keep

    def trees(self, source: dict) -> "SourceTrees":
        """Trees for a LocalMeasurer that measures `source`'s commit on this box."""
        return SourceTrees(self, source)

    def prepare(self, source: dict) -> Path:
        """The worktree of source's commit, built; BuildFailed or SourceError."""
        source = check_source(source)
        url, sha = source["repo"], source["commit"]
        home = self.directory / hashlib.sha1(url.encode()).hexdigest()[:16]
        mirror = home / "mirror.git"
        try:
            if not (mirror / "HEAD").exists():
                home.mkdir(parents=True, exist_ok=True)
                git(home, "init", "--quiet", "--bare", str(mirror))
                (home / "url").write_text(url + "\n")
            if git(mirror, "cat-file", "-e", f"{sha}^{{commit}}", check=False).returncode != 0:
                with step(f"fetching {sha[:12]} from {printable(url, 200)}"):
                    self._fetch(mirror, url, sha)
            path = home / sha[:16]
            stamp = home / f"{sha[:16]}.built"
            wanted = json.dumps({"build": source["build"]})
            if path.exists() and stamp.exists() and stamp.read_text() == wanted:
                os.utime(stamp)   # recently used
                return path
            if path.exists() or stamp.exists():
                self._remove(mirror, path, stamp)
            with step(f"checking out {sha[:12]} in {path}"):
                self._prune(mirror, home)
                add_worktree(mirror, path, sha, force=True)
        except GitError as e:
            raise SourceError(f"source {printable(url, 200)} at {sha[:12]}: {e}") from None
        why = build(path, source["build"], source["build_timeout"])
        if why is not None:
            self._remove(mirror, path, stamp)
            raise BuildFailed(f"--build failed at {sha[:12]}: {why}", why)
        stamp.write_text(wanted)
        return path

    @staticmethod
    def _fetch(mirror: Path, url: str, sha: str) -> None:
        # By sha first (protocol v2 servers and local paths allow it); else every branch and tag.
        if git(mirror, "fetch", "--quiet", "--no-tags", url, sha, check=False, timeout=3600).returncode == 0:
            return
        git(mirror, "fetch", "--quiet", url, "+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*",
                   timeout=3600)
        if git(mirror, "cat-file", "-e", f"{sha}^{{commit}}", check=False).returncode != 0:
            raise GitError(f"commit {sha[:12]} is not in the repository (not pushed there?)")

    def _prune(self, mirror: Path, home: Path) -> None:
        """Remove the least recently used built worktrees beyond `keep - 1` (one is about to be added)."""
        stamps = sorted(home.glob("*.built"), key=lambda p: p.stat().st_mtime)
        for stamp in stamps[:max(0, len(stamps) - (self.keep - 1))]:
            self._remove(mirror, home / stamp.name.removesuffix(".built"), stamp)

    @staticmethod
    def _remove(mirror: Path, path: Path, stamp: Path) -> None:
        stamp.unlink(missing_ok=True)
        remove_worktree(mirror, path, locked=True)
        shutil.rmtree(path, ignore_errors=True)
        prune_worktrees(mirror)


class SourceTrees:
    """A LocalMeasurer's Trees on a box: the checkout of one job's source, built and kept for the next."""

    def __init__(self, checkouts: Checkouts, source: dict):
        self.checkouts, self.source = checkouts, source

    @contextmanager
    def checkout(self, commit: str, slot: str = "") -> Iterator[Path]:
        yield self.checkouts.prepare({**self.source, "commit": commit})


def describe(source: dict) -> str:
    return f"{source.get('commit', '?')[:12]} of {printable(str(source.get('repo')), 80)}"

"""git, for the commands that measure commits (bisect, robot, the lab's boxes).

Running git with one-line errors, resolving revisions, refusing a checkout with
changes to tracked files, and worktrees: detached `git worktree`s under one
temporary directory, removed on close, with an owner file so that what a
killed process left behind can be told from what a live one is using.

Building a commit runs a user's command through perflab's executor, which
lives above this layer: that is perflab.automate.measurer.build.
"""

from __future__ import annotations

import json
import shutil
import os
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from perflab.core.errors import PerflabError


class GitError(PerflabError):
    """git failed, or a repository or revision is not what was asked for; the message says why in one line."""


class BuildFailed(PerflabError):
    """The build command failed at a commit: that commit cannot be measured (bisect skips it).

    `why` is the build's own failure (exit status, stderr's tail); the message may say more
    (which option, which commit)."""

    def __init__(self, message: str, why: str | None = None):
        super().__init__(message)
        self.why = message if why is None else why


# Who perflab's own commits are by (a series' `git am`, a revert check's commit, a recipe's patches):
# `git -C REPO *IDENT am ...` needs no user configuration on the machine.
IDENT = ("-c", "user.name=perflab", "-c", "user.email=perflab@localhost")


def git(repo: str | Path, *args: str, check: bool = True, timeout: float = 600, env: dict[str, str] | None = None,
        input: str | None = None) -> subprocess.CompletedProcess:
    """Run git in `repo`; GitError with git's last line when it fails and `check`.

    `env`: variables added to the environment (GIT_INDEX_FILE); `input`: its standard input."""
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=timeout,
                              input=input, stdin=None if input is not None else subprocess.DEVNULL,
                              env={**os.environ, **env} if env else None)
    except FileNotFoundError:
        raise GitError("git is not installed (Debian package git)") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git {' '.join(args[:2])} in {repo} did not finish in {timeout:g} s") from None
    if check and done.returncode != 0:
        lines = (done.stderr.strip() or done.stdout.strip() or f"exit status {done.returncode}").splitlines()
        raise GitError(f"git {' '.join(args[:3])} in {repo}: {lines[-1]}")
    return done


def repo_root(path: str) -> Path:
    p = Path(path).expanduser()
    if not p.is_dir():
        raise GitError(f"--repo {path}: no such directory")
    done = git(p, "rev-parse", "--show-toplevel", check=False)
    if done.returncode != 0:
        raise GitError(f"--repo {path}: not a git repository")
    return Path(done.stdout.strip()).resolve()


def resolve(repo: Path, rev: str, option: str) -> str:
    """A revision -> its full commit sha; GitError naming the option when it does not exist."""
    if not rev or rev.startswith("-"):
        raise GitError(f"{option} {rev!r}: not a revision")
    done = git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}", check=False)
    if done.returncode != 0 or not done.stdout.strip():
        raise GitError(f"{option} {rev}: no such revision in {repo}")
    return done.stdout.strip()


def check_clean(repo: Path) -> None:
    """Refuse a checkout with changes to tracked files (staged or not); untracked files are fine.

    Commits are built in worktrees of their own, so such changes would not be
    measured: a user who expects them to be is told now, not after an hour."""
    done = git(repo, "status", "--porcelain", "--untracked-files=no")
    changed = [line[3:] for line in done.stdout.splitlines() if line.strip()]
    if changed:
        more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        raise GitError(f"--repo {repo} has uncommitted changes to tracked files ({', '.join(changed[:3])}{more}): "
                       "commit or stash them first (the bisection measures commits, not the working tree)")


def commit_info(repo: Path, sha: str) -> dict:
    done = git(repo, "show", "-s", "--format=%H%x00%s%x00%an <%ae>%x00%aI", sha)
    full, subject, author, date = (done.stdout.rstrip("\n").split("\x00") + ["", "", "", ""])[:4]
    return {"sha": full, "subject": subject, "author": author, "date": date}


# -- worktrees -----------------------------------------------------------------

NO_FILES = "/.perflab-no-files"     # a sparse-checkout pattern that matches no file


def add_worktree(repo: Path, path: Path, sha: str, *, force: bool = False, files: bool = True) -> Path:
    """A detached worktree of `repo` at `sha` in `path` (force: also over a stale registration).

    files=False: no file is written (a sparse checkout that matches none; its index marks every
    file skip-worktree, so `git status` says clean, at once), for runs that record the commit and
    need nothing of its tree: a kernel's, built elsewhere. A 75,000-file kernel tree is then added
    in a second instead of 25, and each run's status check does not stat every file."""
    git(repo, "worktree", "add", "--detach", *(["--force"] if force else []), *([] if files else ["--no-checkout"]),
        str(path), sha)
    if not files:
        git(path, "sparse-checkout", "set", "--no-cone", NO_FILES)
        git(path, "checkout", "-q", "--force", "--detach", sha)
    return path


def remove_worktree(repo: Path, path: Path, *, locked: bool = False) -> None:
    """Remove a worktree, changes and all (locked: also one whose `git worktree add` was killed)."""
    git(repo, "worktree", "remove", "--force", *(["--force"] if locked else []), str(path), check=False)


def prune_worktrees(repo: Path) -> None:
    git(repo, "worktree", "prune", check=False)


def _owner_alive(owner_file: Path, alive: Callable[[dict], bool]) -> bool:
    try:
        return alive(json.loads(owner_file.read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return False


def prune_stale(repo: Path, prefix: str, owner_file: str, alive: Callable[[dict], bool]) -> list[str]:
    """Remove the worktrees of `repo` under directories named `prefix*` whose owner is gone; the paths removed.

    `alive(owner)` tells, from the owner file's contents, whether the process that wrote it still runs."""
    done = git(repo, "worktree", "list", "--porcelain", check=False)
    removed = []
    for line in done.stdout.splitlines():
        if not line.startswith("worktree "):
            continue
        path = Path(line[len("worktree "):])
        base = path.parent
        if not base.name.startswith(prefix):
            continue
        if (base / owner_file).exists() and _owner_alive(base / owner_file, alive):
            continue
        # twice --force: a kill during `git worktree add` leaves the entry locked ("initializing")
        remove_worktree(repo, path, locked=True)
        removed.append(str(path))
        if base.exists() and not any(p.name != owner_file for p in base.iterdir()):
            shutil.rmtree(base, ignore_errors=True)
    prune_worktrees(repo)
    return removed


class Worktrees:
    """Named detached worktrees of `repo` under one temporary directory; all removed on close()."""

    def __init__(self, repo: Path, prefix: str, owner_file: str, owner: dict):
        self.repo = repo
        self.base = Path(tempfile.mkdtemp(prefix=prefix))
        (self.base / owner_file).write_text(json.dumps(owner))
        self.paths: dict[str, Path] = {}

    def add(self, name: str, sha: str, files: bool = True) -> Path:
        path = add_worktree(self.repo, self.base / name, sha, files=files)
        self.paths[name] = path
        return path

    def close(self) -> None:
        for path in self.paths.values():
            if (path / ".git").exists():
                git(path, "bisect", "reset", check=False)
            remove_worktree(self.repo, path)
        shutil.rmtree(self.base, ignore_errors=True)
        prune_worktrees(self.repo)

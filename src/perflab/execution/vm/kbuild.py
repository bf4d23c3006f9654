"""The one kernel build path: a commit of a kernel tree built out of tree, its image kept.

Every kernel perflab builds goes through `build()`: a recipe's (execution/vm/recipe.py:
`perflab kernel build`, a job's `kernel: {tree: ...}`, a rerun) and each commit's of a
bisection, a patch series, the robot and a lab box (automate.measurer.KernelBuilds, with the
user's build command). Each has the same guarantees (docs/vm.md, "One build path"):

- Locks. A build holds an exclusive lock (flock) on its checkout and on its output directory,
  from the checkout to the publication: a second build of the same tree waits and says so. The
  locks' descriptors are inherited by the build's processes, so a build whose perflab was killed
  keeps them until its last process is gone: nothing it writes late lands in the next build.
- Processes. Every step runs through the executor's launcher: a process group of its own, killed
  whole at Ctrl-C or SIGTERM, at the timeout, and when perflab dies, kill -9 included (the
  launcher's parent-death signal): no make is left running, reparented to PID 1.
- A clean start. The checkout is moved to the commit, reset and cleaned (`git clean -fdx`) and then
  checked (HEAD is the commit, no file differs, none is left over) before anything is built. An
  output directory whose last build never ended (its perflab killed: the marker file is still
  there) is emptied first, as a half-written object file would otherwise count as built.
- Atomic publication. Image, System.map, .config and facts.json are written into a temporary
  directory beside the entry and renamed to it, once the build ended well.
- Checked entries. An entry is used only when its image is a regular file of the size and SHA-256
  its facts.json records and facts.json (a regular file, a JSON object) names what it was built
  from; anything else — a missing or corrupt facts.json, a truncated image, a FIFO — is rebuilt.
- Clones that own their objects. The recipe cache's clone of a user's tree (`Clone`) takes the
  tree's objects by hard link (a copy across file systems) and fetches a commit it lacks, so
  `git gc --prune=now` in the user's tree cannot take objects it needs (it could from the
  `--shared` clone of before: such a clone is made again).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from perflab.core import filelock
from perflab.core.buildlog import first_errors
from perflab.core.steps import step
from perflab.core.git import BuildFailed, GitError, add_worktree, git
from perflab.core.process import ProcessResult, ProcessSpec

FACTS = "facts.json"
KEPT = ("System.map", ".config")     # kept beside the image (insn-profile names functions from System.map)
BUILDING = ".perflab-building"      # in an output directory while a build runs there
LOG = "build.log"                   # in the output directory: the last build's steps and output
FACTS_LIMIT = 1 << 20
LOCK_POLL = 0.2                      # seconds between two tries of a lock another build holds


class NoImage(BuildFailed):
    """The build ended well but made no image where it was asked for."""


# -- locks ----------------------------------------------------------------------------------

def lock_path(directory: Path) -> Path:
    """The lock file of a checkout or an output directory: beside it (it may be removed and made again)."""
    return directory.with_name(directory.name + ".lock")


@contextmanager
def locked(path: Path, what: str, say: Callable[[str], None]) -> Iterator[int]:
    """Hold the exclusive lock of `path` (created); while another build holds it, wait (said once).

    Yields the descriptor: the build's steps inherit it (Running.run)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)

    @contextmanager
    def waiting() -> Iterator[None]:
        holder = filelock.holder(fd, 200) or "another perflab"
        say(f"waiting for the build of {what} by {holder} (or its processes) to end")
        with step(f"waiting for the build of {what} by {holder}"):
            yield

    try:
        filelock.take(fd, waiting, LOCK_POLL, holding=f"pid {os.getpid()}\n")
        yield fd
    finally:
        os.close(fd)


# -- checkouts ------------------------------------------------------------------------------

class Checkout(Protocol):
    repo: Path       # where the commits come from
    path: Path       # where they are checked out

    def at(self, commit: str, say: Callable[[str], None]) -> None:
        """`path` a clean checkout of `commit` (under the lock); GitError in one line."""
        ...


@dataclass(frozen=True)
class Clone:
    """perflab's own clone of a user's tree (the recipe cache's `src-*`): the user's repository is
    read, never written (no worktree entry, no ref). Its objects are its own — hard links to the
    tree's (a copy on another file system), and commits it lacks fetched — so a gc in the tree
    cannot break it. A clone that borrows objects (an alternates file: the `--shared` clone of
    before) or that git cannot read is made again."""

    repo: Path
    path: Path

    def at(self, commit: str, say: Callable[[str], None]) -> None:
        self._made(say)
        if git(self.path, "cat-file", "-e", f"{commit}^{{commit}}", check=False).returncode != 0:
            with step(f"fetching {commit[:12]} from {self.repo}"):
                git(self.path, "fetch", "-q", "--no-tags", "--no-write-fetch-head", str(self.repo), commit)
        with step(f"checking out {commit[:12]} in {self.path}"):
            clean_checkout(self.path, commit)

    def _made(self, say: Callable[[str], None]) -> None:
        path = self.path
        if path.exists() and (self._borrows(path) or
                              git(path, "rev-parse", "--git-dir", check=False).returncode != 0):
            say(f"{path}: a clone that borrows {self.repo}'s objects, or a broken one: cloned again")
            shutil.rmtree(path)
        if path.exists():
            return
        partial = path.with_name(path.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        say(f"cloning {self.repo} into {path} (objects hard-linked: the tree's gc cannot take them)")
        with step(f"cloning {self.repo}"):
            git(path.parent, "clone", "-q", "--no-checkout", str(self.repo), str(partial), timeout=3600)
            if self._borrows(partial):
                # The tree itself borrows objects (its own alternates, which a local clone inherits): copy them.
                git(partial, "repack", "-q", "-a", "-d", timeout=3600)
                (partial / ".git" / "objects" / "info" / "alternates").unlink()
        # No gc of its own in the background (a process that would outlive perflab).
        git(partial, "config", "gc.auto", "0")
        git(partial, "config", "maintenance.auto", "false")
        os.rename(partial, path)

    @staticmethod
    def _borrows(path: Path) -> bool:
        alternates = path / ".git" / "objects" / "info" / "alternates"
        return alternates.exists() and alternates.stat().st_size > 0


@dataclass(frozen=True)
class Worktree:
    """A git worktree of `repo` (a bisection's, a series' clone, a lab box's mirror), made at the first
    build: its objects are the repository's, whose gc keeps what the worktree's HEAD needs."""

    repo: Path
    path: Path

    def at(self, commit: str, say: Callable[[str], None]) -> None:
        with step(f"checking out {commit[:12]} in {self.path}"):
            if (self.path / ".git").exists() and git(self.path, "rev-parse", "--git-dir", check=False).returncode:
                # Kept from an earlier series, its repository made again since: added again.
                shutil.rmtree(self.path)
            if not (self.path / ".git").exists():
                shutil.rmtree(self.path, ignore_errors=True)
                add_worktree(self.repo, self.path, commit, force=True)
            clean_checkout(self.path, commit)


def clean_checkout(path: Path, commit: str) -> None:
    """`path` at `commit` with no change and no file left over (a killed `git am`, a patch, an
    in-tree build's objects); checked. Only files that differ are rewritten, so an out-of-tree
    build directory kept beside rebuilds what they feed."""
    am = git(path, "rev-parse", "--git-path", "rebase-apply", check=False).stdout.strip()
    if am and (path / am).exists():
        git(path, "am", "--abort", check=False)
    git(path, "checkout", "-q", "--force", "--detach", commit)
    git(path, "reset", "-q", "--hard")
    git(path, "clean", "-q", "-f", "-f", "-d", "-x")
    head = git(path, "rev-parse", "HEAD").stdout.strip()
    left = git(path, "status", "--porcelain", "--untracked-files=all", "--ignored").stdout.splitlines()
    if head != commit or left:
        raise GitError(f"{path}: not a clean checkout of {commit[:12]} after cleaning it "
                       f"({'HEAD ' + head[:12] if head != commit else left[0].strip()})")


# -- running a build ------------------------------------------------------------------------

def failure(result: ProcessResult, timeout: float | None, log: Path, offset: int = 0) -> str:
    """Why a build step failed, in one line: how it ended, and its log's last lines.

    The one place a failed build's log becomes its error message (a recipe's, a commit's): a
    step that exited is said by the compiler's first error (core.buildlog), not make's
    "Waiting for unfinished jobs" after it; a step killed or timed out by how it ended."""
    if result.timed_out or result.signal or not log.is_file():
        return result.describe_failure(timeout, tail_lines=3)
    with open(log, "rb") as f:       # this step's output only: `offset` is where it began
        f.seek(offset)
        said = first_errors(f.read().decode(errors="replace"))
    return f"exited with status {result.exit_status}" + (": " + " | ".join(said) if said else "")


@dataclass
class Running:
    """A build under way: its clean checkout (`src`), output directory (`out`) and log. Steps run
    one after the other through `run`; BuildFailed ends the build."""

    src: Path
    out: Path
    log: Path
    timeout: float | None = None          # for the whole build
    locks: tuple[int, ...] = ()
    started: float = field(default_factory=time.monotonic)
    orderly: bool = True                  # no step was SIGKILLed (which could leave half a file)
    name: str = ""                        # what is built, in the steps' progress lines: "kernel 1a2b3c4d5e6f"

    def note(self, line: str) -> None:
        with open(self.log, "a") as f:
            f.write(line.rstrip("\n") + "\n")

    def run(self, argv: list[str], what: str, env: dict[str, str] | None = None) -> None:
        """Run one step (`what` names it in errors): argv[0] a path or a program on PATH, in `src`,
        its output appended to the log; BuildFailed("... failed (what): why") when it fails."""
        from perflab.execution import interrupt
        from perflab.execution.executor import execute

        program = shutil.which(argv[0]) if "/" not in argv[0] else argv[0]
        if program is None:
            raise BuildFailed(f"kernel build: cannot run {argv[0]}: not found"
                              + (" (Debian package make)" if argv[0] == "make" else ""))
        timeout = None
        if self.timeout:
            timeout = max(1.0, self.timeout - (time.monotonic() - self.started))
        self.note("$ " + " ".join(argv))
        offset = self.log.stat().st_size
        spec = ProcessSpec([program, *argv[1:]], item=what, cwd=str(self.src), timeout=timeout,
                           env={**os.environ, **(env or {})}, capture_stdout=False, output=str(self.log))
        for fd in self.locks:
            os.set_inheritable(fd, True)      # held by the step's processes while any lives
        try:
            with step(f"{self.name}: {what}" if self.name else what):
                if threading.current_thread() is threading.main_thread():
                    with interrupt.stop_requests_as_flag():
                        result = execute(spec)
                        interrupt.check()
                else:
                    result = execute(spec)
        finally:
            for fd in self.locks:
                os.set_inheritable(fd, False)
        if result.signal == signal.SIGKILL:
            # It did not stop within the launcher's grace time: make could not remove what it was writing.
            self.orderly = False
        if not result.ok:
            why = failure(result, timeout, self.log, offset)
            raise BuildFailed(f"{what} failed: {why}", why)


# -- entries --------------------------------------------------------------------------------

def _read_regular(path: Path, limit: int) -> bytes | None:
    """A regular file's bytes (None: missing, not a regular file, larger than `limit`); never blocks."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read(limit + 1)
    finally:
        os.close(fd)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def facts_of(entry: Path) -> dict | None:
    """An entry's facts.json when it is a regular file holding a JSON object; None otherwise (never blocks)."""
    raw = _read_regular(entry / FACTS, FACTS_LIMIT)
    if raw is None:
        return None
    try:
        facts = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    return facts if isinstance(facts, dict) else None


def published(entry: Path, image: str, expect: dict) -> dict | None:
    """The facts of a published entry (`entry/image` and its facts.json) when it checks out: the image
    a regular file of the size and hash recorded, facts.json a JSON object holding `expect`'s items.
    None otherwise: not there, or broken (rebuilt)."""
    facts = facts_of(entry)
    if facts is None or any(facts.get(k) != v for k, v in expect.items()):
        return None
    try:
        st = os.lstat(entry / image)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_size == 0 or facts.get("image_bytes") != st.st_size:
        return None
    if facts.get("image_sha256") != _sha256(entry / image):
        return None
    return facts


def publish(entry: Path, image: Path, out: Path, facts: dict) -> dict:
    """Write the entry whole: the image (named as in the build), the KEPT files of `out` and
    facts.json (with the image's size and hash) into a temporary directory, renamed to `entry`."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    for stale in entry.parent.glob(f".{entry.name}.*"):      # a killed build's (we hold the lock)
        shutil.rmtree(stale, ignore_errors=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{entry.name}.", dir=entry.parent))
    try:
        shutil.copyfile(image, scratch / image.name)
        for name in KEPT:
            if (out / name).is_file():
                shutil.copyfile(out / name, scratch / name)
        facts = {**facts, "image_bytes": (scratch / image.name).stat().st_size,
                 "image_sha256": _sha256(scratch / image.name)}
        (scratch / FACTS).write_text(json.dumps(facts, indent=1))
        if entry.exists() or entry.is_symlink():      # a broken entry (published() said so)
            old = Path(tempfile.mkdtemp(prefix=f".{entry.name}.", dir=entry.parent))
            os.rename(entry, old / "old")
            shutil.rmtree(old, ignore_errors=True)
        os.rename(scratch, entry)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return facts


def _fresh_output(out: Path, say: Callable[[str], None]) -> None:
    """The output directory, emptied when its last build never ended; marked as building."""
    marker = out / BUILDING
    if marker.exists():
        say(f"the last build in {out} did not end (perflab killed?): built again from scratch")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    marker.write_text(f"pid {os.getpid()}\n")


# -- the one path ---------------------------------------------------------------------------

def build(checkout: Checkout, commit: str, out: Path, steps: Callable[[Running], None], *, image: str,
          entry: Path, facts: Callable[[Path], dict], expect: dict, timeout: float | None = None,
          prepare: Callable[[Path], None] | None = None, say: Callable[[str], None] = lambda _l: None,
          name: str = "") -> dict:
    """Build `commit` of `checkout` with `steps` into `out` and publish `out/image` as `entry`; its facts.

    Under the checkout's and the output directory's locks: an entry published meanwhile (by the
    build this one waited for) is taken as it is; else the checkout is made a clean one of `commit`,
    `prepare(src)` runs (a recipe's patches), the steps run (Running.run), and the image, when there,
    is published with `facts(out)` (which must hold `expect`'s items). BuildFailed when a step fails
    or no image was made (NoImage); the entry is then untouched. `name`: what the progress lines call
    the build (core.steps; default "kernel COMMIT")."""
    image_name = Path(image).name
    with ExitStack() as held:
        fds = (held.enter_context(locked(lock_path(checkout.path), str(checkout.repo), say)),
               held.enter_context(locked(lock_path(out), str(out), say)))
        found = published(entry, image_name, expect)
        if found is not None:
            return found
        checkout.at(commit, say)
        if prepare is not None:
            prepare(checkout.path)
        _fresh_output(out, say)
        running = Running(checkout.path, out, out / LOG, timeout, fds, name=name or f"kernel {commit[:12]}")
        running.log.write_text(f"# perflab: {commit} of {checkout.repo} in {checkout.path}\n")
        try:
            steps(running)
        finally:
            if running.orderly:
                (out / BUILDING).unlink(missing_ok=True)
        made = out / image
        if not made.is_file() or made.stat().st_size == 0:
            why = f"the build made no kernel at {image} of its output directory"
            raise NoImage(why, why)
        return publish(entry, made, out, {**facts(out), **expect})

"""Statistical bisection with the real `git bisect`.

`perflab bisect` finds the first commit between a good and a bad revision at
which a metric changed level. It

- refuses, before any step, what cannot work: a revision that does not exist,
  good == bad, good not an ancestor of bad, tracked changes in the user's
  checkout, a metric the job does not produce, a build or a benchmark that
  fails at either end, ends that do not really differ;
- works in separate `git worktree`s (one per end, one for the steps) under a
  temporary directory, so the user's checkout and branch are never touched;
  the steps are driven by the real `git bisect` in their worktree (`start BAD
  GOOD`, then `good` / `bad` / `skip`), a commit whose build fails being
  skipped (exit 125 semantics);
- measures every commit through the one runner (`runner.loop.run_jobs`, with
  `repo=` the worktree, so each run is stored with its commit and the
  bisection's tag) and decides good or bad with the sequential test of
  `perflab.stats.sequential`, adding runs only while the verdict is unclear;
- removes its worktrees at the end, also after errors; after a kill -9 the
  next `perflab bisect` on that repository removes what is left.

**On a lab box** (`--box NAME` with a broker): the decisions are made here, the
measurements there. Each measurement is an atomic job queued on the box with a
`source` (repository URL, commit, build command); the box's worker fetches the
commit, builds it in a worktree of its own and runs the job (perflab.automate.lab.checkouts),
and its runs reach the shared store, where this command reads them back. The
repository URL is `--source-url` (default: --repo's path, for boxes that share
this filesystem); the box must be able to fetch every commit from it.

**Resuming.** The samples are in the store (tag `bisect-ID`, commit of each
run); the bisection's parameters, the commits skipped and the decisions are
kept in a small JSON record beside the SQLite store (`STORE.bisect/ID.json`;
for a server store, `$XDG_STATE_HOME/perflab/automate/bisect/`). The decisions are a
function of the samples: `--resume` replays the same algorithm, taking each
measurement it asks for from the stored runs of that commit first, and
measures only what is missing; it arrives where the interrupted run stopped
and goes on from there.
"""

from __future__ import annotations

import json
import math
import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from perflab.core.errors import PerflabError, UsageProblem
from perflab.stats import sequential
from perflab.stats.sequential import BAD, GOOD

OWNER_FILE = "perflab-bisect.owner"
BASE_PREFIX = "perflab-bisect-"


class BisectError(PerflabError):
    """A bisection that cannot start or go on; the message says why in one line."""


@dataclass
class Settings:
    """The knobs of the statistics; stored with the record so a resume replays alike."""

    alpha: float = 0.005          # per step: chance of calling a good commit bad (and a bad one good)
    ends_alpha: float = 0.01      # chance of calling ends different when they are not (over all looks)
    threshold: float = 0.01       # smallest relative change between the ends worth bisecting
    ends_start: int = 5           # samples per end at the first look; doubled at each later look
    ends_looks: int = 3           # looks at the ends (5, 10, 20 samples each)
    min_step: int = 2             # samples at a step commit before it may be decided
    max_step: int = 30            # at most this many at a step commit (then the closer end wins, flagged)
    max_end: int = 60             # at most this many at each end
    local_ends: bool = False      # (older records) judge every step against end runs taken beside it
    pairing: str = "auto"         # measure in pairs of runs taken one after the other and test their
                                  # ratios: "on", "off", or "auto" (when the ends' pairs show the machine's
                                  # level moving both runs of a pair: sequential.pairing_gain)


# -- git ----------------------------------------------------------------------

def git(repo: str | Path, *args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run git in `repo`; BisectError with git's last line when it fails and `check`."""
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise BisectError("git is not installed; perflab bisect needs it") from None
    except subprocess.TimeoutExpired:
        raise BisectError(f"git {' '.join(args[:2])} in {repo} did not finish in {timeout:g} s") from None
    if check and done.returncode != 0:
        lines = (done.stderr.strip() or done.stdout.strip() or f"exit status {done.returncode}").splitlines()
        raise BisectError(f"git {' '.join(args[:3])} in {repo}: {lines[-1]}")
    return done


def repo_root(path: str) -> Path:
    p = Path(path).expanduser()
    if not p.is_dir():
        raise BisectError(f"--repo {path}: no such directory")
    done = git(p, "rev-parse", "--show-toplevel", check=False)
    if done.returncode != 0:
        raise BisectError(f"--repo {path}: not a git repository")
    return Path(done.stdout.strip()).resolve()


def resolve(repo: Path, rev: str, option: str) -> str:
    """A revision -> its full commit sha; BisectError naming the option when it does not exist."""
    if not rev or rev.startswith("-"):
        raise BisectError(f"{option} {rev!r}: not a revision")
    done = git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}", check=False)
    if done.returncode != 0 or not done.stdout.strip():
        raise BisectError(f"{option} {rev}: no such revision in {repo}")
    return done.stdout.strip()


def check_clean(repo: Path) -> None:
    """Refuse a checkout with changes to tracked files (staged or not); untracked files are fine.

    The bisection builds commits in worktrees of their own, so such changes would
    not be measured: a user who expects them to be is told now, not after an hour."""
    done = git(repo, "status", "--porcelain", "--untracked-files=no")
    changed = [line[3:] for line in done.stdout.splitlines() if line.strip()]
    if changed:
        more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        raise BisectError(f"--repo {repo} has uncommitted changes to tracked files ({', '.join(changed[:3])}{more}): "
                          "commit or stash them first (the bisection measures commits, not the working tree)")


def commit_info(repo: Path, sha: str) -> dict:
    done = git(repo, "show", "-s", "--format=%H%x00%s%x00%an <%ae>%x00%aI", sha)
    full, subject, author, date = (done.stdout.rstrip("\n").split("\x00") + ["", "", "", ""])[:4]
    return {"sha": full, "subject": subject, "author": author, "date": date}


# -- worktrees -----------------------------------------------------------------

def _owner_alive(base: Path) -> bool:
    """Whether the perflab process that made this worktree directory is still running."""
    from perflab.store.db import process_start_time

    try:
        owner = json.loads((base / OWNER_FILE).read_text())
        return process_start_time(int(owner["pid"])) == owner.get("start")
    except (OSError, ValueError, KeyError, TypeError):
        return False


def prune_stale(repo: Path) -> list[str]:
    """Remove the worktrees a killed bisection left in `repo`; the paths removed."""
    done = git(repo, "worktree", "list", "--porcelain", check=False)
    removed = []
    for line in done.stdout.splitlines():
        if not line.startswith("worktree "):
            continue
        path = Path(line[len("worktree "):])
        base = path.parent
        if not base.name.startswith(BASE_PREFIX):
            continue
        if (base / OWNER_FILE).exists() and _owner_alive(base):
            continue
        # twice --force: a kill during `git worktree add` leaves the entry locked ("initializing")
        git(repo, "worktree", "remove", "--force", "--force", str(path), check=False)
        removed.append(str(path))
        if base.exists() and not any(p.name != OWNER_FILE for p in base.iterdir()):
            shutil.rmtree(base, ignore_errors=True)
    git(repo, "worktree", "prune", check=False)
    return removed


class Worktrees:
    """The bisection's worktrees of `repo`, under one temporary directory; all removed on close()."""

    def __init__(self, repo: Path, bisect_id: str):
        from perflab.store.db import process_start_time

        self.repo = repo
        self.base = Path(tempfile.mkdtemp(prefix=f"{BASE_PREFIX}{bisect_id}-"))
        (self.base / OWNER_FILE).write_text(json.dumps({"pid": os.getpid(), "start": process_start_time(os.getpid()),
                                                        "repo": str(repo)}))
        self.paths: dict[str, Path] = {}

    def add(self, name: str, sha: str) -> Path:
        path = self.base / name
        git(self.repo, "worktree", "add", "--detach", str(path), sha)
        self.paths[name] = path
        return path

    def close(self) -> None:
        for path in self.paths.values():
            if (path / ".git").exists():
                git(path, "bisect", "reset", check=False)
            git(self.repo, "worktree", "remove", "--force", str(path), check=False)
        shutil.rmtree(self.base, ignore_errors=True)
        git(self.repo, "worktree", "prune", check=False)


# -- the record -----------------------------------------------------------------

def record_dir(store) -> Path:
    """Where bisection records live: beside an SQLite store, else in perflab's state directory."""
    if getattr(store, "path", None) is not None:
        return store.path.with_name(store.path.name + ".bisect")
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(Path.home(), ".local", "state")
    return Path(state) / "perflab" / "bisect"


@dataclass
class Record:
    """The bisection's parameters and progress, rewritten atomically after every event."""

    id: str
    repo: str
    good: str
    bad: str
    build: str
    job: dict
    metric: str
    tag: str
    direction: int = -1               # the metric's: -1 lower is better, 1 higher, 0 informational
    box: str | None = None
    build_timeout: float | None = None
    broker: str | None = None         # set: measure on lab box `box` through its queue
    source_url: str | None = None     # where that box fetches the commits (default: repo)
    settings: dict = field(default_factory=dict)
    status: str = "running"           # running | done | refused | failed
    skips: dict = field(default_factory=dict)      # sha -> why it was skipped
    steps: list = field(default_factory=list)      # decisions, in order
    result: dict | None = None
    created: str = ""
    path: str = ""

    def save(self) -> None:
        target = Path(self.path)
        target.parent.mkdir(parents=True, exist_ok=True)
        data = {k: v for k, v in asdict(self).items() if k != "path"}
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        os.replace(tmp, target)

    @classmethod
    def load(cls, path: Path) -> "Record":
        try:
            data = json.loads(path.read_text())
            return cls(**data, path=str(path))
        except (OSError, ValueError, TypeError) as e:
            raise BisectError(f"bisection record {path}: unreadable ({e})") from None


def find_record(store, bisect_id: str | None, repo: Path | None) -> Record:
    """The record to resume: by id, else the latest unfinished one (of `repo` when given)."""
    directory = record_dir(store)
    if bisect_id:
        name = bisect_id.removeprefix("bisect-")
        path = directory / f"{name}.json"
        if not path.exists():
            raise BisectError(f"--resume: no bisection {bisect_id!r} in {directory}")
        return Record.load(path)
    candidates = []
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        rec = Record.load(path)
        if rec.status == "running" and (repo is None or Path(rec.repo) == repo):
            candidates.append((rec.created, rec))
    if not candidates:
        where = f" of {repo}" if repo else ""
        raise BisectError(f"--resume: no unfinished bisection{where} recorded in {directory}")
    return max(candidates, key=lambda c: c[0])[1]


# -- the job -------------------------------------------------------------------

def command_job(words: list[str]) -> dict:
    """`-- COMMAND ...` as a cmd atomic job (run in the worktree of the commit measured)."""
    return {"benchmark": "cmd", "params": {"argv": list(words)}, "runs": 1, "warmup": 0, "timeout": None,
            "tag": None, "comment": None, "monitors": {}}


def file_job(path: str) -> dict:
    from perflab import jobs

    atomic = jobs.load(path)
    if len(atomic) != 1:
        raise UsageProblem(f"--job {path} expands to {len(atomic)} atomic jobs; a bisection measures one "
                           f"(write one with `perflab jobs split {path} -o DIR`)")
    return atomic[0]


def check_metric(job: dict, metric: str) -> tuple[int, str]:
    """(direction, unit) of `metric` in the job's catalog; refused with the metrics it does produce."""
    from perflab import benchmarks

    family = benchmarks.family(job["benchmark"])
    catalog = family.metrics(family.parse_params(job.get("params") or {}))
    if metric not in catalog:
        raise UsageProblem(f"--metric {metric}: the {job['benchmark']} job does not produce it; "
                           f"it produces: {', '.join(sorted(catalog))}")
    return catalog[metric].direction, catalog[metric].unit


# -- the bisection -------------------------------------------------------------

@dataclass
class StepRecord:
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


@dataclass
class Result:
    record: Record
    culprit: dict | None                 # sha, subject, author, date of the first bad commit
    candidates: list[dict]               # when skipped commits leave several
    ends: sequential.EndsVerdict
    evidence: dict                       # the culprit against the good end (and its parent)
    log: str                             # `git bisect log`
    runs_used: int                       # timed runs of this bisection (stored ones included)
    commits_measured: int
    steps: list[StepRecord]


class CommitFailed(Exception):
    """The benchmark failed at a commit (not a build failure): the commit cannot be judged."""


class Bisection:
    """One bisection: the record, the store, the worktrees and the samples gathered so far."""

    def __init__(self, store, record: Record, say: Callable[[str], None] = lambda _m: None):
        self.store = store
        self.rec = record
        self.settings = Settings(**record.settings)
        self.say = say
        self.repo = Path(record.repo)
        self.samples: dict[str, list[float]] = defaultdict(list)     # commit -> values used so far
        self.stored: dict[str, deque] = defaultdict(deque)           # commit -> stored values not yet used
        self.stored_failures: dict[str, str] = {}
        self.worktrees: Worktrees | None = None
        self.built: dict[str, str] = {}                              # worktree name -> commit built there
        self.fresh_runs = 0
        self.runs_used = 0
        self.end_pairs: list[tuple[float, float]] = []               # (good, bad) taken one after the other
        self.pairs: dict[str, list[tuple[float, float]]] = defaultdict(list)   # commit -> (good, commit)
        self.paired = False
        self._load_stored()

    # -- samples ------------------------------------------------------------------
    def _load_stored(self) -> None:
        runs = self.store.find_runs(tag=self.rec.tag)
        ids = [r.id for r in runs if r.commit]
        by_run = defaultdict(list)
        for row in self.store.samples(ids):
            if row.metric == self.rec.metric:
                by_run[row.run_id].append(row.value)
        for r in runs:
            if not r.commit:
                continue
            if r.status == "failed" and not by_run.get(r.id):
                self.stored_failures.setdefault(r.commit, r.error or "the benchmark failed")
            self.stored[r.commit].extend(by_run.get(r.id, []))

    def measure(self, commit: str, k: int, role: str) -> list[float]:
        """k more samples of `commit`: stored ones first (a resume), then fresh runs."""
        out = []
        queue = self.stored[commit]
        while queue and len(out) < k:
            out.append(queue.popleft())
        if len(out) < k:
            if commit in self.stored_failures and not self.samples[commit] and not out:
                raise CommitFailed(self.stored_failures[commit])
            out.extend(self._run(commit, k - len(out), role))
        self.samples[commit].extend(out)
        self.runs_used += len(out)
        return out

    def _worktree_for(self, commit: str, role: str) -> tuple[str, Path]:
        assert self.worktrees is not None
        if role in (GOOD, BAD):
            name = role
            if name not in self.worktrees.paths:
                self.worktrees.add(name, commit)
        else:
            name = "step"
        return name, self.worktrees.paths[name]

    def _run(self, commit: str, k: int, role: str) -> list[float]:
        from perflab.runner.loop import run_jobs

        if self.rec.broker:
            return self._run_on_box(commit, k, role)
        name, path = self._worktree_for(commit, role)
        head = git(path, "rev-parse", "HEAD").stdout.strip()
        if head != commit:
            raise BisectError(f"internal: worktree {path} is at {head[:12]}, expected {commit[:12]}")
        if self.built.get(name) != commit:
            why = build(path, self.rec.build, self.rec.build_timeout)
            if why is not None:
                raise BuildFailed(f"--build failed: {why}")
            self.built[name] = commit
        what = {GOOD: "good end", BAD: "bad end"}.get(role, "step")
        job = {**self.rec.job, "runs": k, "tag": self.rec.tag,
               "comment": f"perflab bisect {self.rec.id}: {what} {commit[:12]} (metric {self.rec.metric})"}
        here = os.getcwd()
        os.chdir(path)   # a command like ./prog means the program built in this worktree
        try:
            outcome = run_jobs(self.store, [job], box=self.rec.box, repo=str(path))[0]
        finally:
            os.chdir(here)
        values = outcome.values.get(self.rec.metric, [])
        self.fresh_runs += len(values)
        if outcome.error is not None and not values:
            raise CommitFailed(outcome.error)
        if not values:
            produced = ", ".join(sorted(outcome.values)) or "nothing"
            raise BisectError(f"--metric {self.rec.metric}: the job at {commit[:12]} did not produce it; "
                              f"it produced: {produced}")
        return values

    def _run_on_box(self, commit: str, k: int, role: str) -> list[float]:
        """k runs of `commit` on the lab box: queued with its source, built and run by the box's worker."""
        from perflab.automate.lab.client import run_on_box

        rec = self.rec
        what = {GOOD: "good end", BAD: "bad end"}.get(role, "step")
        job = {**rec.job, "runs": k, "tag": rec.tag,
               "comment": f"perflab bisect {rec.id}: {what} {commit[:12]} (metric {rec.metric})",
               "source": {"repo": rec.source_url or rec.repo, "commit": commit, "build": rec.build,
                          "build_timeout": rec.build_timeout}}
        done = run_on_box(rec.broker, rec.box, [job], self.store, say=self.say)[0]
        if done.status == "build-failed":
            raise BuildFailed(done.error)
        if done.status in ("source-failed", "cancelled"):
            raise BisectError(f"box {rec.box}: {done.error or 'the job was cancelled'}")
        by_run = defaultdict(list)
        for row in self.store.samples([r.id for r in done.runs]):
            if row.metric == rec.metric:
                by_run[row.run_id].append(row.value)
        values = [v for r in done.runs for v in by_run.get(r.id, [])]
        self.fresh_runs += len(values)
        if not values and (done.status != "done" or not done.runs):
            raise CommitFailed(done.error or f"box {rec.box} produced no run")
        if not values:
            raise BisectError(f"--metric {rec.metric}: the job at {commit[:12]} on box {rec.box} did not produce it")
        return values

    # -- the ends --------------------------------------------------------------------
    def check_ends(self) -> sequential.EndsVerdict:
        s = self.settings
        good, bad = self.rec.good, self.rec.bad
        verdict = None
        for look in range(s.ends_looks):
            target = s.ends_start * 2 ** look
            # The ends in pairs, one run right after the other, the order alternating: drift of the
            # machine hits both alike, and a pair shares the machine's level of the moment.
            while len(self.end_pairs) < target:
                self._end_pair(starting=True)
            g, b = (list(x) for x in zip(*self.end_pairs))
            pays, gain = sequential.pairing_pays(g, b)
            paired = sequential.ends_differ_paired(g, b, s.ends_alpha, s.ends_looks, s.threshold)
            unpaired = sequential.ends_differ(self.samples[good], self.samples[bad], s.ends_alpha, s.ends_looks,
                                              s.threshold)
            # Auto: pairs when their runs move together, and also when single runs were disturbed or
            # tell another story than the pairs (a change of the machine's speed among the first
            # runs splits each end's samples between two levels: the single runs then show a
            # change that is not there).
            moved = unpaired.dropped > 0 or (math.isfinite(paired.ci[0]) and unpaired.differ
                                             and not paired.ci[0] <= unpaired.change <= paired.ci[1])
            self.paired = s.pairing == "on" or s.local_ends or (s.pairing == "auto" and (pays or moved))
            verdict = paired if self.paired else unpaired
            self.say(f"ends: good {good[:12]} n={verdict.n_good}, bad {bad[:12]} n={verdict.n_bad}: "
                     f"{verdict.change * 100:+.2f}% (p={verdict.p_value:.2g}, "
                     f"{'differ' if verdict.differ else verdict.reason}; "
                     f"{'paired' if self.paired else 'unpaired'}: correlation of a pair's runs {gain:+.2f})")
            if verdict.differ:
                return verdict
        assert verdict is not None
        raise EndsDoNotDiffer(verdict)

    def _one(self, commit: str, role: str) -> float:
        """One run's value of `commit` (the mean, when a run gives several samples of the metric)."""
        values = self.measure(commit, 1, role)
        return sum(values) / len(values)

    def _end_pair(self, starting: bool = False) -> None:
        good, bad = self.rec.good, self.rec.bad
        order = ((good, GOOD), (bad, BAD)) if len(self.end_pairs) % 2 == 0 else ((bad, BAD), (good, GOOD))
        got = {}
        for commit, role in order:
            try:
                got[role] = self._one(commit, role)
            except BuildFailed as e:
                raise BisectError(f"--build {self.rec.build!r} fails at the {role} end "
                                  f"{commit[:12]}: {str(e).removeprefix('--build failed: ')}") from None
            except CommitFailed as e:
                raise BisectError(f"the job fails at the {role} end {commit[:12]}: {e}") from None
        self.end_pairs.append((got[GOOD], got[BAD]))

    def _step_pair(self, commit: str) -> None:
        pairs = self.pairs[commit]
        order = ((commit, "step"), (self.rec.good, GOOD)) if len(pairs) % 2 == 0 else \
            ((self.rec.good, GOOD), (commit, "step"))
        got = {role: self._one(c, role) for c, role in order}
        pairs.append((got[GOOD], got["step"]))

    def _decide_paired(self, commit: str) -> StepRecord:
        """Measure `commit` in pairs with good until the paired sequential test calls it (or max_step pairs)."""
        import numpy as np

        s = self.settings
        while len(self.pairs[commit]) < s.min_step:
            self._step_pair(commit)
        while True:
            # One scale for every pair (logs when every value measured in pairs is positive),
            # each pair's difference taken second minus first: bad - good, commit - good.
            logged = all(v > 0 for pairs in (self.end_pairs, *self.pairs.values()) for pair in pairs for v in pair)

            def differences(pairs):
                a = np.array(pairs, dtype=float)
                return np.log(a[:, 1]) - np.log(a[:, 0]) if logged else a[:, 1] - a[:, 0]

            others = [differences(p) for c, p in self.pairs.items() if c != commit and p]
            v = sequential.classify_paired(differences(self.end_pairs), differences(self.pairs[commit]), s.alpha,
                                           s.min_step, others)
            n = len(self.samples[commit])
            if v.verdict is not None:
                return StepRecord(commit, v.verdict, n, v.llr, v.p_bad, v.position, paired=True, between=v.between)
            if len(self.pairs[commit]) >= s.max_step:
                return StepRecord(commit, BAD if v.llr > 0 else GOOD, n, v.llr, v.p_bad, v.position, forced=True,
                                  paired=True, between=v.between)
            if v.next == "ends" and len(self.end_pairs) < s.max_end:
                self._end_pair()
            else:
                self._step_pair(commit)

    # -- one step ----------------------------------------------------------------------
    def decide(self, commit: str) -> StepRecord:
        """Measure `commit` until the sequential test calls it good or bad (or max_step runs)."""
        if self.paired:
            return self._decide_paired(commit)
        s = self.settings
        good, bad = self.rec.good, self.rec.bad
        first_good, first_bad = len(self.samples[good]), len(self.samples[bad])
        local = False   # judged against end samples taken alongside it
        if local:
            # commit, good, bad, commit, good, bad ...: each machine state hits all three alike
            for _ in range(s.min_step):
                self.measure(commit, 1, "step")
                self.measure(good, 1, GOOD)
                self.measure(bad, 1, BAD)
        else:
            self.measure(commit, s.min_step, "step")
        while True:
            g = self.samples[good][first_good:] if local else self.samples[good]
            b = self.samples[bad][first_bad:] if local else self.samples[bad]
            if len(g) < s.min_step or len(b) < s.min_step:
                self.measure(good if len(g) <= len(b) else bad, 1, GOOD if len(g) <= len(b) else BAD)
                continue
            v = sequential.classify(g, b, self.samples[commit], s.alpha, s.min_step)
            if v.outside and not local:
                if s.pairing == "auto" and self.end_pairs:
                    # The machine's level has moved since the ends were measured: from here on,
                    # every measurement is a pair taken one run after the other.
                    self.say(f"  {commit[:12]}: its samples lie outside the ends' range (position "
                             f"{v.position:+.2f}): the machine's speed moved; measuring in pairs from here on")
                    self.paired = True
                    return self._decide_paired(commit)
                self.say(f"  {commit[:12]}: its samples lie outside the ends' range (position {v.position:+.2f}): "
                         "measuring the ends again beside it")
                local = True
                continue
            if v.verdict is not None:
                return StepRecord(commit, v.verdict, len(self.samples[commit]), v.llr, v.p_bad, v.position,
                                  drift=local, between=v.between)
            if len(self.samples[commit]) >= s.max_step:
                return StepRecord(commit, BAD if v.llr > 0 else GOOD, len(self.samples[commit]), v.llr, v.p_bad,
                                  v.position, forced=True, drift=local, between=v.between)
            end = {GOOD: good, BAD: bad}.get(v.next)
            if end is not None and (local or len(self.samples[end]) < s.max_end):
                self.measure(end, 1, v.next)
            else:
                self.measure(commit, 1, "step")

    # -- the whole -----------------------------------------------------------------------
    def run(self) -> Result:
        rec = self.rec
        prune_stale(self.repo)
        self.worktrees = Worktrees(self.repo, rec.id)
        try:
            with _sigterm_as_interrupt():
                ends = self.check_ends()
                steps = self._bisect()
                return self._result(ends, steps)
        except EndsDoNotDiffer as e:
            rec.status = "refused"
            rec.save()
            v = e.verdict
            raise BisectError(
                f"good {rec.good[:12]} and bad {rec.bad[:12]} do not differ in {rec.metric}: "
                f"{v.change * 100:+.2f}% (p={v.p_value:.2g}, {v.reason}, n={v.n_good}+{v.n_bad}); "
                f"these samples could detect a change of {_pct_size(v.detectable)} with 90% power; "
                "refusing to bisect noise") from None
        except BisectError:
            if rec.status == "running" and not self.samples:
                rec.status = "refused"
            rec.save()
            raise
        finally:
            self.worktrees.close()

    def _bisect(self) -> list[StepRecord]:
        rec = self.rec
        path = self.worktrees.add("step", rec.good)
        out = git(path, "bisect", "start", rec.bad, rec.good)
        text = out.stdout + out.stderr
        steps: list[StepRecord] = []
        while not _finished(text):
            commit = git(path, "rev-parse", "HEAD").stdout.strip()
            info = commit_info(path, commit)
            try:
                if commit in rec.skips:
                    raise BuildFailed(rec.skips[commit])
                step = self.decide(commit)
            except (BuildFailed, CommitFailed) as e:
                rec.skips[commit] = str(e)
                step = StepRecord(commit, "skip", why=str(e))
            steps.append(step)
            rec.steps = [asdict(s) for s in steps]
            rec.save()
            self.say(_step_line(len(steps), info, step, self))
            out = git(path, "bisect", step.verdict, commit, check=False)
            text = out.stdout + out.stderr
            if out.returncode != 0 and not _finished(text):
                raise BisectError(f"git bisect {step.verdict} {commit[:12]}: "
                                  f"{(text.strip() or 'failed').splitlines()[-1]}")
        self._final_output = text
        return steps

    def _result(self, ends, steps: list[StepRecord]) -> Result:
        rec = self.rec
        path = self.worktrees.paths["step"]
        log = git(path, "bisect", "log").stdout
        text = getattr(self, "_final_output", "")
        first = re.search(r"^([0-9a-f]{40}) is the first bad commit", text, re.MULTILINE)
        culprit, candidates = None, []
        if first:
            culprit = commit_info(self.repo, first.group(1))
        else:
            shas = re.findall(r"^([0-9a-f]{40})$", text, re.MULTILINE)
            candidates = [commit_info(self.repo, sha) for sha in shas]
        evidence = self._evidence(culprit["sha"] if culprit else None, steps)
        rec.status = "done"
        rec.result = {"culprit": culprit, "candidates": candidates, "evidence": evidence,
                      "runs_used": self.runs_used, "commits_measured": self._measured()}
        rec.save()
        return Result(rec, culprit, candidates, ends, evidence, log, self.runs_used, self._measured(), steps)

    def _measured(self) -> int:
        return sum(1 for values in self.samples.values() if values)

    def _evidence(self, culprit: str | None, steps: list[StepRecord]) -> dict:
        import numpy as np

        from perflab.stats.compare import compare_many
        from perflab.stats.power import detectable_change

        if culprit is None or not self.samples.get(culprit):
            return {}

        # The same samples the sequential test judged by: disturbed ones left out.
        (g, c), logged = sequential.transform(self.samples[self.rec.good], self.samples[culprit])
        (g, c), dropped = sequential.drop_disturbed(g, c)
        good, values = (np.exp(g), np.exp(c)) if logged else (g, c)
        cmp = compare_many([(good, values, self.rec.direction)], alpha=0.05, threshold=self.settings.threshold)[0]
        sd = sequential.pooled_sd(g, c)
        decided = next((s for s in steps if s.commit == culprit), None)
        parent = git(self.repo, "rev-parse", f"{culprit}^").stdout.strip() if culprit != self.rec.good else ""
        parent_step = next((s for s in steps if s.commit == parent), None)
        return {
            "n_good": len(good), "n_culprit": len(values), "culprit_values": list(self.samples[culprit]),
            "dropped": dropped,
            "good_mean": cmp.base.mean, "culprit_mean": cmp.head.mean,
            "change": cmp.pct_change, "ci": cmp.ci, "p_value": cmp.p_value, "verdict": cmp.verdict,
            "detectable": detectable_change(len(good), len(values), sd, 0.05, logged=logged, scale=cmp.base.mean),
            "llr": decided.llr if decided else None, "p_bad": decided.p_bad if decided else None,
            "parent": parent, "parent_p_bad": parent_step.p_bad if parent_step else None,
            "parent_is_good_end": parent == self.rec.good,
        }


def _pct_size(x: float) -> str:
    """A size of change in words: 1.4% / 23% / 140%."""
    if not math.isfinite(x):
        return "no change at all"
    return f"{x * 100:.2g}%" if x < 0.1 else f"{x * 100:.0f}%"


class BuildFailed(Exception):
    """The build command failed at a commit: that commit is skipped."""


class EndsDoNotDiffer(Exception):
    def __init__(self, verdict: sequential.EndsVerdict):
        self.verdict = verdict
        super().__init__(verdict.reason)


def _finished(text: str) -> bool:
    """Whether git bisect's output says it is done (a first bad commit, or only skipped ones left)."""
    return "is the first bad commit" in text or "only 'skip'ped commits left" in text


def _step_line(number: int, info: dict, step: StepRecord, b: Bisection) -> str:
    subject = info["subject"][:50]
    if step.verdict == "skip":
        return f"step {number}: {info['sha'][:12]} {subject!r}: skipped ({step.why[:120]})"
    flag = " (undecided at the run limit: the closer end wins)" if step.forced else ""
    if step.paired:
        flag += " (paired with good)"
    if step.between:
        flag += " (it differs from both ends: a partial change, or two changes? the nearer end wins)"
    return (f"step {number}: {info['sha'][:12]} {subject!r}: {step.verdict} after {step.n} runs "
            f"(P(bad)={step.p_bad:.4f}, position {step.position:+.2f}; ends now n={len(b.samples[b.rec.good])}"
            f"+{len(b.samples[b.rec.bad])}){flag}")


def build(path: Path, command: str, timeout: float | None) -> str | None:
    """Run the build command in a worktree through the runner's executor; why it failed, or None."""
    from perflab.execution import interrupt
    from perflab.execution.executor import ProcessSpec, execute

    if not command.strip():
        return None
    spec = ProcessSpec(["/bin/sh", "-c", command], item=f"--build {command!r}", cwd=str(path),
                       timeout=timeout, capture_stdout=False)
    with interrupt.stop_requests_as_flag():
        result = execute(spec)
        interrupt.check()
    if result.ok:
        return None
    return result.describe_failure(timeout, tail_lines=3)


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM between runs ends the bisection through the finally blocks (worktrees removed)."""
    from perflab.execution.interrupt import Interrupted

    def handler(signum, _frame):
        raise Interrupted(signum)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# -- entry points --------------------------------------------------------------------

def start(store, *, repo: str, good: str, bad: str, build_cmd: str, job: dict, metric: str, tag: str | None,
          box: str | None = None, build_timeout: float | None = None, settings: Settings | None = None,
          broker: str | None = None, source_url: str | None = None,
          say: Callable[[str], None] = lambda _m: None) -> Result:
    """Validate everything, then bisect; BisectError/UsageProblem before any step for bad input."""
    root = repo_root(repo)
    good_sha = resolve(root, good, "--good")
    bad_sha = resolve(root, bad, "--bad")
    if good_sha == bad_sha:
        raise BisectError(f"--good {good} and --bad {bad} are the same commit {good_sha[:12]}: nothing to bisect")
    if git(root, "merge-base", "--is-ancestor", good_sha, bad_sha, check=False).returncode != 0:
        raise BisectError(f"--good {good} ({good_sha[:12]}) is not an ancestor of --bad {bad} ({bad_sha[:12]}); "
                          "git bisect needs the good commit in the bad one's history")
    check_clean(root)
    direction, _unit = check_metric(job, metric)
    if broker:
        check_lab(broker, box, root, source_url, (good_sha, bad_sha))
    bisect_id = secrets.token_hex(4)
    tag = tag or f"bisect-{bisect_id}"
    rec = Record(id=bisect_id, repo=str(root), good=good_sha, bad=bad_sha, build=build_cmd,
                 job=job, metric=metric, tag=tag, direction=direction, box=box, build_timeout=build_timeout,
                 broker=broker, source_url=source_url,
                 settings=asdict(settings or Settings()), created=time.strftime("%Y-%m-%dT%H:%M:%S"),
                 path=str(record_dir(store) / f"{bisect_id}.json"))
    rec.save()
    say(f"bisection {bisect_id}: {good_sha[:12]}..{bad_sha[:12]} in {root}, metric {metric}, "
        f"runs tagged {tag}, record {rec.path}")
    return Bisection(store, rec, say).run()


def check_lab(broker: str, box: str | None, root: Path, source_url: str | None, commits: tuple[str, ...]) -> None:
    """Before any step on a lab box: the box named, the broker reachable, the commits at the source URL."""
    from perflab.automate.lab import app as lab

    if not box:
        raise UsageProblem("--broker: give the lab box to measure on with --box NAME")
    lab.check_box(box)
    lab.redis_client(broker)   # one line, at once, when the broker is away
    if source_url:
        # The box fetches from there: the commits it will be asked for must be on its branches or tags
        # (when a head there is unknown here, the box's fetch will tell).
        done = git(root, "ls-remote", source_url, check=False, timeout=120)
        if done.returncode != 0:
            raise BisectError(f"--source-url {source_url}: git cannot read it "
                              f"({(done.stderr.strip() or 'failed').splitlines()[-1]})")
        heads = {line.split()[0] for line in done.stdout.splitlines() if line.strip()}
        if all(git(root, "cat-file", "-e", f"{h}^{{commit}}", check=False).returncode == 0 for h in heads):
            for sha in commits:
                if not any(git(root, "merge-base", "--is-ancestor", sha, h, check=False).returncode == 0
                           for h in heads):
                    raise BisectError(f"--source-url {source_url}: commit {sha[:12]} is on none of its branches "
                                      "or tags: push it there first (the box fetches the commits from it)")


def resume(store, *, bisect_id: str | None, repo: str | None,
           say: Callable[[str], None] = lambda _m: None) -> Result:
    root = repo_root(repo) if repo else None
    rec = find_record(store, bisect_id, root)
    check_clean(Path(rec.repo))
    say(f"resuming bisection {rec.id}: {rec.good[:12]}..{rec.bad[:12]} in {rec.repo}, metric {rec.metric}, "
        f"{len(rec.steps)} steps recorded, runs tagged {rec.tag}")
    return Bisection(store, rec, say).run()


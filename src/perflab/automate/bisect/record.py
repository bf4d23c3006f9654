"""A bisection's settings and its record on disk, and the one atomic job it measures.

The record (`STORE.bisect/ID.json` beside an SQLite store; for a server store,
`$XDG_STATE_HOME/perflab/bisect/`) holds the parameters, the commits skipped and
the decisions, rewritten atomically after every event; the samples are in the
store. `--resume` finds it here.
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from perflab.core.bisection import Skip, SkipCause, StepRecord
from perflab.core.errors import PerflabError, UsageProblem
from perflab.stats.compare import minimum_effects
from perflab.store.exactness import exact_as_stored
from perflab.jobs.job import AtomicJob


class BisectError(PerflabError):
    """A bisection that cannot start or go on; the message says why in one line."""


@dataclass
class Settings:
    """The knobs of the statistics; stored with the record so a resume replays alike."""

    alpha: float = 0.005          # per step: chance of calling a good commit bad (and a bad one good)
    ends_alpha: float = 0.01      # chance of calling ends different when they are not (over all looks)
    threshold: float | None = None   # smallest relative change between the ends worth bisecting;
                                     # None: the one rule's default (stats.compare.minimum_effects)
    ends_start: int = 5           # samples per end at the first look; doubled at each later look
    ends_looks: int = 3           # looks at the ends (5, 10, 20 samples each)
    min_step: int = 2             # samples at a step commit before it may be decided
    max_step: int = 30            # at most this many at a step commit (then the closer end wins, flagged)
    max_end: int = 60             # at most this many at each end
    local_ends: bool = False      # (older records) judge every step against end runs taken beside it
    pairing: str = "auto"         # measure in pairs of runs taken one after the other and test their
                                  # ratios: "on", "off", or "auto" (when the ends' pairs show the machine's
                                  # level moving both runs of a pair: sequential.pairing_gain)
    confirm_max: int = 16         # pairs of (culprit, parent) after which an undecided confirmation gives up
    exact: str = "auto"           # "auto": an exact metric (Record.exact, or its ends' runs agree)
                                  # is bisected with one run per commit (exact.py); "off": never
    exact_threshold: float | None = None   # an exact metric's; None: as threshold when that was given,
                                           # else the exact rule's 0.1% (as compare's and check's)
    kind: bool = False            # label the culprit's timed change by counting it and its parent
                                  # (automate.change_kind): code path, timing only or not reproduced
    revert: bool = False          # revert the culprit on the bad end and measure it (automate.revert.revert_check)

    def __post_init__(self):
        if self.exact_threshold is None:
            self.threshold, self.exact_threshold = minimum_effects(self.threshold)
        elif self.threshold is None:
            self.threshold = minimum_effects(None)[0]



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
    job: AtomicJob                    # on disk its JSON form (AtomicJob.to_dict)
    metric: str
    tag: str
    direction: int = -1               # the metric's: -1 lower is better, 1 higher, 0 informational
    unit: str = ""                    # the metric's unit, as its catalog says
    exact: bool | None = None         # the metric is exact by construction (instruction counts, icount
                                      # instruction-time): exact.py; None only until __post_init__
    box: str | None = None
    build_timeout: float | None = None
    broker: str | None = None         # set: measure on lab box `box` through its queue
    source_url: str | None = None     # where that box fetches the commits (default: repo)
    kernel: dict | None = None        # a kernel tree: {"image": path in the build output, "vm": {...}}
    settings: dict = field(default_factory=dict)
    status: str = "running"           # running | done | refused | failed
    skips: dict[str, Skip] = field(default_factory=dict)     # sha -> why it was skipped
    steps: list[StepRecord] = field(default_factory=list)    # decisions, in order
    result: dict | None = None        # the result's JSON form (BisectionResult's fields), for a reader of the file
    created: str = ""
    path: str = ""

    def __post_init__(self) -> None:
        # A record read from disk (of this version or an older one) holds JSON forms.
        if isinstance(self.job, dict):
            self.job = AtomicJob.from_dict(self.job)
        if self.exact is None:
            # Not said (a record from before records said it, which marked icount in its unit):
            # what the store would say of the metric's samples, decoded once, here.
            self.exact = exact_as_stored(self.metric, self.unit)
        self.skips = {sha: _skip(value) for sha, value in self.skips.items()}
        self.steps = [_step(value) for value in self.steps]

    def save(self) -> None:
        target = Path(self.path)
        target.parent.mkdir(parents=True, exist_ok=True)
        data = {f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self)
                if f.name not in ("path", "job", "skips", "steps")}
        data["job"] = self.job.to_dict()
        data["skips"] = {sha: asdict(skip) for sha, skip in self.skips.items()}
        data["steps"] = [asdict(step) for step in self.steps]
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


def _old_skip_cause(why: str) -> SkipCause:
    """What failed at a commit skipped by a version that kept only the message (read once, on loading)."""
    first = why.splitlines()[0] if why else ""
    if first.startswith("--build"):
        return SkipCause.BUILD
    return SkipCause.BOOT if "did not boot" in first else SkipCause.RUN


def _skip(value: Skip | dict | str) -> Skip:
    """A skip of the record: {"why", "cause", "console"}, or (older records) the message alone."""
    if isinstance(value, Skip):
        return value
    if isinstance(value, str):
        return Skip(value, _old_skip_cause(value))
    why = str(value.get("why") or "")
    cause = value.get("cause")
    return Skip(why, SkipCause(cause) if cause else _old_skip_cause(why), str(value.get("console") or ""))


_STEP_FIELDS = {f.name for f in fields(StepRecord)}


def _step(value: StepRecord | dict) -> StepRecord:
    """A step of the record; an older record's step has fewer keys, and its skip no cause."""
    if isinstance(value, StepRecord):
        return value
    step = StepRecord(**{k: v for k, v in value.items() if k in _STEP_FIELDS})
    if step.cause is not None:
        step.cause = SkipCause(step.cause)
    elif step.verdict == "skip":
        step.cause = _old_skip_cause(step.why)
    return step


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

def command_job(words: list[str]) -> AtomicJob:
    """`-- COMMAND ...` as a cmd atomic job (run in the worktree of the commit measured).

    Not validated yet: bisect's start does that, once, after the repository checks."""
    return AtomicJob("cmd", {"argv": list(words)}, runs=1)


def file_job(path: str) -> AtomicJob:
    """The one atomic job of a job file, validated (by the expansion)."""
    from perflab import jobs

    atomic = jobs.load_atomic(path)
    if len(atomic) != 1:
        raise UsageProblem(f"--job {path} expands to {len(atomic)} atomic jobs; a bisection measures one "
                           f"(write one with `perflab jobs split {path} -o DIR`)")
    return atomic[0]


def check_metric(job: AtomicJob, metric: str) -> tuple[int, str]:
    """(direction, unit) of `metric` in the job's catalog; refused with the metrics it does produce.

    `job` is validated (perflab.jobs.resolve) when it was not yet."""
    from perflab import jobs

    job = jobs.resolve(job)
    # What watches the job adds its metrics to the family's (`measure: instructions|cache`: valgrind's).
    catalog = dict(job.family.metrics(job.parsed))
    for instrument in job.instruments:
        catalog.update(instrument.metrics())
    if metric not in catalog:
        raise UsageProblem(f"--metric {metric}: the {job.benchmark} job does not produce it; "
                           f"it produces: {', '.join(sorted(catalog))}")
    return catalog[metric].direction, catalog[metric].unit


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
- measures every commit through a Measurer (perflab.automate.measurer): here,
  the one runner (`runner.loop.run_jobs`, with `repo=` and `cwd=` the worktree,
  so each run is stored with its commit and the bisection's tag), and decides
  good or bad with the sequential test of `perflab.stats.sequential`, adding
  runs only while the verdict is unclear;
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
for a server store, `$XDG_STATE_HOME/perflab/bisect/`). The decisions are a
function of the samples: `--resume` replays the same algorithm, taking each
measurement it asks for from the stored runs of that commit first, and
measures only what is missing; it arrives where the interrupted run stopped
and goes on from there.

**Before a culprit is named** the samples are checked for noise that voids the
sequential test's error rate (two clusters, level shifts, drift, serial
correlation: perflab.stats.stationarity), said in the result, and the culprit is
confirmed against its parent in pairs whose order is random within each pair;
one that does not hold up is reported as "could not confirm". **An exact
metric** (perflab.stats.exact: instruction counts) takes one run per commit and
two at each end.

The package: record.py (settings, the record on disk, the job), trees.py (the
worktrees and the Measurer of a record), algorithm.py (the bisection),
exact.py (exact metrics), confirm.py (noise findings, the culprit's
confirmation), ambiguous.py (a culprit next to commits that could not be
tested: named, with those listed), session.py (start, resume, the checks
before a lab bisection, the ends' looks from the job's stored noise).
"""

from perflab.automate.bisect.algorithm import (
    Bisection,
    CommitFailed,
    EndsDoNotDiffer,
    Result,
)
from perflab.automate.bisect.record import (
    BisectError,
    Record,
    Settings,
    check_metric,
    command_job,
    file_job,
    find_record,
    record_dir,
)
from perflab.automate.bisect.session import check_lab, resume, start
from perflab.automate.bisect.trees import prune_stale
from perflab.core.bisection import StepRecord
from perflab.core.git import BuildFailed, GitError

__all__ = [
    "BisectError", "Bisection", "BuildFailed", "CommitFailed", "EndsDoNotDiffer", "GitError", "Record", "Result",
    "Settings", "StepRecord", "check_lab", "check_metric", "command_job", "file_job", "find_record",
    "prune_stale", "record_dir", "resume", "start",
]

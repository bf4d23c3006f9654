"""Series from the store: the points of one (box, benchmark, params, metric) in order.

A point is one run (its samples' mean), ordered by run start time; or, when
`repo` is given, one commit of the branch's first-parent history (the runs at
that commit pooled: a change of level cannot sit between two runs of one
commit), ordered as `git rev-list --first-parent` orders them; or one kernel
release, in version order (perflab.core.kernel_version), the runs of one kernel
pooled as those of one commit are. Without a repository a series of guest runs
(parameter `vm`) that measured more than one kernel release is ordered by kernel;
`order` names the order instead. Runs that have no place in that order (no commit, a dirty tree, a
commit not on the branch, no kernel release) are skipped and listed, never
silently dropped.

A series holds the runs of one variant line (analysis.variant.Variant.line): Debian's kernels of
one flavour and command line, one recipe apart from its commit, one target, file system and
compiler. Flavours, recipes, boot options and targets are separate series, never steps; in
kernel order, so are the runs of each commit (docs/views.md, "Variants").

The figure of a point of an exact series (instruction counts, icount
instruction-time) is its least disturbed sample, not the mean: the value most of
its samples share, else the smallest time or the largest rate (a timer tick adds
instructions to a sample, never takes them away).
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import gc
import math
import re
import subprocess
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from operator import itemgetter, ne
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from perflab.core.errors import PerflabError, UsageProblem
from perflab.core.kernel_version import order_key as kernel_order_key
from perflab.core.model import HIGHER_IS_BETTER, LOWER_IS_BETTER
from perflab.monitors import monitor_of
from perflab.analysis import variant
from perflab.analysis.selection import USABLE_STATUSES, group_params
from perflab.stats import changepoints, exact, exact_series
from perflab.stats.descriptive import HMEAN, MEAN, estimator, harmonic_mean
from perflab.stats.verdicts import CHANGE, IMPROVEMENT, REGRESSION  # noqa: F401 (re-exported)
from perflab.core.text import printable

if TYPE_CHECKING:   # annotations only: importing the Store loads SQLAlchemy (0.1-0.3 s)
    from perflab.store import Store

BY_COMMIT, BY_KERNEL, BY_TIME = "commit", "kernel", "time"
ORDERS = (BY_COMMIT, BY_KERNEL, BY_TIME)


@dataclass
class Point:
    run_ids: list[int]
    started: dt.datetime          # of its first run (UTC)
    commit: str | None
    samples: list[float] = field(default_factory=list)   # every sample of its runs, in run order
    run_means: list[float] = field(default_factory=list)  # each run's mean
    kernel: str | None = None     # the kernel release its (first) run measured
    tag: str | None = None        # its (first) run's tag
    # A recipe's point: the build its (first) run booted, "ref REF, build KEY" (variant.Kernel:
    # the commit the recipe's ref resolved to, else the ref; the `kernel_build` key), so that a
    # step along a recipe's series says which build it was, not only the tag.
    build: str | None = None
    figure: float | None = None   # an exact series' point: its least disturbed sample (exact_figure)
    # The metric kind's estimator (stats.descriptive.estimator), as `compare` and `show` take it:
    # a higher-is-better rate's point is the harmonic mean of its samples, not their mean.
    estimator: str = MEAN

    @property
    def value(self) -> float:
        """The point's level: an exact point's figure; a rate's harmonic mean of its samples; else
        its runs' means averaged (one run: its samples' mean)."""
        if self.figure is not None:
            return self.figure
        if self.estimator == HMEAN and self.samples and all(v > 0 for v in self.samples):
            return harmonic_mean(self.samples)
        return math.fsum(self.run_means) / len(self.run_means)


@dataclass
class Series:
    box: str
    benchmark: str
    params: str       # selection.group_params (a guest's boot options and build are its line's)
    metric: str
    unit: str
    direction: int
    points: list[Point] = field(default_factory=list)
    name: str = ""    # among the series shown (analysis.naming.name_series); "" until named
    exact: bool = False  # exact by construction (its samples': perflab.store.exactness)
    order: str = BY_TIME  # what orders its points: BY_COMMIT, BY_KERNEL or BY_TIME
    # The variant of its first run (analysis.variant): every point's runs share its line, the
    # variant without the history dimension (a flavour, a recipe, boot options, a target).
    variant: object = None

    @property
    def values(self) -> np.ndarray:
        return np.array([p.value for p in self.points], dtype=float)


@dataclass
class Commit:
    sha: str
    subject: str
    position: int     # in first-parent order, oldest 0


@dataclass
class History:
    series: list[Series]
    order: str                     # BY_COMMIT or BY_TIME; BY_KERNEL when every series is in kernel order
    repo: str | None = None
    branch: str | None = None
    commits: dict[str, Commit] = field(default_factory=dict)   # full sha -> commit, when ordered by commit
    skipped: list[tuple[int, str]] = field(default_factory=list)  # (run id, why)
    runs: int = 0                  # runs that became points


@dataclass
class SeriesResult:
    series: Series
    detection: changepoints.Detection
    kinds: list[str]               # per change point: regression | improvement | change


def first_parent(repo: str, branch: str | None) -> tuple[str, list[Commit]]:
    """(the branch's name as given or HEAD's, its first-parent commits oldest first)."""
    path = Path(repo)
    if not path.exists():
        raise UsageProblem(f"--repo {repo}: no such directory")
    if not path.is_dir():
        raise UsageProblem(f"--repo {repo}: not a directory")
    rev = branch or "HEAD"
    if rev.startswith("-"):
        raise UsageProblem(f"--branch {printable(rev, 60)}: not a branch name")
    try:
        top = subprocess.run(["git", "-C", str(path), "rev-parse", "--git-dir"], capture_output=True, text=True, timeout=30)
        if top.returncode != 0:
            raise UsageProblem(f"--repo {repo}: not a git repository")
        check = subprocess.run(["git", "-C", str(path), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                               capture_output=True, text=True, timeout=30)
        if check.returncode != 0:
            what = f"--branch {printable(rev, 60)}: no such branch or revision" if branch else "HEAD: no commits yet"
            raise UsageProblem(f"{what} in {repo}")
        log = subprocess.run(["git", "-C", str(path), "log", "--first-parent", "--reverse", "--format=%H%x00%s", rev, "--"],
                             capture_output=True, text=True, timeout=300)
    except FileNotFoundError:
        raise PerflabError("git is not installed; --repo needs it") from None
    if log.returncode != 0:
        raise PerflabError(f"--repo {repo}: git log failed: {log.stderr.strip().splitlines()[-1] if log.stderr.strip() else log.returncode}")
    commits = []
    for line in log.stdout.splitlines():
        sha, _, subject = line.partition("\0")
        commits.append(Commit(sha, subject, len(commits)))
    if branch is None:
        name = subprocess.run(["git", "-C", str(path), "symbolic-ref", "--short", "-q", "HEAD"],
                              capture_output=True, text=True, timeout=30).stdout.strip()
        rev = name or "HEAD"
    return rev, commits


def _wanted(metric: str, patterns: tuple[str, ...]) -> bool:
    """`--metric GLOB`: a glob matches the whole name; a plain name also the name after its
    family's prefix (`syscall.null` is `lmbench.syscall.null`, never `...null_io`)."""
    if patterns:
        return any(fnmatch.fnmatchcase(metric, p) or (not _GLOB_CHARS.intersection(p) and metric.endswith("." + p))
                   for p in patterns)
    return monitor_of(metric) is None   # monitors only when asked for by name


_GLOB_CHARS = frozenset("*?[")


@contextmanager
def _no_gc_pauses():
    """The cyclic garbage collector off while tens of thousands of rows and points are
    made (none of them in a cycle): its passes over them were a third of build's time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def build(store: Store, *, benchmark: str | None = None, metrics: tuple[str, ...] = (), box: str | None = None,
          tag: str | None = None, since: dt.datetime | None = None, repo: str | None = None,
          branch: str | None = None, order: str | None = None) -> History:
    """Every series the filters select, its points in order (`order`: one of ORDERS, or None
    for the default: commits with `repo`, else kernel releases where a series' runs measured
    several, else time)."""
    with _no_gc_pauses():
        return _build(store, benchmark=benchmark, metrics=metrics, box=box, tag=tag, since=since, repo=repo,
                      branch=branch, order=order)


def _check_order(order: str | None, repo: str | None, branch: str | None) -> None:
    if branch and not repo:
        raise UsageProblem("--branch needs --repo: the branch is read from that repository")
    if order is not None and order not in ORDERS:
        raise UsageProblem(f"--order {printable(str(order), 40)}: expected one of {', '.join(ORDERS)}")
    if order == BY_COMMIT and not repo:
        raise UsageProblem("--order commit needs --repo: the commit order is read from that repository")
    if repo and order not in (None, BY_COMMIT):
        raise UsageProblem(f"--order {order} and --repo: --repo orders by commit; drop one of them")


def _build(store: Store, *, benchmark, metrics, box, tag, since, repo, branch, order) -> History:
    _check_order(order, repo, branch)
    history = History([], BY_COMMIT if repo else BY_TIME, repo=repo)
    if repo:
        history.branch, commits = first_parent(repo, branch)
        history.commits = {c.sha: c for c in commits}
    runs = [r for r in store.find_runs(benchmark=benchmark, tag=tag, box=box, since=since) if r.status in USABLE_STATUSES]
    slot, full_sha = _slots(runs, history)
    run_of = {r.id: r for r in runs if r.id in slot}
    # History only along a history (docs/views.md, "Variants"): runs of different lines (a
    # flavour, a recipe, boot options, a target, a file system) are different series.
    variant_of = {rid: variant.of(r) for rid, r in run_of.items()}
    line_of: dict[tuple, str] = {}
    keys = {rid: (r.box, r.benchmark, group_params(r.params, r.benchmark, variant_of[rid].target.guest),
                  line_of.setdefault(variant_of[rid].line, f"{len(line_of):06d}"))
            for rid, r in run_of.items()}
    runs_of_series, meta = _run_means(store, run_of, keys, slot, metrics)
    placed = {rid: (r.started, full_sha.get(rid, r.commit)) for rid, r in run_of.items()}
    kernel_of = {rid: (r.environment or {}).get("kernel_release") or None for rid, r in run_of.items()}
    kernel_slot = _kernel_slots(run_of, kernel_of)
    skipped: dict[int, str] = {}
    for key in sorted(runs_of_series):
        unit, direction, assumed_exact = meta[key]
        box_, bench_, params_, _line, metric_ = key
        entries, series_order = runs_of_series[key], BY_COMMIT if repo else BY_TIME
        if not repo and (order == BY_KERNEL or (order is None and _measured_kernels(entries, kernel_of, variant_of))):
            series_order = BY_KERNEL
            for entry in entries:
                if kernel_slot.get(entry[1]) is None:
                    skipped[entry[1]] = "no kernel release recorded"
            entries = [(kernel_slot[e[1]], *e[1:]) for e in entries if kernel_slot.get(e[1]) is not None]
            if not entries:
                continue
        for part in _by_commit(entries, run_of) if series_order == BY_KERNEL else [entries]:
            points = _points(part, placed)
            for p in points:
                p.kernel = kernel_of.get(p.run_ids[0])
                p.tag = run_of[p.run_ids[0]].tag or None
                p.build = build_of(variant_of[p.run_ids[0]].kernel)
                if assumed_exact and exact.settled(p.samples, direction):
                    # Scattered samples have no exact figure: the estimator, as compare and show take it.
                    p.figure = exact.exact_figure(p.samples, direction)
                p.estimator = estimator(direction)
            history.series.append(Series(box_, bench_, params_, metric_, unit=unit, direction=direction,
                                         points=points, exact=assumed_exact, order=series_order,
                                         variant=variant_of[points[0].run_ids[0]] if points else None))
    history.skipped += sorted(skipped.items())
    if history.series and all(s.order == BY_KERNEL for s in history.series):
        history.order = BY_KERNEL
    history.runs = len({rid for s in history.series for p in s.points for rid in p.run_ids})
    return history


def build_of(kernel) -> str | None:
    """A recipe kernel's build in words: `ref 1a2b3c4d5e6f, build 0f1e2d3c4b5a` (the commit its
    ref resolved to, or the ref; the `kernel_build` key); None for a kernel not built by perflab."""
    if kernel.origin != variant.RECIPE or not (kernel.ref or kernel.build):
        return None
    ref = kernel.ref[:12] if re.fullmatch(r"[0-9a-f]{13,}", kernel.ref) else kernel.ref
    return ", ".join(part for part in (f"ref {ref}" if ref else "", f"build {kernel.build[:12]}" if kernel.build else "")
                     if part)


def _by_commit(entries: list[tuple], run_of: dict) -> list[list[tuple]]:
    """A series in kernel order, split by the commit its runs measured: along the kernels the
    commit is not history, and runs of other commits (a series', a bisection's on one kernel)
    pooled into a kernel's point would be a spike of it. In the order the commits first appear."""
    parts: dict[str, list[tuple]] = {}
    for e in entries:
        parts.setdefault(run_of[e[1]].commit or "", []).append(e)
    return list(parts.values())


def _kernel_slots(run_of: dict, kernel_of: dict[int, str | None]) -> dict[int, tuple | None]:
    """Each run's place in kernel-version order (None without a kernel release). A Debian ABI
    name is placed at its upstream version when any run of it recorded `kernel_version`."""
    version_of: dict[str, str] = {}
    for rid, r in run_of.items():
        version = (r.environment or {}).get("kernel_version")
        if kernel_of[rid] and isinstance(version, str):
            version_of.setdefault(kernel_of[rid], version)
    return {rid: (kernel_order_key(release, version_of.get(release)),) if release else None
            for rid, release in kernel_of.items()}


def _measured_kernels(entries: list[tuple], kernel_of: dict[int, str | None], variant_of: dict) -> bool:
    """Whether a series is of guest runs (parameter `vm`) that measured more than one kernel
    release, each run knowing its own: then the kernel under test is what changed along it.
    A series of one kernel keeps its history in time (pooled by kernel it would be one point);
    so does a host's series across kernel upgrades, whose runs may also differ in the code
    they ran (`--order kernel` orders it by kernel)."""
    if not all(variant_of[e[1]].target.guest for e in entries):
        return False
    releases = {kernel_of.get(e[1]) for e in entries}
    return None not in releases and len(releases) > 1


def _slots(runs, history: History) -> tuple[dict[int, tuple], dict[int, str]]:
    """Where each run goes: its point key (commit position, or the run itself), and the full
    sha of its commit; runs without a place in the commit order go to history.skipped."""
    slot: dict[int, tuple] = {}
    full_sha: dict[int, str] = {}
    position = history.commits
    for r in runs:
        if not history.repo:
            slot[r.id] = (r.started, r.id)
            continue
        if not r.commit:
            history.skipped.append((r.id, "no commit recorded"))
        elif r.dirty:
            history.skipped.append((r.id, f"commit {r.commit[:12]} with uncommitted changes"))
        else:
            commit = position.get(r.commit) or _by_prefix(position, r.commit)
            if commit is None:
                history.skipped.append((r.id, f"commit {r.commit[:12]} is not on the first-parent history of {history.branch}"))
            else:
                slot[r.id] = (commit.position,)
                full_sha[r.id] = commit.sha   # an abbreviated id (an import) made whole
    return slot, full_sha


def _run_means(store: Store, run_of: dict, keys: dict[int, tuple], slot: dict[int, tuple],
               metrics) -> tuple[dict[tuple, list[tuple]], dict[tuple, tuple[str, int, bool]]]:
    """Per series key, (slot, run id, values, mean) of each run, and the series' (unit, direction, exact).

    One pass over the rows, which come ordered by run and metric: each (run, metric)
    group is a slice of the columns, its mean an exact sum. dict(zip(pairs, range(n)))
    finds each group's last row in C, in the order of the groups. Per series, the runs
    are in run-id order (_points sorts them once).
    """
    rows = store.samples(sorted(run_of))
    runs_of_series: dict[tuple, list[tuple]] = defaultdict(list)
    meta: dict[tuple, tuple[str, int, bool]] = {}
    wanted: dict[str, bool] = {}
    if not rows:
        return runs_of_series, meta
    rid_col, metric_col, value_col, unit_col, direction_col = list(zip(*rows))[:5]
    pairs = list(zip(rid_col, metric_col))
    last_row = dict(zip(pairs, range(len(pairs))))
    if sum(map(ne, pairs, pairs[1:])) + 1 != len(last_row):
        # a (run, metric) in two places: the store's order is not the one relied on
        rows = sorted(rows, key=itemgetter(0, 1))
        rid_col, metric_col, value_col, unit_col, direction_col = list(zip(*rows))[:5]
        last_row = dict(zip(zip(rid_col, metric_col), range(len(rows))))
    start = 0
    for (rid, metric), last in last_row.items():
        first, start = start, last + 1
        ok = wanted.get(metric)
        if ok is None:
            ok = wanted[metric] = _wanted(metric, metrics)
        if not ok:
            continue
        key = (*keys[rid], metric)
        if key not in meta:
            meta[key] = (unit_col[first], direction_col[first], rows[first].exact)
        found = _finite_mean(value_col[first:start])
        if found is not None:
            runs_of_series[key].append((slot[rid], rid, *found))
    return runs_of_series, meta


def _points(run_means: list[tuple], placed: dict[int, tuple]) -> list[Point]:
    """A series' points in order: the runs of one slot (one commit) pooled into one point."""
    ordered: list[Point] = []
    last_slot = point = None
    for where, rid, values, mean in sorted(run_means, key=itemgetter(0, 1)):
        if where == last_slot:   # another run of the same commit: one point
            point.run_ids.append(rid)
            point.samples.extend(values)
            point.run_means.append(mean)
        else:
            point = Point([rid], *placed[rid], list(values), [mean])
            ordered.append(point)
            last_slot = where
    return ordered


def _finite_mean(values: tuple[float, ...]) -> tuple[tuple[float, ...], float] | None:
    """(the finite samples, their mean from an exact sum); None when none is finite."""
    try:
        total = math.fsum(values)
        if math.isfinite(total):
            return values, total / len(values)
    except (OverflowError, ValueError):   # a sum past the largest double; inf + -inf
        pass
    finite = tuple(v for v in values if math.isfinite(v))
    if not finite:
        return None
    try:
        return finite, math.fsum(finite) / len(finite)
    except OverflowError:
        return finite, math.fsum(v / len(finite) for v in finite)


def _by_prefix(position: dict[str, Commit], commit: str) -> Commit | None:
    """A run recorded with an abbreviated commit id (an import): its unique match."""
    if len(commit) >= 40 or len(commit) < 4:
        return None
    found = [c for sha, c in position.items() if sha.startswith(commit.lower())]
    return found[0] if len(found) == 1 else None


def kind(change: float, direction: int) -> str:
    """A level change named by the metric's direction."""
    if direction == LOWER_IS_BETTER:
        return REGRESSION if change > 0 else IMPROVEMENT
    if direction == HIGHER_IS_BETTER:
        return REGRESSION if change < 0 else IMPROVEMENT
    return CHANGE


def analyse(history: History, exact_min_effect: float | None = None, **options) -> list[SeriesResult]:
    """Change points of every series (options: those of changepoints.detect).

    An exact series (perflab.stats.exact_series: instruction counts, icount
    instruction-time, or levels that agree to exact.EXACT_LIMIT) is split against its
    resolution instead, with `exact_min_effect` (default: the options' min_effect)."""
    found = [_exact(s, exact_min_effect, options) or changepoints.detect(s.values, **options) for s in history.series]
    # The change points' p-values controlled across series (Benjamini-Hochberg over every
    # candidate of every series): a series holding one above the cutoff is tested again at it.
    cutoff = changepoints.across_series(found, options.get("alpha", changepoints.ALPHA))
    for i, d in enumerate(found):
        if not d.exact and any(c.p_value > cutoff for c in d.change_points):
            found[i] = changepoints.detect(history.series[i].values, **{**options, "alpha": cutoff})
    return [SeriesResult(s, d, [kind(c.change, s.direction) for c in d.change_points])
            for s, d in zip(history.series, found)]


def _resolution(points: list[Point]) -> float | None:
    """exact.resolution of the points' samples, in one array operation when every point has
    the same number (>= 2) of finite positive samples: the per-point loop cost `perflab
    detect` ~20 ms per series of 500 points."""
    sizes = {len(p.samples) for p in points}
    if len(sizes) == 1 and (k := sizes.pop()) >= 2:
        a = np.array([p.samples for p in points], dtype=float)
        if np.isfinite(a).all() and (a > 0).all():
            a.sort(axis=1)
            median = (a[:, (k - 1) // 2] + a[:, k // 2]) / 2
            return float(((a[:, -1] - a[:, 0]) / median).max())
    return exact.resolution(*(p.samples for p in points))


def _exact_resolution(points: list[Point]) -> float | None:
    """The resolution of the points of a series exact by construction: per point, the spread of
    the samples that agree with its figure (within exact.EXACT_LIMIT) when they are more than
    half of them - a timer tick now and then disturbs one sample, and the rest are the exact
    figure - else of all its samples (two samples 13% apart, a guest still busy after boot:
    not exact, and said so)."""
    groups = []
    for p in points:
        figure = p.value
        agree = [v for v in p.samples if figure > 0 and abs(v / figure - 1) <= exact.EXACT_LIMIT]
        groups.append(agree if 2 * len(agree) > len(p.samples) else p.samples)
    return exact.resolution(*groups)


def _exact(s: Series, exact_min_effect: float | None, options: dict) -> changepoints.Detection | None:
    """The series' exact detection, or None when it is not exact."""
    least = options.get("min_effect", changepoints.MIN_EFFECT) if exact_min_effect is None else exact_min_effect
    found = exact_series.detect(s.values, point_resolution=_exact_resolution(s.points) if s.exact else
                               _resolution(s.points),
                               assume_exact=s.exact,
                               min_size=options.get("min_size", changepoints.MIN_SIZE), min_effect=least,
                               alpha=options.get("alpha", changepoints.ALPHA))
    # Exact only by measurement and no step: the statistical report says the same ("constant").
    if found is not None and not s.exact and not found.change_points:
        return None
    return found

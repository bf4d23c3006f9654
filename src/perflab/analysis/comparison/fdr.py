"""FDR groups: which metrics of a comparison have their false-discovery rate controlled together.

Per head against the base, the primary metrics form one FDR group, the secondary
ones another and the monitors' counters a third, so that neither secondary
figures nor hundreds of counters dilute the power of the primary ones
(docs/statistics.md explains the choice). Each group is one call of
perflab.stats.compare.compare_many.
"""

from __future__ import annotations

import fnmatch

from perflab.core.model import EXIT, MAXRSS, SYS, USER
from perflab.core.errors import PerflabError, UsageProblem
from perflab.core.model import INFORMATIONAL
from perflab.monitors import monitor_of
from perflab.analysis.comparison.result import MONITOR_MIN_EFFECT, FdrGroup
from perflab.analysis.selection import Group
from perflab.stats.compare import MONITOR, PRIMARY, SECONDARY, Comparison, compare_many

# What /usr/bin/time reports about a command beside its elapsed time: figures
# of the process's resources, not of the work the benchmark measures. By
# default they are secondary metrics (their own FDR group), so that they do
# not dilute the power of the benchmark's own metrics. Every other metric of
# every family (cmd's time.elapsed_time and --metric figures, each LMbench
# figure) is primary. docs/statistics.md explains the choice.
RESOURCE_FIGURES = frozenset({USER, SYS, MAXRSS, EXIT})


def is_primary(metric: str, primary: list[str] | None = None, benchmark: str = "") -> bool:
    """Whether a metric belongs to the primary FDR group (`--primary GLOB` or the default).

    By default a family's `secondary_metrics` (its harness-side figures) are secondary;
    for benchmarks that are not perflab families (imports), the /usr/bin/time resource figures.
    """
    if primary:
        return any(fnmatch.fnmatchcase(metric, glob) for glob in primary)
    from perflab import benchmarks

    if benchmark in benchmarks.FAMILIES:
        return metric not in (benchmarks.family(benchmark).secondary_metrics | RESOURCE_FIGURES)
    return metric not in RESOURCE_FIGURES


def fdr_group_of(g: Group, primary: list[str] | None) -> str:
    """The FDR group a matched group's metric is tested in: MONITOR, PRIMARY or SECONDARY."""
    if monitor_of(g.metric):
        return MONITOR
    return PRIMARY if is_primary(g.metric, primary, g.benchmark) else SECONDARY


def check_globs(names: list[str], primary: list[str] | None, fail_on: list[str] | None, monitors_dropped: int) -> None:
    """Refuse a --primary or --fail-on glob that matches no metric of the comparison (`names`, sorted)."""
    if primary:
        own = [n for n in names if not monitor_of(n)]
        for glob in primary:
            if not any(fnmatch.fnmatchcase(n, glob) for n in own):
                shown = ", ".join(own[:8]) + (f", ... ({len(own)} in all)" if len(own) > 8 else "")
                # The printed word "family" here is the FDR group; the message is kept as it was.
                raise PerflabError(f"--primary {glob!r} matches no metric of this comparison (monitor metrics are "
                                   f"their own family; metrics: {shown or 'none'})")
    for glob in fail_on or ():
        if not any(fnmatch.fnmatchcase(n, glob) for n in names):
            shown = ", ".join(names[:8]) + (f", ... ({len(names)} in all)" if len(names) > 8 else "")
            hint = " (monitor metrics were dropped: --monitors none)" if monitors_dropped else ""
            raise UsageProblem(f"--fail-on {glob!r} matches no metric of this comparison{hint} (metrics: {shown or 'none'})")


def compare_head(base: dict[tuple, Group], head: dict[tuple, Group], keys: list[tuple], group_of: dict[tuple, str],
              alpha: float, threshold: float,
              exact_threshold: float | None = None) -> tuple[dict[tuple, Comparison], list[FdrGroup]]:
    """One head against the base, each FDR group adjusted on its own: the comparison of
    every key the head shares with the base, and the groups (primary first) with their sizes.

    Exact metrics (perflab.stats.exact) are called against `exact_threshold` (default
    `threshold`) and are outside their group's adjustment: FdrGroup.exact counts them."""
    exact_threshold = threshold if exact_threshold is None else exact_threshold
    results: dict[tuple, Comparison] = {}
    groups = []
    for name in (PRIMARY, SECONDARY, MONITOR):
        shared = [k for k in keys if k in head and group_of[k] == name]
        if not shared:
            continue
        floor = MONITOR_MIN_EFFECT if name == MONITOR else 0.0
        compared = compare_many(
            [(base[k].values, head[k].values, base[k].direction) for k in shared],
            alpha=alpha, threshold=max(threshold, floor), fdr_group=name,
            assume_exact=[base[k].exact for k in shared], exact_threshold=max(exact_threshold, floor),
        )
        results.update(zip(shared, compared))
        exact = sum(c.exact for c in compared)
        tested = [c for c in compared if c.test != "none" and not c.exact]
        informational = sum(base[k].direction == INFORMATIONAL for k, c in zip(shared, compared)
                            if c.test != "none" and not c.exact)
        groups.append(FdrGroup(name, len(tested) - informational, informational,
                               len(shared) - len(tested) - exact, exact))
    return results, groups

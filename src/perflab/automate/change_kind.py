"""Labelling a timed change between two commits: measured again in the counting mode that fits.

- A job on the host is run again under valgrind (`measure: instructions`): its
  `valgrind.instructions`.
- A kernel booted in a guest (tcg, kvm) is booted again under QEMU icount, the same
  builds: the same metric, now instruction-time.

Both sides are counted twice (the count's resolution is measured, not assumed). When
the count does not explain the change, the two sides are timed again in RETIME_PAIRS
pairs, the order random within each pair, to tell *timing only* from *not reproduced*
(perflab.stats.change_kind has the rule). Every run goes through the Measurer, stored
with its commit under the caller's tag, so `perflab compare` finds the counted runs
beside the timed ones.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from perflab.automate.measurer import Measurer, measure_rounds
from perflab.core.errors import PerflabError
from perflab.core.git import BuildFailed
from perflab.core.model import LOWER_IS_BETTER
from perflab.core.steps import step
from perflab.jobs.job import AtomicJob
from perflab.stats.change_kind import ChangeKind, classify, counted_verdict, explains

COUNTED_RUNS = 2
RETIME_PAIRS = 6


@dataclass(frozen=True)
class Counting:
    """How a job's commits are counted: the Measurer and job to count with, the metric it gives."""

    measurer: Measurer
    job: AtomicJob
    metric: str
    how: str


def counting(measurer: Measurer, job: AtomicJob, metric: str) -> Counting | str:
    """The counting mode of a timed job, or why there is none (one line: the metric counts already)."""
    # A guest: the Measurer's kernel (a kernel tree's commits), else the job's own.
    kernel = getattr(measurer, "kernel", None)
    if kernel is not None and kernel.on:
        return f"the kernels ran on {kernel.on}: counting them (QEMU icount) needs a guest, not done"
    vm = kernel.vm if kernel is not None else job.vm if job.in_guest else None
    if vm is not None:
        if vm.get("mode") == "icount":
            return f"{metric} is instruction-time under icount already: a change of it is in the code path"
        if kernel is not None:
            return Counting(measurer.in_mode("icount"), _profiled(job, vm), metric, "QEMU icount")
        return Counting(measurer, _profiled(job, vm).with_(vm={**vm, "mode": "icount"}), metric, "QEMU icount")
    if job.measure or metric.startswith("valgrind."):
        return f"{metric} is counted by valgrind already: a change of it is in the code path"
    return Counting(measurer, job.with_(measure="instructions"), "valgrind.instructions", "valgrind")


def _profiled(job: AtomicJob, vm: dict) -> AtomicJob:
    """The job counted under icount with insn-profile too (it adds no guest instruction), so the
    report can say where the instructions moved; one vCPU only, as insn-profile needs."""
    from perflab import monitors

    if int(vm.get("cpus") or 1) != 1 or "insn-profile" in (job.monitors or {}):
        return job
    return job.with_(monitors={**(job.monitors or {}), **monitors.validate({"insn-profile": {}})})


def label(measurer: Measurer, job: AtomicJob, metric: str, direction: int, base: str, head: str,
          time_change: float, *, tag: str, seed: str, say: Callable[[str], None] = lambda _m: None,
          slots: tuple[str, str] = ("good", "bad")) -> ChangeKind | str:
    """The kind of the change `time_change` of `metric` from `base` to `head`; a str when the
    metric counts already (nothing to label). BuildFailed and PerflabError as the Measurer's."""
    mode = counting(measurer, job, metric)
    if isinstance(mode, str):
        return mode
    ends = {slots[0]: base, slots[1]: head}
    say(f"the kind of the change: counting {base[:12]} and {head[:12]} ({mode.how}"
        f"{' with insn-profile' if 'insn-profile' in (mode.job.monitors or {}) else ''}, {COUNTED_RUNS} runs each)")
    with step(f"kind of the change: counting base and head ({mode.how}, {COUNTED_RUNS} runs each)"):
        counts = measure_rounds(mode.measurer, mode.job.with_(tag=tag, comment=f"perflab: counting {metric}'s change"),
                                ends, COUNTED_RUNS, mode.metric, seed=seed + "-count", say=say)
    # A count of instructions is a cost; the metric itself under icount keeps its direction.
    counted_direction = direction if mode.metric == metric else LOWER_IS_BETTER
    counted = counted_verdict(counts[base], counts[head])
    retimed = None
    if not explains(time_change, direction, counted, counted_direction)[0]:
        from perflab.stats.compare import compare_many

        say(f"the count moved {counted.pct_change * 100:+.3f}% against {time_change * 100:+.1f}%: timing both "
            f"again in {RETIME_PAIRS} pairs")
        with step(f"kind of the change: timing base and head again ({RETIME_PAIRS} pairs)"):
            timed = measure_rounds(measurer, job.with_(tag=tag, comment=f"perflab: timing {metric}'s change again"),
                                   ends, RETIME_PAIRS, metric, seed=seed + "-time", say=say)
        retimed = compare_many([(timed[base], timed[head], direction)], threshold=0.0)[0]
    return classify(metric=metric, direction=direction, time_change=time_change, counted_metric=mode.metric,
                    base_counts=counts[base], head_counts=counts[head], retimed=retimed, how=mode.how,
                    counted_direction=counted_direction)


def label_or_why(measurer: Measurer, job: AtomicJob, metric: str, direction: int, base: str, head: str,
                 time_change: float, *, exact: bool, tag: str, seed: str, say: Callable[[str], None] = lambda _m: None,
                 slots: tuple[str, str] = ("good", "bad")) -> ChangeKind | str:
    """label(), or in one line why there is no label: the metric was exact in the bisection (it
    counted already), or the counting could not be built or run. The series' ends and a
    bisection's culprit (`bisect --kind`) are labelled here."""
    if exact:
        return f"{metric} is exact here (counted): a change of it is in the code path"
    try:
        return label(measurer, job, metric, direction, base, head, time_change, tag=tag, seed=seed, say=say,
                     slots=slots)
    except (BuildFailed, PerflabError) as e:
        return f"not labelled: {e}"


def sentence_of(kind: ChangeKind | str | None) -> str:
    """The one line a report prints: the label's sentence, or why there is none."""
    return "" if kind is None else kind if isinstance(kind, str) else kind.sentence


def stored(kind: ChangeKind | str) -> dict | str:
    """The form kept in a bisection's record (`result.kind`): the label's fields, or why there is none."""
    return kind if isinstance(kind, str) else kind.to_dict()

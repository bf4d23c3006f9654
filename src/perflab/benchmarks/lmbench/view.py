"""LMbench's view hook: the rows of the LMbench 2.0 summary (`perflab report lmbench`, and
the LMbench section of `report html`), each row's figure the median of the samples of its runs.

The median, as LMbench reports the median of its tries (and benchstat of its runs), not the
mean: on a shared or virtual machine whole processes run at a second, slower speed for
seconds at a time (a busy sibling hyperthread: `syscall.null` 0.165 or 0.222 µs by process),
and the mean of a run follows how many of its processes drew it (docs/lmbench.md, "Which
figure the summary prints").

Part of the read side (perflab.analysis.views finds it by the family's name); report.lmbench
formats it.
"""

from __future__ import annotations

from dataclasses import dataclass

from perflab.core.errors import PerflabError

PAGE_ORDER = 1           # report html: after the scaling curves, before kernbench
PAGE_SECTION = "lmbench"
MAX_PAGE_ROWS = 40       # report html without operands: the most recent runs


@dataclass
class LmbenchSummary:
    """rows: (label, {metric: median of every sample of the row's runs}), in display order."""

    rows: list[tuple[str, dict[str, float]]]
    # Every row's runs ran in a guest under QEMU icount: the figures are instruction-time.
    icount: bool = False


def run_label(run) -> str:
    """A run's row label: its kernel release, with its tag."""
    release = (run.environment or {}).get("kernel_release") or "?"
    return f"{release}-{run.tag}" if run.tag else release


def compiler_of(run) -> str:
    """The compiler a run's programs were built with, as the 2003 summaries name kernels
    (`gcc-O1`, `clang-O2-g`): the `cc` fact and the job's `cflags`, dashes joining the words."""
    env = run.environment or {}
    words = [str(env.get("cc") or ""), *str(env.get("cflags") or "").split()]
    return "-".join(w.lstrip("-") if i else w for i, w in enumerate(words) if w.strip("-"))


def by_compiler(groups: list[tuple[str, list]]) -> list[tuple[str, list]]:
    """Rows split by compiler when the runs shown were built by more than one: a compiler is a
    variant (`cc: [gcc, clang]` in one job file), never pooled; each label then names its compiler."""
    if len({compiler_of(r) for _, rs in groups for r in rs}) < 2:
        return groups
    out = []
    for label, rs in groups:
        split: dict[str, list] = {}
        for r in rs:
            split.setdefault(compiler_of(r), []).append(r)
        out += [(f"{label}-{cc}" if cc else label, part) for cc, part in split.items()]
    return out


def pooled(store, groups: list[tuple[str, list]]) -> LmbenchSummary:
    """One row per (label, runs): the median of all the samples of its runs, per figure."""
    from perflab.benchmarks.lmbench.catalog import FIGURES
    from perflab.stats.median import pooled_medians

    # One query for every run's summary samples (not the memory curve's points).
    values = store.metric_values([r.id for _, rs in groups for r in rs], FIGURES)
    rows_of: dict[int, list[int]] = {}  # one run may stand in several rows (e.g. its id and its tag)
    for i, (_, rs) in enumerate(groups):
        for r in rs:
            rows_of.setdefault(r.id, []).append(i)
    medians = pooled_medians(values, rows_of, len(groups))
    runs = [r for _, rs in groups for r in rs]
    icount = bool(runs) and all((r.params or {}).get("vm") == "icount" for r in runs)
    return LmbenchSummary([(label, row) for (label, _), row in zip(groups, medians)], icount)


def summary(store, operands: tuple[str, ...], box: str, all_boxes: bool) -> LmbenchSummary:
    """`perflab report lmbench`: a row per operand (per box of its runs), or per run of `box`
    (of every box with all_boxes)."""
    from perflab.analysis.selection import USABLE_STATUSES, select

    runs = store.find_runs(benchmark="lmbench")
    groups: list[tuple[str, list]] = []
    if operands:
        for operand in operands:
            sel = select(store, operand, runs)
            label = run_label(sel.runs[-1])
            if operand.lstrip("#").isdigit():
                label = f"{label} #{sel.runs[0].id}"
            elif sel.runs[-1].tag != operand:
                label = f"{label} ({operand})"
            by_box: dict[str, list] = {}
            for r in sel.runs:
                by_box.setdefault(r.box, []).append(r)
            if len(by_box) == 1:
                groups.append((label, sel.runs))
            else:
                # Boxes are never pooled: one row per box, as the LMbench summaries of a lab show them.
                groups += [(f"{b}: {label}", rs) for b, rs in by_box.items()]
    elif all_boxes:
        usable = [r for r in runs if r.status in USABLE_STATUSES]
        if not usable:
            raise PerflabError("no LMbench runs in the store; run `perflab run lmbench --quick` first")
        groups = [(f"{r.box}: {run_label(r)}", [r]) for r in sorted(usable, key=lambda r: (r.box, r.started, r.id))]
    else:
        mine = [r for r in runs if r.box == box and r.status in USABLE_STATUSES]
        if not mine:
            others = sorted({r.box for r in runs})
            hint = f"; boxes with LMbench runs: {', '.join(others)} (use --box)" if others else \
                "; run `perflab run lmbench --quick` first"
            raise PerflabError(f"no LMbench runs of testbox {box!r}{hint}")
        groups = [(run_label(r), [r]) for r in mine]
    return pooled(store, by_compiler(groups))


def page_section(store, chosen, runs, notes: list[str]) -> LmbenchSummary | None:
    """report html's LMbench summary: a row per operand (chosen: (label, runs)), or per run."""
    if chosen is not None:
        groups = [(label, [r for r in rs if r.benchmark == "lmbench"]) for label, rs in chosen]
        groups = [(label, rs) for label, rs in groups if rs]
    else:
        mine = [r for r in runs if r.benchmark == "lmbench"]
        if len(mine) > MAX_PAGE_ROWS:
            notes.append(f"LMbench summary: the last {MAX_PAGE_ROWS} of {len(mine)} runs")
            mine = mine[-MAX_PAGE_ROWS:]
        groups = [(f"{(r.environment or {}).get('kernel_release', '?')}{'-' + r.tag if r.tag else ''} #{r.id}", [r])
                  for r in mine]
    return pooled(store, by_compiler(groups)) if groups else None

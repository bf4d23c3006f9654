"""LMbench's view hook: the rows of the LMbench 2.0 summary (`perflab report lmbench`, and
the LMbench section of `report html`), each row's figure the median of the samples of its runs.

The median, as LMbench reports the median of its tries (and benchstat of its runs), not the
mean: on a shared or virtual machine whole processes run at a second, slower speed for
seconds at a time (a busy sibling hyperthread: `syscall.null` 0.165 or 0.222 µs by process),
and the mean of a run follows how many of its processes drew it (docs/lmbench.md, "Which
figure the summary prints").

An operand's runs of several variants (flavours, boot options, builds: analysis.variant) are
a row each, labelled by what tells them apart (`6.1.0-56 rt (e1)`), never one pooled row.

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


def variant_rows(runs) -> list[tuple[str | None, list]]:
    """The runs split by variant (analysis.variant: kernel, flavour, build, boot options, target,
    compiler), in the order first seen, each with its label among them (None when the runs are
    of one variant: the caller's label stands). Variants are never pooled into one row."""
    from perflab.analysis import naming, variant

    by_identity: dict[tuple, list] = {}
    first: dict[tuple, object] = {}
    for r in runs:
        v = variant.of(r)
        key = (v.target, v.kernel, v.workdir_fs)   # the box is split by the callers; the compiler by by_compiler
        by_identity.setdefault(key, []).append(r)
        first.setdefault(key, v)
    if len(by_identity) < 2:
        return [(None, list(runs))]
    labels = naming.variant_labels(list(first.values()), without=("cc",))
    return [(label, rs) for label, rs in zip(labels, by_identity.values())]


def _run_labels(runs) -> dict[int, str]:
    """Each run's label when every run is a row: its release and tag, or, where runs of one release
    differ in variant (a flavour, a boot option, a build), the variant's label and its tag."""
    from perflab.analysis import naming, variant

    variants = [variant.of(r) for r in runs]
    kinds = {(v.target, v.kernel, v.workdir_fs): v for v in variants}
    labels = dict(zip(kinds, naming.variant_labels(list(kinds.values()), without=("cc",))))
    out = {}
    for r, v in zip(runs, variants):
        label = labels[(v.target, v.kernel, v.workdir_fs)]
        plain = len(kinds) < 2 or label == (r.environment or {}).get("kernel_release")
        out[r.id] = run_label(r) if plain else (f"{label} ({r.tag})" if r.tag else label)
    return out


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
    from perflab.analysis import variant

    icount = bool(runs) and all(variant.of(r).target.icount for r in runs)
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
            for b, box_runs in by_box.items():
                # Boxes are never pooled: one row per box, as the LMbench summaries of a lab show them;
                # nor variants of one box (an operand's flavours, boot options, builds): a row each.
                for vlabel, rs in variant_rows(box_runs):
                    row = label if vlabel is None else f"{vlabel} ({operand})"
                    groups.append((row if len(by_box) == 1 else f"{b}: {row}", rs))
    elif all_boxes:
        usable = [r for r in runs if r.status in USABLE_STATUSES]
        if not usable:
            raise PerflabError("no LMbench runs in the store; run `perflab run lmbench --quick` first")
        usable = sorted(usable, key=lambda r: (r.box, r.started, r.id))
        labels = _run_labels(usable)
        groups = [(f"{r.box}: {labels[r.id]}", [r]) for r in usable]
    else:
        mine = [r for r in runs if r.box == box and r.status in USABLE_STATUSES]
        if not mine:
            others = sorted({r.box for r in runs})
            hint = f"; boxes with LMbench runs: {', '.join(others)} (use --box)" if others else \
                "; run `perflab run lmbench --quick` first"
            raise PerflabError(f"no LMbench runs of testbox {box!r}{hint}")
        labels = _run_labels(mine)
        groups = [(labels[r.id], [r]) for r in mine]
    return pooled(store, by_compiler(groups))


def page_section(store, chosen, runs, notes: list[str]) -> LmbenchSummary | None:
    """report html's LMbench summary: a row per operand (chosen: (label, runs)), or per run."""
    if chosen is not None:
        groups = []
        for label, rs in chosen:
            for vlabel, part in variant_rows([r for r in rs if r.benchmark == "lmbench"]):
                if part:
                    groups.append((label if vlabel is None else f"{vlabel} ({label})", part))
    else:
        mine = [r for r in runs if r.benchmark == "lmbench"]
        if len(mine) > MAX_PAGE_ROWS:
            notes.append(f"LMbench summary: the last {MAX_PAGE_ROWS} of {len(mine)} runs")
            mine = mine[-MAX_PAGE_ROWS:]
        labels = _run_labels(mine)
        groups = [(f"{labels[r.id]} #{r.id}", [r]) for r in mine]
    return pooled(store, by_compiler(groups)) if groups else None

"""The first steps of a comparison: the runs of each operand, and their groups matched to the base's.

A group is one (box, benchmark, params, metric) of one operand (perflab.analysis.selection).
A head's group is compared with the base's group of the same key; groups on one side only
are listed, never dropped.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from perflab.core import environment
from perflab.core.errors import PerflabError
from perflab.monitors import monitor_of
from perflab.analysis.selection import Group, Selection, groups_of, metric_wanted, select

if TYPE_CHECKING:
    from perflab.store import Store   # SQLAlchemy: not for reading a store (perflab.store.reader)


def select_operands(store: Store, operands: list[str], benchmark: str | None,
                    cross_box: bool) -> tuple[list[Selection], list[tuple[str, object, object]] | None]:
    """Each operand's runs, and the environment differences when they come from several boxes.

    Operands from different boxes are refused unless `cross_box` says so.
    """
    all_runs = store.find_runs(benchmark=benchmark)
    selections = [select(store, op, all_runs) for op in operands]
    boxes = [sel.boxes for sel in selections]
    every_box = set().union(*boxes)
    env_diff = None
    if len(every_box) > 1:
        if not cross_box:
            detail = "; ".join(f"{sel.operand}: {', '.join(sorted(b))}" for sel, b in zip(selections, boxes))
            raise PerflabError(f"operands come from different testboxes ({detail}); add --cross-box to compare them anyway")
        env_diff = environment.diff(selections[0].runs[-1].environment, selections[1].runs[-1].environment)
    return selections, env_diff


@dataclass
class Matched:
    """The groups of every operand, each head's keyed as the base's it is compared with."""

    side_groups: list[dict[tuple, Group]]   # per operand, base first
    monitors_dropped: int = 0               # monitor groups left out (--monitors none)
    notes: list[str] = field(default_factory=list)   # how heads' parameters were paired with the base's
    # Groups present on one side only (ComparisonResult.one_sided and one_sided_monitors).
    one_sided: list[tuple[str, str]] = field(default_factory=list)
    one_sided_monitors: list[tuple[str, str, str, str | None]] = field(default_factory=list)

    @property
    def base(self) -> dict[tuple, Group]:
        return self.side_groups[0]

    @property
    def heads(self) -> list[dict[tuple, Group]]:
        return self.side_groups[1:]


def match_groups(store: Store, selections: list[Selection], *, cross_box: bool, metrics: list[str] | None,
                 drop_monitors: bool) -> Matched:
    """The groups of each selection, narrowed to `metrics`, heads paired with the base, one-sided ones listed."""
    # The variants are labelled across every operand: one kernel against a tag of several says which it is.
    side_groups = [groups_of(store, sel, cross_box=cross_box, among=selections) for sel in selections]
    notes = [_variants_note(sel, groups) for sel, groups in zip(selections, side_groups)]
    if metrics:
        # --metric NAME: that metric alone when it exists (syscall.null is not syscall.null_io), else a substring.
        wanted = metric_wanted({g.metric for groups in side_groups for g in groups.values()}, metrics)
        side_groups = [{k: g for k, g in groups.items() if g.metric in wanted} for groups in side_groups]
    matched = Matched(side_groups, notes=[n for n in notes if n])
    if drop_monitors:
        # Before any statistics: dropped monitor metrics do not even count in an FDR group.
        dropped = {k for groups in side_groups for k, g in groups.items() if monitor_of(g.metric)}
        matched.monitors_dropped = len(dropped)
        matched.side_groups = [{k: g for k, g in groups.items() if k not in dropped} for groups in side_groups]
    for i in range(1, len(matched.side_groups)):
        matched.side_groups[i] = pair_single_variants(matched.base, matched.side_groups[i], selections[i].label,
                                                      matched.notes)
    _list_one_sided(matched, selections)
    return matched


def _variants_note(sel: Selection, groups: dict[tuple, Group]) -> str:
    """What the comparison chose for an operand whose runs are of several variants (analysis.variant:
    flavours, boot options, builds, targets): a group per variant, never pooled; said once, with
    how to select one."""
    from perflab.analysis import naming

    kinds: dict[tuple, object] = {}
    for v in sel.variants.values():
        kinds.setdefault(v.side_key, v)
    if len(kinds) < 2:
        return ""
    labels = naming.variant_labels(list(kinds.values()))
    return (f"{sel.label}: its runs are of {len(kinds)} variants ({', '.join(labels)}), compared variant by "
            f"variant, never pooled; select one with key=value (kernel=RELEASE, cmdline=OPTIONS, cmdline= for none)")


def _list_one_sided(matched: Matched, selections: list[Selection]) -> None:
    """Fill matched.one_sided(_monitors): head groups the base lacks, then base groups a head lacks."""
    def absent(label: str, g: Group, what: str, absent_from: str | None = None) -> None:
        monitor = monitor_of(g.metric)
        if monitor:
            matched.one_sided_monitors.append((label, monitor, what, absent_from))
        else:
            matched.one_sided.append((label, what))

    base = matched.base
    for sel, groups in zip(selections[1:], matched.heads):
        for key, g in groups.items():
            if key not in base:
                absent(sel.label, g, describe(g))
    for key in sorted(base):
        missing = [sel.label for sel, groups in zip(selections[1:], matched.heads) if key not in groups]
        for label in missing:
            absent(selections[0].label, base[key], describe(base[key]) + f" (absent from {label})", label)


def describe(g: Group) -> str:
    """A group as the one-sided lists name it: "benchmark(params) metric on box"."""
    params = json.loads(g.params)
    shown = ",".join(f"{k}={v}" for k, v in params.items())
    return f"{g.benchmark}{'(' + shown + ')' if shown else ''} {g.metric}" + (f" on {g.box}" if g.box else "")


def pair_single_variants(base: dict, head: dict, label: str, notes: list[str]) -> dict:
    """Pair groups whose parameters differ when each side ran one variant only.

    `perflab compare a b` of two different commands (or the same benchmark with
    other parameters) is a comparison of those two variants: where a (box,
    benchmark) has exactly one parameter set on each side, the head's groups
    are matched to the base's, and the report says so.
    """
    def variants(groups):
        out = defaultdict(set)
        for (box, bench, params, _metric) in groups:
            out[(box, bench)].add(params)
        return out

    vb, vh = variants(base), variants(head)
    remap = {}
    for key, hp in vh.items():
        bp = vb.get(key)
        if bp and len(bp) == 1 and len(hp) == 1 and bp != hp:
            remap[(key, next(iter(hp)))] = next(iter(bp))
            notes.append(f"{label}: {key[1]} parameters {next(iter(hp))} paired with the base's {next(iter(bp))}")
    if not remap:
        return head
    out = {}
    for (box, bench, params, metric), g in head.items():
        new_params = remap.get(((box, bench), params), params)
        out[(box, bench, new_params, metric)] = g
    return out

"""Operands of `perflab compare` and `perflab report`: which runs they select.

An operand is a run id (`12`, `#12`), a tag, a commit prefix, a kernel release,
or `key=value[,key=value...]` on the run's fields (tag, commit, box, benchmark,
name, status), `kernel` (the recorded kernel release: a guest's for a run in a VM,
the host's otherwise), its parameters or its environment facts; `key=` (no value)
also selects the runs without that key (`cmdline=`: the kernel without boot options). Groups of samples are
matched across operands on (box, benchmark, params, metric).
"""

from __future__ import annotations

import difflib
import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from perflab.core.errors import PerflabError

if TYPE_CHECKING:
    from perflab.store import Store   # SQLAlchemy: not for reading a store (perflab.store.reader)

# Runs whose samples are real measurements (an interrupted run's completed
# repetitions are; a failed run may hold only the repetition that failed).
USABLE_STATUSES = ("finished", "partial", "interrupted")
from perflab.analysis.variant import EXECUTION_PARAMS, duration_params  # noqa: F401 (re-exported)
RUN_FIELDS = {"tag": "tag", "commit": "commit", "box": "box", "testbox": "box",
              "benchmark": "benchmark", "name": "name", "status": "status", "id": "id"}
# `kernel=RELEASE`: the environment fact it reads. A guest run records the guest's release
# there (perflab.execution.targets.qemu.environment_facts), a host run the host's.
KERNEL_KEY, KERNEL_FACT = "kernel", "kernel_release"


@dataclass
class Selection:
    operand: str
    runs: list  # store rows
    label: str  # how the operand is shown in tables
    _variants: dict | None = field(default=None, repr=False, compare=False)

    @property
    def variants(self) -> dict:
        """run id -> its variant (analysis.variant.of), decoded once for every step that asks
        (the groups' keys, the note on an operand's variants, what the sides measured)."""
        if self._variants is None:
            from perflab.analysis import variant

            self._variants = {r.id: variant.of(r) for r in self.runs}
        return self._variants

    @property
    def run_ids(self) -> list[int]:
        return [r.id for r in self.runs]

    @property
    def boxes(self) -> set[str]:
        return {r.box for r in self.runs}


def _matches_kv(run, key: str, value: str) -> bool:
    if key in RUN_FIELDS:
        actual = getattr(run, RUN_FIELDS[key])
        if key == "commit":
            return bool(actual) and actual.startswith(value)
        return str(actual) == value
    for source in (run.params or {}, run.environment or {}):
        if key in source:
            return str(source[key]) == value
    # `cmdline=` (nothing after the =): the runs without it, the plain kernel beside its boot options.
    return value == ""


def _parse_kv(operand: str) -> list[tuple[str, str]]:
    pairs = []
    for part in operand.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise PerflabError(f"operand {operand!r}: expected key=value[,key=value...]")
        pairs.append((key.strip(), value.strip()))
    return pairs


def _check_keys(operand: str, pairs: list[tuple[str, str]], runs) -> None:
    """A key no run has anywhere is a typo: say so with the keys there are, in one line."""
    params: set[str] = set()
    facts: set[str] = set()
    for r in runs:
        params.update(r.params or {})
        facts.update(r.environment or {})
    fixed = [*RUN_FIELDS, KERNEL_KEY]
    for key, _ in pairs:
        if key not in fixed and key not in params and key not in facts:
            more = "".join(f"; {what}: {', '.join(sorted(keys))}" for what, keys in
                           (("parameters", params), ("environment facts", facts)) if keys)
            raise PerflabError(f"operand {operand!r}: unknown key {key!r}; valid keys: {', '.join(fixed)}{more}")


def _kernel_release(operand: str, value: str, runs) -> str:
    """The recorded kernel release `kernel=VALUE` names: itself, or the one release it begins."""
    releases = sorted({str(r.environment[KERNEL_FACT]) for r in runs if (r.environment or {}).get(KERNEL_FACT)})
    if value in releases:
        return value
    begun = [rel for rel in releases if value and rel.startswith(value)]
    if len(begun) == 1:
        return begun[0]
    if begun:
        raise PerflabError(f"operand {operand!r}: {value!r} begins several kernel releases: {', '.join(begun)}")
    known = f"; recorded releases: {', '.join(releases)}" if releases else "; no run records a kernel release"
    raise PerflabError(f"operand {operand!r}: no run with usable samples has kernel release {value!r}{known}")


def select(store: Store, operand: str, runs=None) -> Selection:
    """Resolve one operand to its runs, or fail naming it with near matches."""
    runs = runs if runs is not None else store.find_runs()
    usable = [r for r in runs if r.status in USABLE_STATUSES]
    if "=" in operand:
        try:
            pairs = _parse_kv(operand)
            _check_keys(operand, pairs, runs)
        except PerflabError:
            if any(r.tag == operand for r in runs):   # a tag with '=' in it (opt=O2): say how to name it
                raise PerflabError(f"operand {operand!r} reads as key=value, but no run has such a key and a "
                                   f"tag is {operand!r}: select the tag with 'tag={operand}'") from None
            raise
        pairs = [(KERNEL_FACT, _kernel_release(operand, v, usable)) if k == KERNEL_KEY else (k, v) for k, v in pairs]
        chosen = [r for r in usable if all(_matches_kv(r, k, v) for k, v in pairs)]
        # A kernel operand is shown as typed: its value alone would read as a tag or a run.
        label = operand.strip() if KERNEL_FACT in (k for k, _ in pairs) else ",".join(v for _, v in pairs)
    elif re.fullmatch(r"#?\d+", operand) and any(r.id == int(operand.lstrip("#")) for r in usable):
        chosen = [r for r in usable if r.id == int(operand.lstrip("#"))]
        label = f"#{chosen[0].id}"
    else:
        chosen = [r for r in usable if r.tag == operand]
        if not chosen and re.fullmatch(r"[0-9a-fA-F]{4,40}", operand):
            chosen = [r for r in usable if r.commit and r.commit.startswith(operand.lower())]
        if not chosen:
            chosen = [r for r in usable if (r.environment or {}).get("kernel_release") == operand]
        label = operand
    if not chosen:
        raise PerflabError(_no_match_message(operand, runs))
    return Selection(operand, chosen, label)


def _no_match_message(operand: str, runs) -> str:
    known = set()
    for r in runs:
        known.update(x for x in (r.tag, r.commit[:12] if r.commit else None,
                                 (r.environment or {}).get("kernel_release"), str(r.id)) if x)
    near = difflib.get_close_matches(operand, sorted(known), n=4, cutoff=0.5)
    hint = f"; near matches: {', '.join(near)}" if near else ""
    unusable = [r for r in runs if r.status not in USABLE_STATUSES and (r.tag == operand or str(r.id) == operand.lstrip("#"))]
    if unusable:
        hint += f"; runs {', '.join('#%d (%s)' % (r.id, r.status) for r in unusable[:5])} match but hold no usable samples"
    return f"operand {operand!r} matches no run (tried run id, tag, commit prefix, kernel release){hint}"


def params_key(params: dict, benchmark: str = "") -> str:
    """Parameters that define what is measured, as a canonical string."""
    ignored = duration_params(benchmark)
    kept = {k: v for k, v in (params or {}).items() if k not in ignored}
    return json.dumps(kept, sort_keys=True, default=str)


@dataclass
class Group:
    """The samples of one (box, benchmark, params, metric) on one side."""

    box: str | None  # None when compared across boxes
    benchmark: str
    params: str  # params_key
    metric: str
    unit: str
    direction: int
    values: list[float] = field(default_factory=list)
    run_ids: set[int] = field(default_factory=set)
    exact: bool = False  # exact by construction (its samples': perflab.store.exactness)

    @property
    def key(self) -> tuple:
        return (self.box, self.benchmark, self.params, self.metric)


VARIANT_KEY = "variant"   # the key a group's parameters gain when its operand's runs are of several variants
# The parameters a guest run stores about its kernel (execution.targets.qemu: the boot options the
# job added, the build it booted). A group's key leaves them to the variant's label, which says
# them in words (`variant=amd64 mitigations=off`, `variant=gcc-12 +CC_OPTIMIZE_FOR_PERFORMANCE`)
# as `log` and `report lmbench` do, never as a build key's hash.
KERNEL_PARAMS = ("cmdline", "kernel_build")


def group_params(params: dict | None, benchmark: str = "", guest: bool = True) -> str:
    """A group's parameters (params_key) without a guest's kernel parameters (KERNEL_PARAMS)."""
    kept = {k: v for k, v in (params or {}).items() if not (guest and k in KERNEL_PARAMS)}
    return params_key(kept, benchmark)


def variant_keys(runs, cross_box: bool = False, variants: dict | None = None,
                 among: list[Selection] | None = None) -> dict[int, tuple[str | None, str, str]]:
    """run id -> its group's (box, benchmark, params: group_params). Runs of one operand that share
    those but differ in variant (analysis.variant: a flavour, a kernel, a build, boot options, the
    file system, the compiler) are never pooled: each variant's parameters gain `variant` = its
    label among them, without the kernel's version where that alone does not tell them apart
    (`rt`, `cloud`), so that the same flavours of two operands are matched. `variants`: the runs'
    variants when already decoded (Selection.variants). `among`: every compared operand (this one
    too): the labels are then made across them all (cross_labels), so that one
    variant against a tag of several is labelled on both sides (`variant=amd64` with `variant=amd64`)."""
    from perflab.analysis import variant

    def keyed(rs, variant_of: dict) -> tuple[dict, dict]:
        keys = {r.id: (None if cross_box else r.box, r.benchmark,
                       group_params(r.params, r.benchmark, variant_of[r.id].target.guest)) for r in rs}
        by_key: dict[tuple, dict[tuple, object]] = defaultdict(dict)
        for r in rs:
            v = variant_of[r.id]
            by_key[keys[r.id]].setdefault(v.side_key, v)
        return keys, by_key

    variant_of = variants if variants is not None else {r.id: variant.of(r) for r in runs}
    keys, mine = keyed(runs, variant_of)
    sides = [keyed(sel.runs, sel.variants)[1] for sel in among] if among else [mine]
    labels = cross_labels(sides)
    for r in runs:
        label = labels.get((keys[r.id], variant_of[r.id].side_key))
        # The one variant that has nothing the others lack (the kernel without boot options
        # beside it with mitigations=off) keeps its parameters as they are, as it would alone.
        if label:
            key = keys[r.id]
            keys[r.id] = (*key[:2], json.dumps({**json.loads(key[2]), VARIANT_KEY: label}, sort_keys=True, default=str))
    return keys


# -- one label for a variant on every side of a comparison --------------------------------------

def cross_labels(sides: list[dict]) -> dict[tuple, str]:
    """(group key, side_key) -> the `variant` label of that variant's group, made across every
    compared operand at once (`sides`: per operand, group key -> {side_key: Variant}).

    A group key where each operand ran one variant is left alone (operand against operand: what
    differs is what is compared). Otherwise every variant of every operand is labelled among all
    of them (naming.variant_labels without the version), so whatever tells two groups shown apart
    is said on both sides: one kernel against a tag of several is `variant=amd64` against the
    tag's `variant=amd64`, not bare against it. Variants of one line (analysis.variant.Variant.line:
    Debian's amd64 6.1.0-55 and 6.1.0-56) on different operands share a label, so they are
    compared; two releases of one line within an operand are told apart by their version."""
    from collections import Counter

    from perflab.analysis import naming

    out: dict[tuple, str] = {}
    for key in dict.fromkeys(k for side in sides for k in side):
        per_side = [side.get(key, {}) for side in sides]
        if all(len(kinds) <= 1 for kinds in per_side):
            continue
        crowded = {line for kinds in per_side
                   for line, n in Counter(v.line for v in kinds.values()).items() if n > 1}

        def unit(v) -> tuple:
            return v.side_key if v.line in crowded else v.line

        reps: dict[tuple, object] = {}
        for kinds in per_side:
            for v in kinds.values():
                reps.setdefault(unit(v), v)
        units = list(reps)
        labels = naming.variant_labels(list(reps.values()), anchor=False)
        seen = Counter(labels)
        if any(n > 1 for n in seen.values()):
            # Releases of one line within an operand: those (and only those) say their version.
            anchored = naming.variant_labels(list(reps.values()))
            labels = [anchored[i] if seen[text] > 1 else text for i, text in enumerate(labels)]
        label_of = dict(zip(units, labels))
        for kinds in per_side:
            for side_key, v in kinds.items():
                out[(key, side_key)] = label_of[unit(v)]
    return out


def groups_of(store: Store, selection: Selection, cross_box: bool = False,
              among: list[Selection] | None = None) -> dict[tuple, Group]:
    out: dict[tuple, Group] = {}
    run_keys = variant_keys(selection.runs, cross_box, selection.variants, among)
    for smp in store.samples(selection.run_ids):
        key = (*run_keys[smp.run_id], smp.metric)
        g = out.get(key)
        if g is None:
            g = out[key] = Group(*key, unit=smp.unit, direction=smp.direction, exact=smp.exact)
        g.values.append(smp.value)
        g.run_ids.add(smp.run_id)
    return out


def common_facts(selections: list[Selection]) -> dict[str, str]:
    """Environment facts and parameters shared by every selected run: the table header."""
    runs = [r for sel in selections for r in sel.runs]
    if not runs:
        return {}
    values: dict[str, set] = defaultdict(set)
    keys = None
    for r in runs:
        facts = {**{k: v for k, v in (r.environment or {}).items() if k != "loadavg_start"},
                 **{f"param.{k}": v for k, v in (r.params or {}).items() if k not in duration_params(r.benchmark)},
                 "benchmark": r.benchmark}
        keys = set(facts) if keys is None else keys & set(facts)
        for k, v in facts.items():
            values[k].add(json.dumps(v, sort_keys=True, default=str))
    return {k: json.loads(next(iter(values[k]))) for k in sorted(keys or ()) if len(values[k]) == 1}


def metric_wanted(names, wanted) -> set[str]:
    """The metric names that `--metric NAME` options select, from the `names` there are.

    A NAME that is a metric's exact name, or its name after a prefix (`syscall.null` for
    `lmbench.syscall.null`), selects those metrics alone: `syscall.null` is not
    `syscall.null_io`. A NAME that names no metric so selects every metric whose name
    contains it (`syscall` selects both). docs/changepoints.md ("Choosing metrics")."""
    names = set(names)
    chosen: set[str] = set()
    for want in wanted:
        named = {n for n in names if n == want or n.endswith("." + want)}
        chosen |= named or {n for n in names if want in n}
    return chosen


def variants_apart(groups) -> list[tuple[str, list]]:
    """Each (label, runs) split by variant (analysis.variant: a kernel's flavour, boot options, a
    target, the file system): a tag of amd64 and rt runs is two curves, `TAG rt` and `TAG amd64`,
    never one curve averaging the two kernels. Labelled across every group, as compare labels its
    operands' variants: beside a tag of several, a group of one variant says which it is too
    (`v1 6.1.0-55 amd64` beside `v2 6.1.0-56 amd64`, `v2 6.1.0-56 rt`). Where every group is of one
    variant, each keeps its label."""
    from perflab.analysis import naming, variant

    split = []
    for label, runs in groups:
        kinds: dict[tuple, tuple] = {}
        for r in runs:
            v = variant.of(r)
            kinds.setdefault(v.side_key, (v, []))[1].append(r)
        split.append((label, runs, kinds))
    if all(len(kinds) < 2 for _, _, kinds in split):
        return [(label, runs) for label, runs, _ in split]
    every = {key: v for _, _, kinds in split for key, (v, _) in kinds.items()}
    name_of = dict(zip(every, naming.variant_labels(list(every.values()))))
    out = []
    for label, runs, kinds in split:
        out += [(f"{label} {name_of[key]}", rs) for key, (_, rs) in kinds.items()] if kinds else [(label, runs)]
    return out

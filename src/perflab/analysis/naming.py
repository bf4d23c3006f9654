"""One way to name what a report shows: a row, a series, a curve, a chart.

A name is the family and the `key=value` of the parameters that tell the shown items apart
("will-it-scale nr_task=2 mode=thread", "cmd command=./a.sh"). What every item shares is
said once, in a heading (`common`), not on every row. Booleans and internal switches
(`shell`, `metrics: []`, `prepare`) appear only when they differ between the items. The part
of a value that tells two items apart is never cut: a long value loses the text every item
shares, around the part that differs. An item that stands alone is named by its family and
its parameters that say what is measured (non-empty, not boolean, not internal).

Every view builder names with this module (docs/views.md); the renderers print the names.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from perflab.core.text import printable

# Parameters that switch how a benchmark is run, not what it measures.
INTERNAL = frozenset({"shell", "metrics", "prepare", "ignore_failure", "name", "cpus", "timeout"})
VALUE_LIMIT = 40     # a value longer than this is shortened (never its differing part)
_EMPTY = (None, "", [], {})


def _params(params: Mapping | str | None) -> dict:
    if isinstance(params, str):
        try:
            loaded = json.loads(params) if params else {}
        except ValueError:
            return {"params": params}
        return loaded if isinstance(loaded, dict) else {"params": loaded}
    return dict(params or {})


def _canon(value) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _text(value) -> str:
    """A value as it reads in a name: strings bare (quoted when they hold spaces), others as JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        text = printable(value, None)
        return f'"{text}"' if (not text or any(c.isspace() for c in text)) else text
    if isinstance(value, (int, float)) or value is None:
        return printable(value if value is not None else "none", None)
    return printable(json.dumps(value, separators=(",", ":"), default=str), None)


def _shorten(text: str, others: list[str]) -> str:
    """`text` cut to VALUE_LIMIT around what differs from the other values (that part is kept whole)."""
    if len(text) <= VALUE_LIMIT:
        return text
    rest = [o for o in others if o != text]
    if not rest:
        return printable(text, VALUE_LIMIT)
    start = min(_common_prefix(text, o) for o in rest)
    end = max(start, len(text) - min(_common_suffix(text, o) for o in rest))
    if end - start >= VALUE_LIMIT:
        lo, hi = start, end
    else:
        lo = max(0, start - (VALUE_LIMIT - (end - start)) // 2)
        hi = min(len(text), lo + VALUE_LIMIT)
        lo = max(0, hi - VALUE_LIMIT)
    # Eliding a few characters (a quote, a slash) saves nothing.
    lo = 0 if lo <= 3 else lo
    hi = len(text) if len(text) - hi <= 3 else hi
    return ("…" if lo > 0 else "") + text[lo:hi] + ("…" if hi < len(text) else "")


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _common_suffix(a: str, b: str) -> int:
    return _common_prefix(a[::-1], b[::-1])


FIRST = ("test", "testcase", "command", "argv")   # what is measured leads a name, as LKP's testcase does


def _keys(dicts: Sequence[dict]) -> list[str]:
    keys: list[str] = []
    for d in dicts:
        keys += [k for k in d if k not in keys]
    return sorted(keys, key=lambda k: FIRST.index(k) if k in FIRST else len(FIRST))


def differing(params_list: Sequence[Mapping | str | None]) -> list[str]:
    """The keys whose values differ between the parameter sets (in the order they first appear)."""
    dicts = [_params(p) for p in params_list]
    return [k for k in _keys(dicts) if len({_canon(d.get(k)) for d in dicts}) > 1]


def identity(params: Mapping | str | None) -> list[str]:
    """The keys that say what an item alone measures: not internal, not boolean, not empty."""
    d = _params(params)
    return [k for k in _keys([d])
            if k not in INTERNAL and not isinstance(d[k], bool) and d[k] not in _EMPTY]


def _pairs(d: dict, keys: list[str], values_of: dict[str, list[str]]) -> list[str]:
    out = []
    for k in keys:
        if k not in d:
            continue
        text = _text(d[k])
        out.append(f"{printable(k, None)}={_shorten(text, values_of.get(k, []))}")
    return out


def names(items: Sequence[tuple[str, Mapping | str | None]], *, family: bool = True) -> list[str]:
    """A name per (family, params) item, telling the items apart; `family=False` leaves the
    family out when every item has the same one."""
    dicts = [_params(p) for _, p in items]
    families = [b for b, _ in items]
    several_families = len(set(families)) > 1
    by_family: dict[str, list[dict]] = {}
    for b, d in zip(families, dicts):
        by_family.setdefault(b, []).append(d)
    keys_of: dict[str, list[str]] = {}
    values_of: dict[str, dict[str, list[str]]] = {}
    for b, ds in by_family.items():
        distinct = {_canon(d): d for d in ds}
        keys_of[b] = differing(list(distinct.values())) if len(distinct) > 1 else identity(ds[0])
        values_of[b] = {k: sorted({_text(d[k]) for d in distinct.values() if k in d}) for k in keys_of[b]}
    out = []
    for b, d in zip(families, dicts):
        parts = ([printable(b, None)] if family or several_families else []) + _pairs(d, keys_of[b], values_of[b])
        out.append(" ".join(parts) or printable(b, None))
    return out


def name(benchmark: str, params: Mapping | str | None) -> str:
    """The name of an item shown alone."""
    return names([(benchmark, params)])[0]


def common(params_list: Sequence[Mapping | str | None]) -> str:
    """What every parameter set shares, as `key=value ...` (internal switches left out): a heading's line."""
    dicts = [_params(p) for p in params_list]
    if not dicts:
        return ""
    varying = set(differing(dicts))
    keys = [k for k in _keys(dicts) if k not in varying and all(k in d for d in dicts)]
    keys = [k for k in keys if k not in INTERNAL and dicts[0][k] not in _EMPTY]
    return " ".join(f"{printable(k, None)}={printable(_text(dicts[0][k]), VALUE_LIMIT * 2)}" for k in keys)


def _without_target(params) -> dict:
    from perflab.analysis.variant import TARGET_PARAMS

    return {k: v for k, v in _params(params).items() if k not in TARGET_PARAMS}


def name_series(series_list) -> None:
    """Name each series (analysis.series.Series: benchmark, params) among the others shown; series
    of different lines (flavours, recipes, boot options, targets) also by what tells their lines
    apart, without the history dimension (`will-it-scale rt`, not one kernel release of it)."""
    variants = [getattr(s, "variant", None) for s in series_list]
    lines = {v.line for v in variants if v is not None}
    several = len(lines) > 1 and None not in variants
    # The variant's label says the target's parameters (vm, cmdline, kernel_build) in its words.
    texts = names([(s.benchmark, _without_target(s.params) if several else s.params) for s in series_list])
    if several:
        for i, label in enumerate(variant_labels(variants, anchor=False)):
            if label:
                texts[i] = f"{texts[i]} {label}"
    # Series of one line split by what they measured beside the history (the commits of a series
    # in kernel order): their commit, else their tag, tells them apart.
    seen: dict[tuple, list[int]] = {}
    for i, (text, s) in enumerate(zip(texts, series_list)):
        seen.setdefault((text, getattr(s, "box", None), getattr(s, "metric", None)), []).append(i)
    for indices in seen.values():
        if len(indices) > 1 and all(variants[i] is not None for i in indices):
            for field, width in (("commit", 12), ("tag", 40)):
                values = [getattr(variants[i], field) for i in indices]
                if len(set(values)) == len(values):
                    for i, value in zip(indices, values):
                        texts[i] += f" {field}={printable(value[:width] or '-', None)}"
                    break
    for s, text in zip(series_list, texts):
        s.name = text


# -- variants (issue 44): the shortest part of a run's identity that tells it from the others ---

def _facets(v, history: bool, anchor: bool = True) -> list[tuple[str, tuple[str, ...]]]:
    """A variant's facets in label order: (name, words). A facet is printed when its words differ
    between the variants shown (analysis.variant.Variant)."""
    k, t = v.kernel, v.target
    out = [("flavour", (k.short_flavour,) if k.origin not in ("recipe", "image") else ()),
           # A kernel of no known line (a bisection's, a series' image) is its runs' own series.
           ("image", (f"{k.release or 'kernel'} ({v.tag})" if v.tag else k.release or "kernel",)
            if k.origin == "image" and not anchor else ()),
           ("compiler", (k.compiler,) if k.compiler else ()),
           ("kcflags", (k.kcflags,) if k.kcflags else ()),
           ("config", (k.config,) if k.config else ()),
           ("fragments", k.fragments),
           ("patches", k.patches),
           ("cmdline", (k.cmdline,) if k.cmdline else ()),
           ("where", (t.mode if t.guest else "host",)),
           ("cpus", (f"{t.cpus} vCPUs",) if t.guest else ()),
           ("memory", (f"{t.memory_mib} MiB",) if t.guest else ()),
           ("qemu_args", (t.qemu_args,) if t.qemu_args else ()),
           ("fs", (v.workdir_fs,) if v.workdir_fs else ()),
           ("cc", (v.cc,) if v.cc else ())]
    if history:
        out += [("ref", (k.ref[:12],) if k.ref else ()), ("tag", (v.tag,) if v.tag else ()),
                ("commit", (v.commit[:12],) if v.commit else ())]
    return out


# Said of a self-built kernel whenever it is shown: the compiler is what a reader asks first.
_ALWAYS = frozenset({"compiler"})
# Told only when nothing else tells two variants apart.
_LAST_RESORT = (("ref", lambda v: v.kernel.ref[:12]), ("build", lambda v: v.kernel.build), ("image", lambda v: v.kernel.image),
                ("config_hash", lambda v: v.kernel.config_hash), ("box", lambda v: v.box),
                ("params", lambda v: v.params))


def variant_labels(variants: Sequence, *, history: bool = False, without: tuple[str, ...] = (),
                   anchor: bool = True) -> list[str]:
    """A label per variant (analysis.variant.Variant): its kernel's version, then the facets that
    differ between the variants given (`6.1.0-56 rt`, `6.1.0-56 amd64 mitigations=off`,
    `6.1.192 gcc-12 +CC_OPTIMIZE_FOR_PERFORMANCE`, `6.1.0-56 host`). One variant alone, or
    variants that differ in nothing said, are named by their kernel's release. `history=True`
    also tells the commit, the recipe's ref and the tag (where the history dimension is shown).
    Distinct identities never share a label: a last resort (build key, image, box) is added.
    `without` names facets a view says otherwise (lmbench names the compiler its own way).
    `anchor=False` leaves the kernel's version out (a series' name: its points are the versions),
    and names a kernel of no known line (a bisection's image) by its release and tag."""
    variants = list(variants)
    if not variants:
        return []
    facets = [[f for f in _facets(v, history, anchor) if f[0] not in without] for v in variants]
    differ = {name for i, (name, _) in enumerate(facets[0])
              if len({f[i][1] for f in facets}) > 1}
    labels = []
    for v, fs in zip(variants, facets):
        words = [] if not anchor else [v.kernel.version or v.kernel.release] if (v.kernel.release and differ) \
            else [v.kernel.release] if v.kernel.release else []
        for name, value in fs:
            if name in differ or (name in _ALWAYS and value):
                # A fragment (a patch) shared by every variant shown is not what tells them apart.
                if name in ("fragments", "patches"):
                    shared = set.intersection(*(set(dict(f)[name]) for f in facets))
                    value = tuple(w for w in value if w not in shared)
                words += [printable(w, None) for w in value if w]
        labels.append(" ".join(words) or (printable(v.benchmark, None) if anchor else ""))
    # Without the version (a series' name) the line is what must differ, not the release.
    def apart(i: int) -> tuple:
        v = variants[i]
        return (v.identity if anchor else v.line, *((v.commit, v.tag) if history else ()))

    # Until no two identities share a label: a last resort that splits those that still do (three
    # builds, two of one ref: the ref parts one from the two, the build key the two).
    for _ in range(len(_LAST_RESORT)):
        seen: dict[str, list[int]] = {}
        for i, text in enumerate(labels):
            seen.setdefault(text, []).append(i)
        shared = [indices for indices in seen.values() if len({apart(i) for i in indices}) > 1]
        if not shared:
            break
        for indices in shared:
            for name, read in _LAST_RESORT:
                values = {read(variants[i]) for i in indices}
                if len(values) > 1:
                    for i in indices:
                        labels[i] += f" {name}={_shorten(printable(read(variants[i]) or '-', None), sorted(values))}"
                    break
    return labels

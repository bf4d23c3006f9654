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


def name_series(series_list) -> None:
    """Name each series (analysis.series.Series: benchmark, params) among the others shown."""
    for s, text in zip(series_list, names([(s.benchmark, s.params) for s in series_list])):
        s.name = text

"""`perflab report table`'s view: pivots of metric means (the fio seed's layout, docs/lab.md)."""

from __future__ import annotations

from dataclasses import dataclass

from perflab.core.errors import PerflabError
from perflab.core.kernel_version import order_key

_RUN_KEYS = {"box": lambda r: r.box, "testbox": lambda r: r.box, "tag": lambda r: r.tag or "-",
             "benchmark": lambda r: r.benchmark, "name": lambda r: r.name, "commit": lambda r: (r.commit or "-")[:12],
             # The kernel under test: a guest's release for a run in a VM, the host's otherwise (docs/vm.md).
             "kernel": lambda r: (getattr(r, "environment", None) or {}).get("kernel_release")}


@dataclass
class Pivot:
    """One metric's table: a line per row value, a column per combination of column values;
    cells: (row value, column values) -> the mean of every sample of the runs that have both."""

    metric: str
    unit: str
    row_key: str
    col_keys: list[str]
    row_values: list[str]
    col_values: list[tuple[str, ...]]
    cells: dict[tuple[str, tuple[str, ...]], float]
    note: str = ""       # why the columns carry a key the user did not ask for; what variants are builds
    left_out: str = ""   # the rows and columns of the runs shown that hold no sample of this metric


def key_value(run, key: str) -> str | None:
    """A run's value of a pivot key: a run field (box, tag, benchmark, name, commit), the kernel
    release it measured (kernel) or a parameter; `vm` of a run on the host is "host"."""
    if key in _RUN_KEYS:
        return _RUN_KEYS[key](run)
    params = run.params or {}
    if key == "vm" and key not in params:
        from perflab.analysis import variant

        target = variant.of(run).target    # the host is where a run without a guest ran: a column of its own
        return target.mode if target.guest else "host"
    return None if key not in params else str(params[key])


VARIANT_KEY = "variant"   # --rows/--cols variant: each run's variant, labelled among the runs shown


def _variant_values(runs) -> tuple[dict[int, str], str]:
    """run id -> its variant's label among the runs' variants (analysis.naming.variant_labels),
    and a note naming the labels that are one recipe built at several commits."""
    from perflab.analysis import naming, variant

    variants = {r.id: variant.of(r) for r in runs}
    kinds = {v.measured: v for v in variants.values()}
    label = dict(zip(kinds, naming.variant_labels(list(kinds.values()))))
    # A recipe built at another commit is another build: a variant of its own, as another release
    # of one Debian flavour is (docs/views.md), never pooled; the note says which variants are one
    # recipe's builds, the history a comparison matches them along.
    builds: dict[tuple, list[str]] = {}
    for measured, v in kinds.items():
        if v.kernel.origin == variant.RECIPE:
            builds.setdefault(v.line, []).append(label[measured])
    several = [" | ".join(labels) for labels in builds.values() if len(labels) > 1]
    note = ("one recipe built at other commits is a variant per build, never pooled (ref=: the commit "
            f"built; `perflab compare` matches them): {'; '.join(several)}") if several else ""
    return {rid: label[v.measured] for rid, v in variants.items()}, note


def _kernel_order(placed, releases) -> dict[str, tuple]:
    """Each kernel release's place in version order (a Debian ABI name at its upstream version
    when a run recorded uname -v)."""
    version_of: dict[str, str] = {}
    for r, *_ in placed:
        env = getattr(r, "environment", None) or {}
        if env.get("kernel_release") and isinstance(env.get("kernel_version"), str):
            version_of.setdefault(env["kernel_release"], env["kernel_version"])
    return {k: order_key(k, version_of.get(k)) for k in releases}


def _named(metrics: tuple[str, ...], units: dict[str, str]) -> list[str]:
    """The metrics the METRIC arguments name (analysis.selection.metric_wanted: an exact name wins
    over a substring), in the order named; a name that matches nothing stays, for its error."""
    from perflab.analysis.selection import metric_wanted

    out: list[str] = []
    for metric in metrics:
        out += sorted(metric_wanted(units, [metric])) or [metric]
    return list(dict.fromkeys(out))


def _units(store, run_ids: list[int]) -> dict[str, str]:
    """metric -> unit of the samples of these runs (one pass over their samples)."""
    units: dict[str, str] = {}
    for smp in store.samples(run_ids):
        units.setdefault(smp.metric, smp.unit)
    return units


def _pools_variants(placed) -> bool:
    """Whether a cell would hold runs of two variants (what a comparison's side is split by)."""
    from perflab.analysis import variant

    sides: dict[tuple, set] = {}
    for r, row, col in placed:
        sides.setdefault((row, col), set()).add(variant.of(r).side_key)
    return any(len(keys) > 1 for keys in sides.values())


def pivots(store, metrics: tuple[str, ...], row_key: str, cols: list[str], benchmark: str | None,
           boxes: tuple[str, ...], tags: tuple[str, ...]) -> list[Pivot]:
    """A Pivot per metric (every metric of the selected runs when none is named)."""
    from perflab.analysis.selection import USABLE_STATUSES
    from perflab.stats.scaling import pooled_means

    runs = [r for r in store.find_runs(benchmark=benchmark) if r.status in USABLE_STATUSES
            and (not boxes or r.box in boxes) and (not tags or (r.tag or "") in tags)]
    placed = []
    variant_of, builds_note = _variant_values(runs) if VARIANT_KEY in (row_key, *cols) else ({}, "")

    def value(r, key):
        return variant_of.get(r.id) if key == VARIANT_KEY else key_value(r, key)

    for r in runs:
        row, col = value(r, row_key), tuple(value(r, k) for k in cols)
        if row is not None and None not in col:
            placed.append((r, row, col))
    if not placed:
        raise PerflabError(f"no runs{' of ' + benchmark if benchmark else ''} have both --rows {row_key} and "
                           f"--cols {','.join(cols)} (keys: box, tag, benchmark, name, commit, kernel, variant or a parameter)")
    if VARIANT_KEY not in (row_key, *cols) and _pools_variants(placed):
        # A cell never averages two kernels, flavours, builds or boot options (docs/views.md):
        # the variant becomes a column key of its own.
        found = pivots(store, metrics, row_key, [*cols, VARIANT_KEY], benchmark, boxes, tags)
        note = (f"a cell of --rows {row_key} --cols {','.join(cols)} held runs of more than one variant: "
                f"the columns are split by {VARIANT_KEY} too")
        return [Pivot(**{**p.__dict__, "note": "; ".join(filter(None, (note, p.note)))}) for p in found]
    row_values = list(dict.fromkeys(row for _, row, _ in placed))
    if row_key == "kernel":   # kernels in version order, whatever order they were run in
        row_values.sort(key=_kernel_order(placed, row_values).__getitem__)
    # Each key's values in the order the runs first had them (oldest first: "without" before "with"),
    # kernels in version order.
    first_seen = []
    for level, key in enumerate(cols):
        seen = list(dict.fromkeys(col[level] for _, _, col in placed))
        if key == "kernel":
            seen.sort(key=_kernel_order(placed, seen).__getitem__)
        first_seen.append({v: i for i, v in enumerate(seen)})
    col_values = sorted(dict.fromkeys(col for _, _, col in placed),
                        key=lambda col: tuple(first_seen[level][v] for level, v in enumerate(col)))
    cell_index = {cell: i for i, cell in enumerate((row, col) for row in row_values for col in col_values)}
    rows_of = {r.id: [cell_index[(row, col)]] for r, row, col in placed}
    units = _units(store, list(rows_of))
    names = _named(metrics, units) if metrics else sorted(units)
    means = pooled_means(store.metric_sums(list(rows_of), names), rows_of, len(cell_index))
    out = []
    for metric in names:
        cells = {cell: means[i][metric] for cell, i in cell_index.items() if metric in means[i]}
        if not cells:
            raise PerflabError(f"metric {metric!r}: no sample in the selected runs; "
                               f"they hold: {', '.join(sorted(units)[:20]) or 'nothing'}")
        # A row or column of no sample of this metric (a tag of lmbench runs in will-it-scale's
        # table) is left out, as a comparison leaves out what it has no figure for; the note names it.
        rows = [row for row in row_values if any((row, col) in cells for col in col_values)]
        columns = [col for col in col_values if any((row, col) in cells for row in row_values)]
        empty = [f"{row_key} {', '.join(r for r in row_values if r not in rows)}"] if len(rows) < len(row_values) \
            else []
        if len(columns) < len(col_values):
            empty.append(f"{','.join(cols)} " + ", ".join("/".join(c) for c in col_values if c not in columns))
        left_out = f"{metric}: left out, no sample of it: {'; '.join(empty)}" if empty else ""
        out.append(Pivot(metric, units.get(metric, ""), row_key, cols, rows, columns, cells, note=builds_note,
                         left_out=left_out))
    return out

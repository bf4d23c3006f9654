"""`perflab report profile`'s view: one selection's perf-profile, or two selections' shares compared."""

from __future__ import annotations

from dataclasses import dataclass

from perflab.core.errors import PerflabError

PROFILE = "perf-profile"


@dataclass
class ProfileView:
    result: object                        # stats.profile.ProfileComparison
    base_label: str
    head_label: str
    facts: dict[str, tuple[str, str]]     # symbol -> (comm, [k]/[.])
    header: list[str]                     # the heading line, then the monitors' notes


@dataclass
class ProfileSideView:
    shares: object                        # stats.profile.ProfileShares
    facts: dict[str, tuple[str, str]]     # symbol -> (comm, [k]/[.])
    header: list[str]                     # the heading line, then the monitors' notes


def _side(store, operand: str, runs):
    """(selection, profiled run ids, the repetitions' shares, the benchmark) of one operand."""
    from perflab.analysis.selection import select

    sel = select(store, operand, runs)
    reps: dict[tuple[int, int], dict] = {}
    benchmarks: dict[str, int] = {}
    bench_of = {r.id: r.benchmark for r in sel.runs}
    for smp in store.samples(sel.run_ids):
        kind, _, symbol = smp.metric.partition(".cycles-pp.")
        if kind not in ("perf-profile.children", "perf-profile.self") or not symbol:
            continue
        reps.setdefault((smp.run_id, smp.repetition), {})[(kind.rsplit(".", 1)[1], symbol)] = smp.value
        benchmarks[bench_of[smp.run_id]] = benchmarks.get(bench_of[smp.run_id], 0) + 1
    if not reps:
        raise PerflabError(f"operand {operand!r} selects {len(sel.runs)} run(s) ({', '.join('#%d' % r.id for r in sel.runs[:5])}"
                           f"{' ...' if len(sel.runs) > 5 else ''}) but none holds perf-profile data; "
                           "run with `--monitor perf-profile`")
    if len(benchmarks) > 1:
        raise PerflabError(f"operand {operand!r} selects perf-profile data of several benchmarks "
                           f"({', '.join(sorted(benchmarks))}); pick one with --benchmark")
    profiled = sorted({rid for rid, _ in reps})
    return sel, profiled, [reps[k] for k in sorted(reps)], next(iter(benchmarks))


def _facts_and_notes(store, sides) -> tuple[dict[str, tuple[str, str]], list[str]]:
    """comm and [k]/[.] of each symbol (from the series rows) and the monitors' notes, in order."""
    from perflab.monitors.perf import symbols_from_series

    facts: dict[str, tuple[str, str]] = {}
    notes: list[str] = []
    for sel, profiled, _, _ in sides:
        if hasattr(store, "monitor_series"):
            for row in store.monitor_series(profiled, PROFILE):
                facts.update(symbols_from_series(row.values or {}))
        for r in sel.runs:
            record = (getattr(r, "monitors", None) or {}).get(PROFILE) or {}
            notes.extend(n for n in record.get("notes", []) if n not in notes)
    return facts, notes


def _label(sel, profiled, rows) -> str:
    return (f"{sel.label} ({len(profiled)} run{'s' if len(profiled) != 1 else ''}, "
            f"{len(rows)} repetition{'s' if len(rows) != 1 else ''})")


def _runs(store, benchmark: str | None):
    return store.find_runs(benchmark=benchmark) if benchmark else store.find_runs()


def profile_side_view(store, operand: str, benchmark: str | None, top: int) -> ProfileSideView:
    """The `top` symbols by children% of the runs OPERAND selects: one profile, as
    `perf report --children` shows it, means over the repetitions."""
    side = _side(store, operand, _runs(store, benchmark))
    facts, notes = _facts_and_notes(store, [side])
    sel, profiled, rows, bench = side
    from perflab.stats.profile import profile_shares

    return ProfileSideView(profile_shares(rows, top=top), facts,
                           [f"perf-profile of {bench}: {_label(sel, profiled, rows)}", *notes])


def profile_view(store, base: str, head: str, benchmark: str | None, top: int) -> ProfileView:
    """The `top` symbols whose share changed most between the runs BASE and HEAD select."""
    runs = _runs(store, benchmark)
    sides = [_side(store, operand, runs) for operand in (base, head)]
    facts, notes = _facts_and_notes(store, sides)
    (bsel, bruns, brows, bbench), (hsel, hruns, hrows, hbench) = sides
    # scipy is imported only once the operands are known good (a bad one fails fast).
    from perflab.stats.profile import compare_profiles

    result = compare_profiles(brows, hrows, top=top)
    header = [f"perf-profile of {bbench}" + (f" (base) and {hbench} (head)" if hbench != bbench else "")
              + f": base {_label(bsel, bruns, brows)}, head {_label(hsel, hruns, hrows)}", *notes]
    return ProfileView(result, bsel.label, hsel.label, facts, header)

"""`perflab report profile`'s view: perf-profile shares of two selections and their comparison."""

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


def profile_view(store, base: str, head: str, benchmark: str | None, top: int) -> ProfileView:
    """The `top` symbols whose share changed most between the runs BASE and HEAD select."""
    from perflab.monitors.perf import symbols_from_series

    runs = store.find_runs(benchmark=benchmark) if benchmark else store.find_runs()
    sides = [_side(store, operand, runs) for operand in (base, head)]
    facts: dict[str, tuple[str, str]] = {}
    notes: list[str] = []
    for sel, profiled, _, _ in sides:
        if hasattr(store, "monitor_series"):
            for row in store.monitor_series(profiled, PROFILE):
                facts.update(symbols_from_series(row.values or {}))
        for r in sel.runs:
            record = (getattr(r, "monitors", None) or {}).get(PROFILE) or {}
            notes.extend(n for n in record.get("notes", []) if n not in notes)
    (bsel, bruns, brows, bbench), (hsel, hruns, hrows, hbench) = sides
    # scipy is imported only once the operands are known good (a bad one fails fast).
    from perflab.stats.profile import compare_profiles

    result = compare_profiles(brows, hrows, top=top)

    def label(sel, profiled, rows):
        return (f"{sel.label} ({len(profiled)} run{'s' if len(profiled) != 1 else ''}, "
                f"{len(rows)} repetition{'s' if len(rows) != 1 else ''})")

    header = [f"perf-profile of {bbench}" + (f" (base) and {hbench} (head)" if hbench != bbench else "")
              + f": base {label(bsel, bruns, brows)}, head {label(hsel, hruns, hrows)}", *notes]
    return ProfileView(result, bsel.label, hsel.label, facts, header)

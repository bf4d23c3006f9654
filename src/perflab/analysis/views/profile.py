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


# -- insn-profile: a guest's instructions per kernel function (perflab.monitors.insns) -------------

INSN = "insn-profile"
# The metric a family's figure per operation is read from when --per-op is not given.
PER_OP_DEFAULT = {"will-it-scale": "will-it-scale.workload"}
TIME_UNITS = {"ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}


@dataclass
class InstructionView:
    result: object                        # stats.profile.InstructionComparison
    base_label: str
    head_label: str
    header: list[str]


def has_instruction_profile(store, operand: str, benchmark: str | None) -> bool:
    """Whether OPERAND's runs hold insn-profile data (and so `report profile` shows it)."""
    from perflab.analysis.selection import select

    sel = select(store, operand, _runs(store, benchmark))
    return any(s.metric.startswith(INSN + ".") for s in store.samples(sel.run_ids))


def instruction_time_per_op(metric: str, unit: str, value: float) -> float:
    """The instruction-time (ns, 1 per instruction under icount) one operation took, from the
    benchmark's figure: a rate (unit .../s) or a time per operation (ns, us, ms, s)."""
    head = unit.split()[0] if unit.split() else ""
    if "/s" in head and value > 0:
        return 1e9 / value
    if head in TIME_UNITS:
        return value * TIME_UNITS[head]
    raise PerflabError(f"--per-op {metric}: its unit {unit!r} is neither a rate (.../s) nor a time per operation "
                       "(ns, us, ms, s)")


def _instruction_side(store, operand: str, runs, per_op: str | None, default: bool):
    """(selection, profiled run ids, the repetitions' rows, their instruction-time per operation or
    None, the benchmark, the metric that gave it): `per_op` names the metric, else with `default`
    the family's own (PER_OP_DEFAULT), once the benchmark is known."""
    from perflab.analysis.selection import select
    from perflab.execution.counted import PREFIX, USER

    sel = select(store, operand, runs)
    reps: dict[tuple[int, int], dict[str, float]] = {}
    figures: dict[tuple[int, int], list[tuple[float, str]]] = {}
    benchmarks = {r.id: r.benchmark for r in sel.runs}
    for smp in store.samples(sel.run_ids):
        key = (smp.run_id, smp.repetition)
        if smp.metric.startswith(PREFIX):
            reps.setdefault(key, {})[smp.metric[len(PREFIX):]] = smp.value
        elif smp.metric == USER:
            reps.setdefault(key, {})["[user]"] = smp.value
        elif per_op is None or smp.metric == per_op:
            figures.setdefault(key, {}).setdefault(smp.metric, []).append((smp.value, smp.unit))
    if not reps:
        raise PerflabError(f"operand {operand!r} selects {len(sel.runs)} run(s) but none holds insn-profile data; "
                           "run in a guest with `--vm icount --monitor insn-profile`")
    names = sorted({benchmarks[rid] for rid, _ in reps})
    if len(names) > 1:
        raise PerflabError(f"operand {operand!r} selects insn-profile data of several benchmarks "
                           f"({', '.join(names)}); pick one with --benchmark")
    keys = sorted(reps)
    if per_op is None and default:
        per_op = PER_OP_DEFAULT.get(names[0])
    per = None
    if per_op is not None:
        missing = [k for k in keys if per_op not in figures.get(k, {})]
        if missing:
            raise PerflabError(f"--per-op {per_op}: run #{missing[0][0]} repetition {missing[0][1]} has no such "
                               "metric (`perflab show RUN` lists them)")
        per = []
        for k in keys:
            values = [instruction_time_per_op(per_op, unit, v) for v, unit in figures[k][per_op]]
            per.append(sum(values) / len(values))
    profiled = sorted({rid for rid, _ in keys})
    return sel, profiled, [reps[k] for k in keys], per, names[0], per_op


def instruction_view(store, base: str, head: str | None, benchmark: str | None, top: int,
                     per_op: str | None = None) -> InstructionView:
    """The functions whose instructions changed most between BASE and HEAD (HEAD None: BASE's own,
    largest first), per operation of the benchmark where its figure says what one took."""
    from perflab.stats.profile import compare_instructions

    runs = _runs(store, benchmark)
    sides = [_instruction_side(store, base, runs, per_op, True)]
    metric = sides[0][5]          # the base's: both sides per operation of the same figure
    if head is not None:
        sides.append(_instruction_side(store, head, runs, metric, False))
    (bsel, bruns, brows, bper, bbench, _) = sides[0]
    (hsel, hruns, hrows, hper, hbench, _) = sides[-1]
    if head is None:
        result = compare_instructions(brows, brows, bper, bper, top=None)
        result.symbols.sort(key=lambda r: (-r.base, r.symbol))
        result.symbols = result.symbols[:top]
    else:
        result = compare_instructions(brows, hrows, bper, hper, top=top)
    what = f"instructions per operation (from {metric})" if result.per == "operation" else "instructions per window"
    counted = []
    runs_of = [r for s in sides for r in s[0].runs if r.id in set(s[1])]
    if any((getattr(r, "params", None) or {}).get("vm") for r in runs_of):
        counted.append("by QEMU in the guest (kernel functions, [user] the whole of user space)")
    if any((getattr(r, "params", None) or {}).get("measure") for r in runs_of):
        counted.append("by valgrind on this machine (the process's user-space functions)")
    header = [f"insn-profile of {bbench}: " + (f"{_label(bsel, bruns, brows)}" if head is None else
                                               f"base {_label(bsel, bruns, brows)}, head {_label(hsel, hruns, hrows)}"),
              f"{what}; counted, not sampled, " + (" and ".join(counted) or "by QEMU or valgrind")]
    notes = []
    for sel in {id(s[0]): s[0] for s in sides}.values():
        for r in sel.runs:
            record = (getattr(r, "monitors", None) or {}).get(INSN) or {}
            notes.extend(n for n in record.get("notes", []) if n not in notes)
    return InstructionView(result, bsel.label, hsel.label, header + notes)

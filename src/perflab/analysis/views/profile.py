"""`perflab report profile`'s view: one selection's perf-profile, or two selections' shares compared;
the instructions per function (insn-profile) of one or two selections. Also the robot mail's "where".

Per testcase: the atomic jobs an operand selects are split by (benchmark, parameters that define
what is measured: analysis.selection.params_key), one section each; nothing is pooled across
testcases (a page_fault1 profile under a signal1 headline explains nothing). Each section says
once which window its figures cover (perflab.monitors.windows); a base and head counted over
different windows are not set side by side. In an instruction diff, a function renamed between the
sides (`cgroup_rstat_updated` -> `__cgroup_rstat_updated`, `.part.N`, `.isra.N`, `.constprop.N`,
`.cold`) is one row, and a row whose part of the change exceeds the whole carries what the other
rows moved. Everything is computed here; report.profile formats.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

from perflab.core.errors import PerflabError

PROFILE = "perf-profile"
INSN = "insn-profile"


# -- testcases: the atomic jobs an operand selects, apart ------------------------------------------

@dataclass
class Testcase:
    """One (benchmark, parameters) of a selection: its runs, and their repetitions' rows."""

    key: tuple[str, str]                 # (benchmark, params_key)
    params: dict
    runs: list = field(default_factory=list)
    rows: dict = field(default_factory=dict)        # (run id, repetition) -> row

    @property
    def benchmark(self) -> str:
        return self.key[0]

    @property
    def profiled(self) -> list[int]:
        return sorted({rid for rid, _ in self.rows})

    def size(self) -> str:
        n, reps = len(self.profiled), len(self.rows)
        return f"{n} run{'s' if n != 1 else ''}, {reps} repetition{'s' if reps != 1 else ''}"


def _split(sel, rows_of: dict[tuple[int, int], dict], among: list | None = None) -> dict[tuple[str, str], Testcase]:
    """The selection's rows (per (run, repetition)) by testcase and variant: an operand's runs of
    one testcase on two kernels (`kernel=6.1.0-47` selects amd64 and rt) are two sections, their
    parameters gaining `variant` (analysis.selection.variant_keys), never one pooled profile.
    `among`: both operands' selections, so the variants are labelled as compare labels them (one
    kernel against a tag of several: `variant=amd64` on both sides)."""
    from perflab.analysis.selection import variant_keys

    run_of = {r.id: r for r in sel.runs}
    keys = variant_keys(sel.runs, variants=sel.variants, among=among)
    out: dict[tuple[str, str], Testcase] = {}
    for (rid, rep), row in sorted(rows_of.items()):
        run = run_of[rid]
        key = keys[rid][1:]
        case = out.get(key)
        if case is None:
            case = out[key] = Testcase(key, json.loads(key[1]))
        if run not in case.runs:
            case.runs.append(run)
        case.rows[(rid, rep)] = row
    return out


def _names(keys: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """Each testcase's name among the others shown (analysis.naming: the parameters that tell them apart)."""
    from perflab.analysis import naming

    return dict(zip(keys, naming.names([(b, p) for b, p in keys])))


def _pairs(base: dict, head: dict, first: tuple[str, str] | None) -> tuple[list[tuple], list[str]]:
    """[(key, base testcase, head testcase)] of the testcases both sides have (`first` leading, then
    base order), and the lines naming those on one side only. Each side with one testcase only, of
    different parameters: those two are paired, and the note says so (as `compare` pairs them)."""
    if len(base) == 1 and len(head) == 1 and set(base) != set(head):
        (bk, b), (hk, h) = next(iter(base.items())), next(iter(head.items()))
        names = _names([bk, hk])
        return [(bk, b, h)], [f"each side has one testcase: base {names[bk]} paired with head {names[hk]}"]
    keys = [k for k in base if k in head]
    if first is not None:
        # The headline's testcase leads, each of its variants (their parameters add `variant`).
        keys.sort(key=lambda k: k != first and _without_variant(k) != first)
    names = _names(list({**base, **head}))
    only = [f"only in the {side}: {names[k]} (not compared)" for side, cases, other in
            (("base", base, head), ("head", head, base)) for k in cases if k not in other]
    return [(k, base[k], head[k]) for k in keys], only


def _without_variant(key: tuple[str, str]) -> tuple[str, str]:
    from perflab.analysis.selection import VARIANT_KEY

    params = json.loads(key[1])
    params.pop(VARIANT_KEY, None)
    return key[0], json.dumps(params, sort_keys=True, default=str)


def _record_notes(runs, monitor: str) -> list[str]:
    """The monitor's notes of these runs, each once, without the window (said apart)."""
    from perflab.monitors.windows import notes_without_window

    notes: list[str] = []
    for r in runs:
        records = getattr(r, "monitors", None)
        record = records.get(monitor) if isinstance(records, dict) else None
        said = record.get("notes") if isinstance(record, dict) else None
        notes.extend(n for n in notes_without_window(said if isinstance(said, list) else []) if n not in notes)
    return notes


def _window(runs, monitor: str, default: str | None = None) -> str | None:
    """The window the runs' `monitor` figures cover, as said (one text; several joined with " and ")."""
    from perflab.monitors.windows import TEXT, run_windows

    texts = []
    for r in runs:
        window = run_windows(r).get(monitor)
        if window is None:
            continue
        text = window.text
        if text not in texts:
            texts.append(text)
    if not texts:
        return TEXT.get(default) if default else None
    return " and ".join(texts)


def _windows_apart(base_window: str | None, head_window: str | None) -> str:
    """Why a base and head are not compared, when their windows differ; "" when they are alike."""
    if base_window and head_window and base_window != head_window:
        return (f"not compared: the base was counted over {base_window}, the head over {head_window} "
                "(figures over different windows are not comparable)")
    return ""


def _runs(store, benchmark: str | None):
    return store.find_runs(benchmark=benchmark) if benchmark else store.find_runs()


# -- perf-profile ----------------------------------------------------------------------------------

@dataclass
class ProfileSection:
    """One testcase: its shares compared (result), or one side's profile (shares)."""

    testcase: str                         # its name among the testcases shown
    heading: str                          # the testcase, the runs and repetitions of each side, the window
    result: object | None = None          # stats.profile.ProfileComparison
    shares: object | None = None          # stats.profile.ProfileShares
    not_compared: str = ""                # why there is no result (windows differ)


@dataclass
class ProfileView:
    base_label: str
    head_label: str
    facts: dict[str, tuple[str, str]]     # symbol -> (comm, [k]/[.])
    header: list[str]                     # what is shown, the operands, the monitors' notes
    sections: list[ProfileSection]
    only: list[str] = field(default_factory=list)   # testcases on one side only



def _profile_rows(store, operand: str, runs):
    """(selection, its rows by (run, repetition)) of one operand: perf-profile shares."""
    from perflab.analysis.selection import select

    sel = select(store, operand, runs)
    reps: dict[tuple[int, int], dict] = {}
    for smp in store.samples(sel.run_ids):
        kind, _, symbol = smp.metric.partition(".cycles-pp.")
        if kind not in ("perf-profile.children", "perf-profile.self") or not symbol:
            continue
        reps.setdefault((smp.run_id, smp.repetition), {})[(kind.rsplit(".", 1)[1], symbol)] = smp.value
    if not reps:
        raise PerflabError(f"operand {operand!r} selects {len(sel.runs)} run(s) ({', '.join('#%d' % r.id for r in sel.runs[:5])}"
                           f"{' ...' if len(sel.runs) > 5 else ''}) but none holds perf-profile data; "
                           "run with `--monitor perf-profile`")
    return sel, reps


def _facts(store, cases) -> dict[str, tuple[str, str]]:
    """comm and [k]/[.] of each symbol, from the series rows of the testcases' runs."""
    from perflab.monitors.symbol_rows import symbols_from_series

    facts: dict[str, tuple[str, str]] = {}
    if hasattr(store, "monitor_series"):
        for case in cases:
            for row in store.monitor_series(case.profiled, PROFILE):
                facts.update(symbols_from_series(row.values or {}))
    return facts


def _benchmarks(cases) -> str:
    names = sorted({c.benchmark for c in cases})
    return ", ".join(names)


def profile_side_view(store, operand: str, benchmark: str | None, top: int) -> ProfileView:
    """The `top` symbols by children% of the runs OPERAND selects, per testcase: one profile each,
    as `perf report --children` shows it, means over the repetitions."""
    from perflab.stats.profile import profile_shares

    sel, reps = _profile_rows(store, operand, _runs(store, benchmark))
    cases = _split(sel, reps)
    names = _names(list(cases))
    sections = []
    for key, case in cases.items():
        window = _window(case.runs, PROFILE, "process")
        sections.append(ProfileSection(names[key], f"{names[key]}: {case.size()}; sampled over {window}",
                                       shares=profile_shares(list(case.rows.values()), top=top)))
    header = [f"perf-profile of {_benchmarks(cases.values())}: {sel.label}", *_record_notes(sel.runs, PROFILE)]
    return ProfileView(sel.label, sel.label, _facts(store, cases.values()), header, sections)


def profile_view(store, base: str, head: str, benchmark: str | None, top: int) -> ProfileView:
    """Per testcase both sides ran, the `top` symbols whose share changed most between the runs BASE
    and HEAD select."""
    runs = _runs(store, benchmark)
    (bsel, breps), (hsel, hreps) = (_profile_rows(store, operand, runs) for operand in (base, head))
    bcases, hcases = _split(bsel, breps, [bsel, hsel]), _split(hsel, hreps, [bsel, hsel])
    # scipy is imported only once the operands are known good (a bad one fails fast).
    from perflab.stats.profile import compare_profiles

    pairs, only = _pairs(bcases, hcases, None)
    if not pairs:
        raise PerflabError(f"{base!r} and {head!r} have no testcase in common with perf-profile data: "
                           + "; ".join(only))
    names = _names([k for k, _, _ in pairs])
    sections = []
    for key, b, h in pairs:
        bw, hw = _window(b.runs, PROFILE, "process"), _window(h.runs, PROFILE, "process")
        apart = _windows_apart(bw, hw)
        heading = f"{names[key]}: base {b.size()}, head {h.size()}; sampled over {bw if not apart else bw + ' / ' + hw}"
        result = None if apart else compare_profiles(list(b.rows.values()), list(h.rows.values()), top=top)
        sections.append(ProfileSection(names[key], heading, result=result, not_compared=apart))
    cases = [c for _, b, h in pairs for c in (b, h)]
    header = [f"perf-profile of {_benchmarks(cases)}: base {bsel.label}, head {hsel.label}",
              *_record_notes(bsel.runs + hsel.runs, PROFILE)]
    return ProfileView(bsel.label, hsel.label, _facts(store, cases), header, sections, only)


# -- insn-profile: a guest's instructions per kernel function (perflab.monitors.insns) -------------

# The metric a family's figure per operation is read from when --per-op is not given.
PER_OP_DEFAULT = {"will-it-scale": "will-it-scale.workload"}
TIME_UNITS = {"ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}
SPECIAL = re.compile(r"^\[.*\]$|^\?\?\?$")          # [user], [other], [unknown], ??? are never renamed
# The suffixes a compiler gives a function's clones and parts, repeatable (`foo.isra.0.cold`).
CLONE_SUFFIX = re.compile(r"(\.(?:part|isra|constprop|lto_priv|cold|localalias)(?:\.\d+)?)+$")


def stem(symbol: str) -> str:
    """The function a symbol is a form of: without a compiler's clone suffixes and leading
    underscores (`__cgroup_rstat_updated`, `cgroup_rstat_updated.part.0` -> `cgroup_rstat_updated`)."""
    name = CLONE_SUFFIX.sub("", symbol)
    return name.lstrip("_") or name


@dataclass
class WhereRow:
    """One row of an instruction diff, as shown."""

    symbol: str                  # the function; for a rename, the head's name
    base: float
    head: float
    change: float
    changed: bool                # beyond the range the repetitions spread over
    share: float                 # percent of the whole change (NaN when the whole did not move)
    renamed_from: list[str] = field(default_factory=list)   # the base's names of a renamed function
    renamed_to: list[str] = field(default_factory=list)     # the head's names (several: merged)
    others: float = math.nan     # share beyond ±100%: what the other rows moved together


@dataclass
class InstructionSection:
    testcase: str
    heading: str                 # the testcase, runs and repetitions of each side, the window counted
    per: str = "window"          # "operation" or "window"
    base_total: float = math.nan
    head_total: float = math.nan
    rows: list[WhereRow] = field(default_factory=list)   # largest |change| first (one side: largest first)
    shown_change: float = math.nan
    shown_share: float = math.nan
    compared: int = 0            # rows compared (functions, [user], [other]; a rename counts once)
    renames: int = 0             # renamed functions paired into one row
    not_compared: str = ""       # why there is no diff (windows differ)

    @property
    def total_change(self) -> float:
        return self.head_total - self.base_total


@dataclass
class InstructionView:
    base_label: str
    head_label: str
    header: list[str]            # what is shown, the operands, how it was counted, the monitors' notes
    sections: list[InstructionSection]
    only: list[str] = field(default_factory=list)   # testcases on one side only
    single: bool = False         # one operand: its functions, largest first


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


def _instruction_rows(store, operand: str, runs):
    """(selection, its rows by (run, repetition)) of one operand: (function counts,
    {metric: [(value, unit)]}) per repetition (_split makes them testcases)."""
    from perflab.analysis.selection import select
    from perflab.execution.counted import PREFIX, USER

    sel = select(store, operand, runs)
    reps: dict[tuple[int, int], tuple[dict[str, float], dict]] = {}
    figures: dict[tuple[int, int], dict] = {}
    for smp in store.samples(sel.run_ids):
        key = (smp.run_id, smp.repetition)
        if smp.metric.startswith(PREFIX):
            reps.setdefault(key, ({}, {}))[0][smp.metric[len(PREFIX):]] = smp.value
        elif smp.metric == USER:
            reps.setdefault(key, ({}, {}))[0]["[user]"] = smp.value
        else:
            figures.setdefault(key, {}).setdefault(smp.metric, []).append((smp.value, smp.unit))
    if not reps:
        raise PerflabError(f"operand {operand!r} selects {len(sel.runs)} run(s) but none holds insn-profile data; "
                           "run in a guest with `--vm icount --monitor insn-profile`")
    for key, (_, figs) in reps.items():
        figs.update(figures.get(key, {}))
    return sel, reps


def _per_op(case: Testcase, metric: str | None) -> list[float] | None:
    """Each repetition's instruction-time per operation from `metric`, None without one."""
    if metric is None:
        return None
    per = []
    for (rid, rep), (_, figs) in sorted(case.rows.items()):
        if metric not in figs:
            raise PerflabError(f"--per-op {metric}: run #{rid} repetition {rep} has no such metric "
                               "(`perflab show RUN` lists them)")
        values = [instruction_time_per_op(metric, unit, v) for v, unit in figs[metric]]
        per.append(sum(values) / len(values))
    return per


def _counts(case: Testcase) -> list[dict[str, float]]:
    return [counts for _, (counts, _) in sorted(case.rows.items())]


def pair_renames(rows) -> tuple[list[WhereRow], int]:
    """stats.profile.InstructionChange rows -> WhereRows (share not yet set), a function that left
    the base and one that came in the head under the same stem (leading underscores, clone
    suffixes aside) made one row; several of a stem on either side are merged into one, named
    with all. Returns the rows and how many renames were paired."""
    gone: dict[str, list] = {}
    new: dict[str, list] = {}
    for r in rows:
        if SPECIAL.match(r.symbol):
            continue
        if r.base > 0 and r.head == 0:
            gone.setdefault(stem(r.symbol), []).append(r)
        elif r.base == 0 and r.head > 0:
            new.setdefault(stem(r.symbol), []).append(r)
    merged: dict[int, WhereRow] = {}
    skip: set[int] = set()
    renames = 0
    for key in gone.keys() & new.keys():
        olds, news = gone[key], new[key]
        base, head = sum(r.base for r in olds), sum(r.head for r in news)
        spread = sum(r.spread for r in olds + news)
        change = head - base
        row = WhereRow(news[0].symbol if len(news) == 1 else key, base, head, change,
                       change != 0 and abs(change) > spread, math.nan,
                       renamed_from=[r.symbol for r in olds], renamed_to=[r.symbol for r in news])
        merged[id(olds[0])] = row
        skip.update(id(r) for r in olds + news)
        renames += 1
    out = []
    for r in rows:
        if id(r) in merged:
            out.append(merged[id(r)])
        elif id(r) not in skip:
            out.append(WhereRow(r.symbol, r.base, r.head, r.change, r.changed, math.nan))
    return out, renames


def _shares(rows: list[WhereRow], total: float) -> None:
    """Each row's part of the whole change; beyond ±100%, what the other rows moved together (the
    whole minus the row: they went the other way)."""
    for r in rows:
        r.share = 100.0 * r.change / total if total else math.nan
        if not math.isnan(r.share) and abs(r.share) > 100.0 + 1e-9:
            r.others = total - r.change


def _diff_section(name: str, b: Testcase, h: Testcase, metric: str | None, top: int | None) -> InstructionSection:
    from perflab.stats.profile import compare_instructions

    # valgrind (measure: instructions) has no monitor record: it counts the whole process.
    bw, hw = _window(b.runs, INSN, "process"), _window(h.runs, INSN, "process")
    counted = f"counted over {bw}" if bw and bw == hw else (
        f"counted over {bw or '?'} (base) and {hw or '?'} (head)" if (bw or hw) else "")
    heading = f"{name}: base {b.size()}, head {h.size()}" + (f"; {counted}" if counted else "")
    apart = _windows_apart(bw, hw)
    if apart:
        return InstructionSection(name, heading, not_compared=apart)
    result = compare_instructions(_counts(b), _counts(h), _per_op(b, metric), _per_op(h, metric), top=None)
    rows, renames = pair_renames(result.symbols)
    total = result.total_change
    rows.sort(key=lambda r: (-abs(r.change), -max(r.base, r.head), r.symbol))
    shown = rows[:top] if top is not None else rows
    _shares(shown, total)
    moved = sum(r.change for r in shown)
    return InstructionSection(name, heading, result.per, result.base_total, result.head_total, shown, moved,
                              100.0 * moved / total if total else math.nan, len(rows), renames)


def _one_section(name: str, case: Testcase, metric: str | None, top: int | None) -> InstructionSection:
    from perflab.stats.profile import compare_instructions

    window = _window(case.runs, INSN, "process")
    heading = f"{name}: {case.size()}" + (f"; counted over {window}" if window else "")
    per = _per_op(case, metric)
    result = compare_instructions(_counts(case), _counts(case), per, per, top=None)
    rows = sorted(result.symbols, key=lambda r: (-r.base, r.symbol))
    total = result.base_total
    shown = [WhereRow(r.symbol, r.base, r.base, 0.0, False, 100.0 * r.base / total if total else math.nan)
             for r in rows[:top]]
    return InstructionSection(name, heading, result.per, result.base_total, result.base_total, shown,
                              compared=len(rows))


def _how_counted(runs) -> str:
    from perflab.analysis import variant
    from perflab.monitors.windows import run_windows

    counted = []
    def in_guest(r) -> bool:
        window = run_windows(r).get(INSN)
        return variant.of(r).target.guest or (window is not None and window.guest)

    if any(in_guest(r) for r in runs):
        counted.append("by QEMU in the guest (kernel functions, [user] the whole of user space)")
    if any((getattr(r, "params", None) or {}).get("measure") for r in runs):
        counted.append("by valgrind on this machine (the process's user-space functions)")
    return "counted, not sampled, " + (" and ".join(counted) or "by QEMU or valgrind")


def instruction_view(store, base: str, head: str | None, benchmark: str | None, top: int,
                     per_op: str | None = None, first: tuple[str, dict] | None = None) -> InstructionView:
    """Per testcase, the functions whose instructions changed most between BASE and HEAD (HEAD None:
    BASE's own, largest first), per operation of the benchmark where its figure says what one
    took. `first`: the (benchmark, params) whose section leads (the mail's headline testcase)."""
    from perflab.analysis.selection import params_key

    runs = _runs(store, benchmark)
    bsel, breps = _instruction_rows(store, base, runs)
    if head is None:
        bcases = _split(bsel, breps)
        hsel, hcases = bsel, bcases
        pairs, only = [(k, c, c) for k, c in bcases.items()], []
    else:
        hsel, hreps = _instruction_rows(store, head, runs)
        bcases, hcases = _split(bsel, breps, [bsel, hsel]), _split(hsel, hreps, [bsel, hsel])
        lead = (first[0], params_key(first[1], first[0])) if first else None
        pairs, only = _pairs(bcases, hcases, lead)
        if not pairs:
            raise PerflabError(f"{base!r} and {head!r} have no testcase in common with insn-profile data: "
                               + "; ".join(only))
    names = _names([k for k, _, _ in pairs])
    sections, metrics = [], set()
    for key, b, h in pairs:
        # The figure per operation: --per-op, else the family's own; the base's names it for both.
        metric = per_op or PER_OP_DEFAULT.get(b.benchmark)
        metrics.add(metric)
        section = _one_section(names[key], b, metric, top) if head is None else _diff_section(
            names[key], b, h, metric, top)
        sections.append(section)
    pers = {s.per for s in sections if not s.not_compared}
    if pers == {"operation"}:
        what = f"instructions per operation (from {', '.join(sorted(m for m in metrics if m))})"
    elif pers == {"window"}:
        what = "instructions per window"
    elif not pers:
        what = "instructions"
    else:
        what = "instructions per operation where the benchmark's figure says what one took, else per window"
    cases = [c for _, b, h in pairs for c in (b, h)]
    runs_of = [r for c in cases for r in c.runs]
    sides = f"{bsel.label}" if head is None else f"base {bsel.label}, head {hsel.label}"
    header = [f"insn-profile of {_benchmarks(cases)}: {sides}", f"{what}; {_how_counted(runs_of)}",
              *_record_notes(bsel.runs + (hsel.runs if head is not None else []), INSN)]
    return InstructionView(bsel.label, hsel.label, header, sections, only, single=head is None)

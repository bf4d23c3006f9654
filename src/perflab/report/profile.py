"""`perflab report profile`: perf-profile shares of base and head, the seed's layout; or
one side's profile alone, as `perf report --children` lists it (render_profile_side).

The kernel thread's habit (../shared/reference/fio-paravirt-2017.txt) is
` 63.48% 52.77%  fio  [k] osq_lock`: children%, self%, comm, [k]/[.], symbol.
Here the two percentage pairs of base and head stand side by side, then the
change of each in percentage points (as LKP prints perf-profile changes) and
the significance, then comm, [k]/[.] and the symbol:

         base             head            change
    children   self  children   self  children   self  significance       comm  symbol
      63.48%  52.77%   59.91%  55.42%    -3.57  +2.65  changed (p=0.003)  fio   [k] osq_lock

Numbers come from perflab.stats.profile; this module only formats them.
"""

from __future__ import annotations

import math

from perflab.stats.compare import INSUFFICIENT
from perflab.stats.profile import CHANGED, ProfileComparison, ProfileShares


def _pct(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.2f}%"


def _points(x: float) -> str:
    if math.isnan(x):
        return "~"
    return "0.00" if round(x, 2) == 0 else f"{x:+.2f}"


def _significance(sym) -> str:
    verdict = sym.verdict
    if verdict == INSUFFICIENT:
        return "too few samples"
    p = sym.p_adjusted
    ptext = "" if math.isnan(p) else (f" (p={p:.3f})" if p >= 0.001 else " (p<0.001)")
    return ("changed" if verdict == CHANGED else "~") + ptext


_WORD_ENDS = ",= "
HEADING_WIDTH = 40    # a column heading longer than this is shortened to what tells it apart (_columns)


def _columns(base: str, head: str, width: int) -> tuple[str, str]:
    """Two column headings of at most `width` that never lose what tells them apart: the labels
    whole when they fit; else the words where they differ, the common part around them left as
    "…" (`…cmdline=mitigations=off` against `…cmdline=mitigations=auto`); a part still too wide
    is cut only where both stay apart (two commits: `…1a2b3c4d5e6f7a8b9…`); else `base` and `head`,
    the header naming both whole (a legend)."""
    if (len(base) <= width and len(head) <= width) or base == head:
        return base[:width], head[:width]
    first = next((i for i, (a, b) in enumerate(zip(base, head)) if a != b), min(len(base), len(head)))
    tail = 0
    while tail < min(len(base), len(head)) - first and base[-1 - tail] == head[-1 - tail]:
        tail += 1

    def part(text: str) -> tuple[bool, bool, str]:
        start = max(text.rfind(c, 0, first) for c in _WORD_ENDS) + 1
        if start == first and first in (len(base), len(head)):
            # One label is the other's start (`cmdline=` against `cmdline=mitigations=off`): the word before too.
            start = max(text.rfind(c, 0, start - 1) for c in _WORD_ENDS) + 1
        ends = [i for i in (text.find(c, len(text) - tail) for c in _WORD_ENDS) if i != -1]
        end = min(ends) if ends else len(text)
        return start > 0, end < len(text), text[start:end]

    (b_pre, b_post, b), (h_pre, h_post, h) = part(base), part(head)

    def shown(pre: bool, post: bool, text: str, room: int) -> str:
        cut = len(text) > room
        text = text[:room]
        return ("…" if pre else "") + text + ("…" if post or cut else "")

    room = width - 2
    if max(len(b), len(h)) <= room or b[:room] != h[:room]:
        return shown(b_pre, b_post, b, room), shown(h_pre, h_post, h, room)
    return "base", "head"


def _profile_legend(result: ProfileComparison) -> list[str]:
    lines = []
    if result.base_repetitions < 2 or result.head_repetitions < 2:
        lines.append("# too few samples for a test: at least 2 repetitions with perf-profile data are needed "
                     "on each side")
    else:
        lines.append(f"# significance: Welch's t-test over repetitions, p adjusted (Benjamini-Hochberg) over "
                     f"{result.tested} shares; ~ = no significant change at {result.alpha:g}")
    if result.below_floor:
        lines.append(f"# {result.below_floor} symbols under {result.min_share:g}% children on average not compared")
    return lines


def _profile_table(result: ProfileComparison, base_label: str, head_label: str,
                   facts: dict[str, tuple[str, str]]) -> list[str]:
    if not result.symbols:
        return [f"(no symbol reaches {result.min_share:g}% children on average)"]
    sig = [_significance(s) for s in result.symbols]
    comms = [facts.get(s.symbol, ("?", "?"))[0] for s in result.symbols]
    kinds = [facts.get(s.symbol, ("?", "?"))[1] for s in result.symbols]
    sw = max(len("significance"), *(len(x) for x in sig))
    cw = max(len("comm"), *(len(c) for c in comms))
    # Each side's columns as wide as its heading: the labels whole (kernel=6.1.0-56-amd64,cmdline=
    # against kernel=6.1.0-56-amd64,cmdline=mitigations=off), never cut where they differ.
    base_short, head_short = _columns(base_label, head_label, HEADING_WIDTH)
    bw, hw = max(19, len(base_short) + 1), max(19, len(head_short) + 1)
    lines = ["", f"{base_short:^{bw}}{head_short:^{hw}}{'change':^18}".rstrip(),
             f"{'children':>{bw - 9}}{'self':>9}{'children':>{hw - 9}}{'self':>9}{'children':>10}{'self':>8}  "
             f"{'significance':<{sw}}  {'comm':<{cw}}  symbol"]
    for s, sg, comm, kind in zip(result.symbols, sig, comms, kinds):
        lines.append(f"{_pct(s.children.base):>{bw - 9}}{_pct(s.self.base):>9}"
                     f"{_pct(s.children.head):>{hw - 9}}{_pct(s.self.head):>9}"
                     f"{_points(s.children.change):>10}{_points(s.self.change):>8}  "
                     f"{sg:<{sw}}  {comm:<{cw}}  {kind} {s.symbol}")
    return lines


COMPARED_LEGEND = ("# children% = share of samples whose call chain holds the symbol, self% = whose leaf it is; "
                   "change in percentage points")


def render_profile(result: ProfileComparison, base_label: str, head_label: str, facts: dict[str, tuple[str, str]],
                   header: list[str] | None = None) -> str:
    """One comparison's table. facts: {symbol: (comm, "[k]"|"[.]")} as the monitor recorded them; "?"
    where unknown."""
    lines = [f"# {line}" for line in (header or [])]
    lines += [COMPARED_LEGEND, *_profile_legend(result), *_profile_table(result, base_label, head_label, facts)]
    return "\n".join(lines) + "\n"


def _sections_head(view) -> list[str]:
    lines = [f"# {line}" for line in view.header]
    lines += [f"# {line}" for line in view.only]
    return lines


def render_profile_view(view) -> str:
    """perf-profile of two operands (analysis.views.profile.profile_view): the header once, then one
    section per testcase, headed by its name, runs, repetitions and the window sampled."""
    lines = _sections_head(view) + [COMPARED_LEGEND]
    for section in view.sections:
        lines += ["", f"## {section.heading}"]
        if section.not_compared:
            lines.append(f"# {section.not_compared}")
            continue
        lines += _profile_legend(section.result)
        lines += _profile_table(section.result, view.base_label, view.head_label, view.facts)
    return "\n".join(lines) + "\n"


def _side_table(shares: ProfileShares, facts: dict[str, tuple[str, str]]) -> list[str]:
    lines = []
    if len(shares.symbols) < shares.total:
        lines.append(f"# the {len(shares.symbols)} largest of {shares.total} symbols by children% (--top)")
    if not shares.symbols:
        return lines + ["(no symbol stored)"]
    comms = [facts.get(s.symbol, ("?", "?"))[0] for s in shares.symbols]
    kinds = [facts.get(s.symbol, ("?", "?"))[1] for s in shares.symbols]
    cw = max(len("comm"), *(len(c) for c in comms))
    lines += ["", f"{'children':>10}{'self':>9}  {'comm':<{cw}}  symbol"]
    for s, comm, kind in zip(shares.symbols, comms, kinds):
        lines.append(f"{_pct(s.children):>10}{_pct(s.self):>9}  {comm:<{cw}}  {kind} {s.symbol}")
    return lines


SIDE_LEGEND = "# children% = share of samples whose call chain holds the symbol, self% = whose leaf it is"


def render_profile_side(shares: ProfileShares, facts: dict[str, tuple[str, str]], header: list[str] | None = None) -> str:
    """One profile: children%, self%, comm, [k]/[.] and symbol, largest children% first, the
    columns of `perf report --children` (means over the repetitions). facts as render_profile's."""
    lines = [f"# {line}" for line in (header or [])]
    reps = f"mean{'s' if shares.repetitions != 1 else ''} over {shares.repetitions} " \
           f"repetition{'s' if shares.repetitions != 1 else ''}"
    lines.append(f"{SIDE_LEGEND}; {reps}")
    lines += _side_table(shares, facts)
    return "\n".join(lines) + "\n"


def render_profile_side_view(view) -> str:
    """One operand's perf-profile (analysis.views.profile.profile_side_view), one section per testcase."""
    lines = _sections_head(view) + [f"{SIDE_LEGEND}; means over each testcase's repetitions"]
    for section in view.sections:
        lines += ["", f"## {section.heading}", *_side_table(section.shares, view.facts)]
    return "\n".join(lines) + "\n"


def _count(x: float, whole: bool) -> str:
    """Instructions: whole numbers per window, two decimals per operation (an average)."""
    if math.isnan(x):
        return "-"
    return f"{x:,.0f}" if whole else f"{x:,.2f}"


def _signed(x: float, whole: bool) -> str:
    if math.isnan(x):
        return "~"
    if abs(x) < (0.5 if whole else 0.005):
        return "0"
    return f"{x:+,.0f}" if whole else f"{x:+,.2f}"


def _part(share: float) -> str:
    return "-" if math.isnan(share) else f"{0.0 if abs(share) < 0.05 else share:.1f}%"


def _row_note(r, whole: bool) -> str:
    """What a row's figures alone do not say: a rename, a part beyond the whole, a change within the spread."""
    notes = []
    if r.renamed_from:
        notes.append(f"renamed: {' + '.join(r.renamed_from)} -> {' + '.join(r.renamed_to)}")
    if not math.isnan(r.others):
        notes.append(f"over 100%: the other rows moved {_signed(r.others, whole)} the other way")
    if not r.changed and _signed(r.change, whole) != "0":
        notes.append("within the repetitions' spread")
    return f"  ({'; '.join(notes)})" if notes else ""


def _instruction_section(view, section, moved_only: bool) -> list[str]:
    whole = section.per == "window"
    lines = [f"## {section.heading}"]
    if section.not_compared:
        return lines + [f"# {section.not_compared}"]
    if view.single:
        lines += ["", f"{'per ' + section.per:>16}{'share':>9}  function",
                  f"{_count(section.base_total, whole):>16}{'100.00%':>9}  (all)"]
        lines += [f"{_count(r.base, whole):>16}{_pct(r.share):>9}  {r.symbol}" for r in section.rows]
        lines.append(f"# the {len(section.rows)} largest of {section.compared} rows ({ROWS_NOTE})")
        return lines
    # Columns headed by the whole labels (up to HEADING_WIDTH, else the part that tells them apart).
    base_short, head_short = _columns(view.base_label, view.head_label, HEADING_WIDTH)
    w = max(16, len(base_short) + 1, len(head_short) + 1)
    lines += ["", f"{base_short:>{w}}{head_short:>{w}}{'change':>14}{'of change':>11}  function",
              f"{_count(section.base_total, whole):>{w}}{_count(section.head_total, whole):>{w}}"
              f"{_signed(section.total_change, whole):>14}{_part(100.0 if section.total_change else math.nan):>11}"
              f"  (all, per {section.per})"]
    for r in section.rows:
        if moved_only and _signed(r.change, whole) == "0":
            continue
        lines.append(f"{_count(r.base, whole):>{w}}{_count(r.head, whole):>{w}}{_signed(r.change, whole):>14}"
                     f"{_part(r.share):>11}  {r.symbol}{_row_note(r, whole)}")
    renames = f"; {section.renames} renamed function{'s' if section.renames != 1 else ''} paired" \
        if section.renames else ""
    lines.append(f"# the {len(section.rows)} rows shown account for {_signed(section.shown_change, whole)} of "
                 f"{_signed(section.total_change, whole)} instructions per {section.per} ({_part(section.shown_share)}); "
                 f"{section.compared} rows compared{renames} ({ROWS_NOTE})")
    return lines


ROWS_NOTE = "[user]: user space in a guest, [other]: functions under the stored floor, ???: no symbol"


def render_instructions(view, single: bool = False, moved_only: bool = False) -> str:
    """insn-profile (perflab.analysis.views.profile.instruction_view): the header once, then per
    testcase its heading (runs, repetitions, the window counted) and per function the
    instructions of base and head, the change and its part of the whole change; or one side's
    functions, largest first, with their share of the window. `moved_only`: leave out the rows
    whose change rounds to nothing (the robot's mail)."""
    lines = _sections_head(view)
    for section in view.sections:
        lines += ["", *_instruction_section(view, section, moved_only)]
    return "\n".join(lines) + "\n"

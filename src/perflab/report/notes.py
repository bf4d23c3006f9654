"""What every text layout says beside its table: the FDR families of the
comparison, each metric's caveats in words, and user strings made safe to print.

Formatting only: the counts and caveats come from perflab.analysis.comparison and
perflab.stats.
"""

from __future__ import annotations

from perflab.analysis.comparison import ComparisonResult, MetricRow
from perflab.stats.compare import BLIND, EXACT, MONITOR, NOISY, NOISY_COV, NOT_EXACT, SECONDARY, Comparison
from perflab.stats.descriptive import ESTIMATOR_WORDS, HMEAN, MEAN, MEDIAN
from perflab.stats.descriptive import EXACT as EXACT_FIGURE
from perflab.stats.exact import EXACT_LIMIT
from perflab.core.text import printable

NOTE_LIMIT = 480  # a warning line (it may quote parameters) is bounded, not cut to a cell: room for
#                   the note naming an operand's variants (a dozen labels) whole


def shown(text: object, limit: int | None = None) -> str:
    """A user string (tag, metric, parameter, environment value) as a text layout prints it."""
    return printable(text) if limit is None else printable(text, limit)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def fdr_group_lines(result: ComparisonResult) -> list[str]:
    """One line per head: the size of each FDR family its verdicts were adjusted over."""
    lines = []
    base = shown(result.labels[0])
    for label, groups in zip(result.labels[1:], result.fdr_groups):
        parts = []
        untested = exact = 0
        for group in groups:
            exact += group.exact
            if group.name == MONITOR:
                what = (_plural(group.tested + group.informational, "monitor metric")
                        + f" (two-sided, minimum effect {result.monitor_threshold * 100:g}%), a family of their own")
            else:
                what = _plural(group.tested, f"{group.name} metric")
                if group.informational:
                    what += f" + {group.informational} informational (two-sided)"
                if group.name == SECONDARY:
                    what += ", a family of their own"
            parts.append(what)
            untested += group.untested
        if untested:
            parts.append(f"{untested} not tested (too few samples)")
        if exact:
            parts.append(f"{_plural(exact, 'exact metric')} (a ratio against the resolution, outside the adjustment; "
                         f"minimum effect {result.exact_minimum * 100:g}%)")
        if result.monitors_dropped:
            parts.append(f"{_plural(result.monitors_dropped, 'monitor metric')} left out (--monitors none)")
        lines.append(f"FDR family of {shown(label)} vs {base}: {'; '.join(parts) or 'no metric'}"
                     f"; alpha {result.alpha:g} per direction, minimum effect {result.threshold * 100:g}%")
    if result.primary:
        lines.append("primary metrics: " + ", ".join(shown(g) for g in result.primary) + " (--primary)")
    return lines


SUPERSCRIPTS = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")
# Beyond this, a "detectable change" is no figure to quote: the samples cannot tell.
UNDETECTABLE_ABOVE = 1.0


def caveat_text(w: str, cmp: Comparison | None = None) -> str:
    """A caveat as a footnote says it: without the figures of one row where they would keep
    rows from sharing it (the row shows them), and a detectable change beyond 100% said as
    what it means."""
    kind = getattr(w, "kind", None)
    if kind == BLIND and cmp is not None:
        if not cmp.detectable <= UNDETECTABLE_ABOVE:
            return "cannot detect changes of this size with these samples (90% power needs a change beyond 100%)"
        return w.split(":")[0] + " with these samples (90% power)"
    if kind == NOISY:
        # Which side is noisy is the point (issue 33); its CoV is the row's, not the footnote's.
        whose = "the base's CoV" if noisy_side(w) == "base" else "CoV"
        return f"noisy: {whose} above {NOISY_COV * 100:g}%"
    if kind == EXACT:
        return w.split(" (")[0].split(" with resolution")[0] + " against its resolution, no t-test"
    if kind == NOT_EXACT:
        # The row's own spread is in the comparison; the footnote is shared by every such row.
        return f"not exact: an exact figure whose samples disagree beyond {EXACT_LIMIT * 100:g}%: compared statistically"
    return str(w)


def noisy_side(w: str) -> str:
    """The side a caveat is about: "base" for a noisy base (perflab.stats.compare sets `side`
    on its NOISY caveats), "head" otherwise."""
    return getattr(w, "side", "head")


class Footnotes:
    """Numbered footnotes, one per distinct text, in order of first use (benchstat's way).

    `mark_row` also keeps the metrics each footnote marks, for footnotes that list them."""

    def __init__(self):
        self.texts: list[str] = []
        self.names: dict[str, list[str]] = {}

    def mark_row(self, result: ComparisonResult, row: MetricRow, name) -> str:
        """The marks of every caveat of a printed row (all its heads), remembering the row's name."""
        pairs = row_caveats(result, row, name)
        for text, who in pairs:
            names = self.names.setdefault(text, [])
            if who not in names:
                names.append(who)
        return self.mark(text for text, _who in pairs)

    def named_lines(self, indent: str = "") -> list[str]:
        """The footnotes as caveat_lines words them: "¹ caveat (metric, metric, ...)"."""
        return numbered_lines([(t, self.names.get(t, [])) for t in self.texts], indent)

    def mark(self, texts) -> str:
        marks = []
        for text in texts:
            if text not in self.texts:
                self.texts.append(text)
            mark = str(self.texts.index(text) + 1).translate(SUPERSCRIPTS)
            if mark not in marks:
                marks.append(mark)
        return " " + " ".join(marks) if marks else ""

    def caveats(self, cmp: Comparison | None) -> str:
        """The marks of a comparison's caveats ("" when it has none)."""
        return self.mark([caveat_text(w, cmp) for w in cmp.warnings]) if cmp is not None else ""

    def lines(self, indent: str = "") -> list[str]:
        return [f"{indent}{str(i).translate(SUPERSCRIPTS)} {shown(t, NOTE_LIMIT)}" for i, t in enumerate(self.texts, start=1)]


def caveats(cmp: Comparison | None) -> str:
    """A comparison's caveats in words, "; "-separated ("" when it has none)."""
    return "; ".join(cmp.warnings) if cmp is not None else ""


def row_caveats(result: ComparisonResult, row: MetricRow, name) -> list[tuple[str, str]]:
    """(footnote text, who) for every caveat of one row, over its heads; `name(row)` names the
    metric. With several heads `who` says which side the caveat is about: the head's label, or
    the base's for a noisy base (shared by every head: said once)."""
    out: list[tuple[str, str]] = []
    several = len(result.labels) > 2
    for label, cmp in zip(result.labels[1:], row.heads):
        for w in (cmp.warnings if cmp is not None else ()):
            side = result.labels[0] if noisy_side(w) == "base" else label
            pair = (caveat_text(w, cmp), name(row) + (f" ({shown(side)})" if several else ""))
            if pair not in out:
                out.append(pair)
    return out


def grouped_caveats(result: ComparisonResult, name) -> list[tuple[str, list[str]]]:
    """(caveat, [metric names]) in order of first appearance; `name(row)` names a metric.

    With several heads each name says which side (head, or the base) the caveat is about."""
    groups: dict[str, list[str]] = {}
    for row in result.visible_rows():
        for text, who in row_caveats(result, row, name):
            groups.setdefault(text, []).append(who)
    return list(groups.items())


def caveat_lines(result: ComparisonResult, name, indent: str = "") -> list[str]:
    """The grouped caveats as numbered footnotes: "¹ caveat (metric, metric, ...)"."""
    return numbered_lines(grouped_caveats(result, name), indent)


def numbered_lines(notes: list[tuple[str, list[str]]], indent: str = "") -> list[str]:
    """(caveat, [metric names]) as numbered footnote lines: "¹ caveat (metric, metric, ...)"."""
    return [f"{indent}{str(i).translate(SUPERSCRIPTS)} {shown(w, NOTE_LIMIT)} ({', '.join(names)})"
            for i, (w, names) in enumerate(notes, start=1)]


def secondary_names(rows: list[MetricRow], name) -> list[str]:
    return [name(r) for r in rows if r.fdr_group == SECONDARY]


def monitor_summary(result: ComparisonResult) -> str:
    """What the monitor rows shown are, out of how many: the heading of a layout's monitor part."""
    counts = result.monitor_counts()
    # The window the figures cover, said with them (issue 44): not the benchmark's own measured part.
    window = f"; {result.monitor_windows}" if result.monitor_windows else ""
    if result.monitors == "all":
        return (f"monitors: all {_plural(counts['compared'], 'metric')}, {counts['significant']} changed "
                f"(--monitors all){window}")
    text = f"monitors: {counts['shown']} of {_plural(counts['compared'], 'metric')} changed"
    if counts["noise"]:
        text += f", {counts['noise']} more below the noise floors"
    return text + f" (--monitors all shows every one){window}"


def tail_lines(result: ComparisonResult, indent: str = "") -> list[str]:
    """Groups on one side only and the comparison's own notes, made printable.

    Monitor metrics on one side only (a perf-profile symbol seen in one profile,
    a monitor that ran on one side) are counted per monitor, not listed."""
    lines = [f"{indent}only in {shown(label)}: {shown(what, NOTE_LIMIT)}" for label, what in result.one_sided]
    counts: dict[tuple[str, str | None, str], int] = {}
    for label, monitor, _what, absent_from in result.one_sided_monitors:
        counts[(label, absent_from, monitor)] = counts.get((label, absent_from, monitor), 0) + 1
    for (label, absent_from, monitor), n in counts.items():
        side = shown(label) + (f" (absent from {shown(absent_from)})" if absent_from is not None else "")
        lines.append(f"{indent}only in {side}: {_plural(n, f'{shown(monitor)} metric')} "
                     "(not compared; json lists them in monitor_only_in)")
    lines += [f"{indent}note: {shown(w, NOTE_LIMIT)}" for w in result.warnings]
    return lines


def estimator_legend(names, of: str = "the samples") -> str:
    """One line naming the estimators behind a table's figures (stats.descriptive: Summary.estimator)."""
    names = set(names)
    if HMEAN in names and MEAN in names:
        parts = [f"harmonic mean of {of} for higher-is-better rates, arithmetic mean otherwise"]
    else:
        parts = [f"{ESTIMATOR_WORDS[n]} of {of}" for n in (HMEAN, MEAN) if n in names]
    if MEDIAN in names:
        parts.append(f"{ESTIMATOR_WORDS[MEDIAN]} of {of}")
    if EXACT_FIGURE in names:
        parts.append(ESTIMATOR_WORDS[EXACT_FIGURE] + (" of exact metrics" if parts else f" of {of}"))
    return "figures: " + ("; ".join(parts) or "none")

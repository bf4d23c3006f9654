"""`perflab bisect`'s text: a bisection's result (perflab.core.bisection) in, text out.

`render` is what the command prints on stdout at the end; `step_line` the line said on
stderr as each step is decided. Every figure was computed by the bisection; text from git,
job files and the store is printed with its control characters made visible.
"""

from __future__ import annotations

import math

from perflab.core.bisection import BisectionResult, Commit, SkipCause, StepRecord
from perflab.core.text import printable

# How an untested commit next to the culprit failed, in the words of the "could also be" line.
_FAILED = {SkipCause.BUILD: "does not build", SkipCause.BOOT: "does not boot"}
_CONFIRMATION_WORDS = {"confirmed": "confirmed", "refuted": "refuted: it is at its parent's level",
                       "undecided": "undecided: neither at its parent's level nor a full change from it"}
_BETWEEN = " (it differs from both ends: a partial change, or two changes? the nearer end wins)"


def size_in_words(x: float) -> str:
    """A size of change in words: 1.4% / 23% / 140%."""
    if not math.isfinite(x):
        return "no change at all"
    return f"{x * 100:.2g}%" if x < 0.1 else f"{x * 100:.0f}%"


def _pct(x: float | None) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x * 100:+.2f}%"


def _num(value: float | None) -> str:
    """Four significant figures, as the command line prints a value (cli.common.fmt_num)."""
    if value is None:
        return "-"
    if value == 0:
        return "0"
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def step_line(number: int, commit: Commit, step: StepRecord, ends_n: tuple[int, int]) -> str:
    """A decided step, as said while the bisection runs; `ends_n`: the ends' samples so far."""
    head = f"step {number}: {commit.sha[:12]} '{printable(commit.subject, 50)}'"
    if step.verdict == "skip":
        return f"{head}: skipped ({printable(step.why, 120)})"
    if step.exact:
        where = "midway within the resolution: the closer end wins" if step.forced else "exact"
        return (f"{head}: {step.verdict} after {step.n} run{'' if step.n == 1 else 's'} "
                f"(position {step.position:+.2f}; {where})" + (_BETWEEN if step.between else ""))
    if step.corrected:
        return (f"{head}: {step.verdict}, corrected: measured again in pairs with good after a refuted "
                f"confirmation (P(bad)={step.p_bad:.4f}, position {step.position:+.2f}); its first runs said "
                f"{'good' if step.verdict == 'bad' else 'bad'}")
    flag = " (undecided at the run limit: the closer end wins)" if step.forced else ""
    if step.paired:
        flag += " (paired with good)"
    if step.between:
        flag += _BETWEEN
    return (f"{head}: {step.verdict} after {step.n} runs (P(bad)={step.p_bad:.4f}, position "
            f"{step.position:+.2f}; ends now n={ends_n[0]}+{ends_n[1]}){flag}")


def render(result: BisectionResult) -> str:
    """The bisection's result as `perflab bisect` prints it: ends, the first bad commit and its
    evidence (or why none was named), runs used, git bisect's log."""
    r = result
    lines = [f"bisection {r.id} of {printable(r.metric, None)} in {printable(r.repo, None)} "
             f"(runs tagged {printable(r.tag, None)})"]
    lines.append(_ends(r))
    if r.exact_note:
        lines.append(f"exact: {printable(r.exact_note, None)}")
    lines += [f"noise: {printable(finding, None)}" for finding in r.noise]
    if r.culprit is not None:
        c = r.culprit
        lines.append(f"first bad commit: {c.sha}" + (" (the first measured bad one)" if r.ambiguous_with else ""))
        lines += _named(r, c)
        lines.append(f"  compare: perflab compare tag={printable(r.tag, None)},commit={r.good[:12]} "
                     f"tag={printable(r.tag, None)},commit={c.sha[:12]}")
        if r.change_kind:
            lines.append(f"  kind of change: {printable(r.change_kind, None)}")
        if r.revert_check:
            lines.append(f"  revert check: {printable(r.revert_check, None)}")
    elif r.unconfirmed is not None:
        c = r.unconfirmed
        named = "the first measured bad commit is" if r.ambiguous_with else "git bisect named"
        lines.append(f"could not confirm a first bad commit: {named} {c.sha}")
        lines += _named(r, c)
    else:
        lines.append("no single first bad commit: only skipped commits are left; the first bad commit is one of:")
        lines += [f"  {c.sha[:12]} {printable(c.subject, None)} ({printable(c.author, None)})" for c in r.candidates]
    lines.append(f"runs: {r.runs_used} over {r.commits_measured} commits measured "
                 f"(a fixed 10 runs per commit would take {10 * r.commits_measured}); "
                 f"{r.skipped} commit{'' if r.skipped == 1 else 's'} skipped")
    lines.append("git bisect log:")
    lines += [f"  {printable(line, None)}" for line in r.log.splitlines()]
    return "\n".join(lines) + "\n"


def _ends(r: BisectionResult) -> str:
    e = r.ends
    head = f"ends: good {r.good[:12]} -> bad {r.bad[:12]}: {_pct(e.change)}"
    if r.exact is not None:
        return (f"{head} (exact: resolution {r.exact.resolution * 100:.2g}%, a change is called beyond "
                f"{e.detectable * 100:.2g}%; n={e.n_good}+{e.n_bad})")
    return (f"{head} [{_pct(e.ci[0])}, {_pct(e.ci[1])}] (p={e.p_value:.2g}, n={e.n_good}+{e.n_bad}; "
            f"could detect {size_in_words(e.detectable)} with 90% power)")


def _named(r: BisectionResult, c: Commit) -> list[str]:
    """The named commit: who and when, what else it could be, its evidence and its confirmation."""
    lines = [f"  subject: {printable(c.subject, None)}",
             f"  author:  {printable(c.author, None)}   date: {printable(c.date, None)}"]
    for u in r.ambiguous_with:
        why = u.why.splitlines()[0] if u.why else ""
        what = _FAILED.get(u.cause, "could not be measured")
        why = why.removeprefix("--build failed: ")
        lines.append(f"  could also be: {u.sha[:12]} {printable(u.subject, 60)} ({what}: {printable(why, 100)})")
    return lines + _evidence(r) + _confirmation(r)


def _parent_word(r: BisectionResult) -> str:
    """What the culprit was judged against: its parent, or its nearest measured good ancestor when the
    commits between could not be measured."""
    return "its nearest measured good ancestor" if r.ambiguous_with else "its parent"


def _evidence(r: BisectionResult) -> list[str]:
    ev = r.evidence
    if ev is None:
        return []
    metric = printable(r.metric, None)
    against = f"{metric}: good {_num(ev.good_mean)} (n={ev.n_good}) -> {_num(ev.culprit_mean)} (n={ev.n_culprit})"
    if ev.exact:
        return [f"  {against}: {_pct(ev.change)} ± {ev.resolution * 100:.2g}% ({ev.verdict}, exact)",
                f"  {_parent_word(r)} is the good end" if ev.parent_is_good_end
                else f"  {_parent_word(r)} {ev.parent[:12]} judged good"]
    ci = [_pct(x) for x in ev.ci] if ev.ci else ["n/a", "n/a"]
    left_out = f"; {ev.dropped} disturbed samples left out" if ev.dropped else ""
    lines = [f"  {against}: {_pct(ev.change)} [{ci[0]}, {ci[1]}] ({ev.verdict}, p={ev.p_value:.2g}{left_out})",
             f"  these samples could detect a change of {size_in_words(ev.detectable)} with 90% power"]
    if ev.p_bad is not None:
        # The per-step rate is Wald's, for the noise the test assumes: said so when the samples broke it.
        void = "; it holds only for steady noise, which these samples are not (see noise:)" if r.noise else ""
        lines.append(f"  judged bad by the sequential test: P(bad)={ev.p_bad:.6f} "
                     f"(error rate per step <= {r.alpha * 100:g}%{void})")
    if ev.parent_is_good_end:
        lines.append(f"  {_parent_word(r)} is the good end")
    elif ev.parent_p_bad is not None:
        lines.append(f"  {_parent_word(r)} {ev.parent[:12]} judged good: P(bad)={ev.parent_p_bad:.6f}")
    for s in r.steps:
        if s.corrected:     # a refuted confirmation sent the bisection on (docs/bisect.md)
            lines.append(f"  {s.commit[:12]} measured again in pairs with good after a refuted confirmation: "
                         f"{s.verdict} (P(bad)={s.p_bad:.6f}); its first runs said "
                         f"{'good' if s.verdict == 'bad' else 'bad'}")
    lines.append("  samples: " + " ".join(_num(v) for v in ev.culprit_values))
    return lines


def _confirmation(r: BisectionResult) -> list[str]:
    ch = r.confirmation
    if ch is None:
        return []
    parent = ch.parent[:12]
    if ch.exact:
        said = "confirmed" if ch.verdict == "confirmed" else "not beyond the resolution in the ends' direction"
        return [f"  against {_parent_word(r)} {parent}: {_pct(ch.change)} (exact: a change is called beyond "
                f"{ch.bar * 100:.2g}%; the ends differ by {_pct(ch.ends_change)}): {said}"]
    if ch.verdict == "failed":
        return [f"  confirmation against {_parent_word(r)} {parent} failed: {printable(ch.why, 200)}"]
    left = f", {ch.dropped} disturbed left out" if ch.dropped else ""
    return [f"  against {_parent_word(r)} {parent} in {ch.pairs} pairs (order random within each pair{left}): "
            f"{_pct(ch.change)} [{_pct(ch.ci[0])}, {_pct(ch.ci[1])}] where the ends differ by "
            f"{_pct(ch.ends_change)}: {_CONFIRMATION_WORDS[ch.verdict]}"]

"""The bisection itself: measure the ends, drive `git bisect`, decide each step with the sequential test.

Every measurement goes through a Measurer (perflab.automate.measurer): the
bisection asks for k runs of a commit in a slot ("good", "bad" or "step") and
gets their samples; whether the commit is built here, on a lab box or booted in
a VM is the Measurer's business. Decisions are a function of the samples, so a
resume replays them from the stored runs (stored ones are used first).
"""

from __future__ import annotations

import math
import random
import re
import signal
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from perflab.automate.bisect import ambiguous, confirm
from perflab.automate.bisect import exact as exactpath
from perflab.automate.bisect.record import BisectError, Record, Settings
from perflab.automate.bisect.trees import measurer_spec, new_worktrees, prune_stale
from perflab.automate.measurer import KernelFailed, Measurer, SourceFailed, measurer_for
from perflab.core.bisection import (
    BisectionResult,
    Commit,
    Confirmation,
    EndsChange,
    Evidence,
    ExactEnds,
    Skip,
    SkipCause,
    StepRecord,
    UntestedCommit,
)
from perflab.core.git import BuildFailed, GitError, Worktrees, commit_info, git
from perflab.core.steps import step
from perflab.report.bisect import size_in_words, step_line
from perflab.stats import sequential
from perflab.stats.sequential import BAD, GOOD


# Passes of git bisect after the first when a confirmation refutes the culprit (confirm.contradicted):
# each corrects one step a disturbance misjudged, and costs the new steps and a confirmation.
RECHECKS = 2


@dataclass
class Result(BisectionResult):
    """What the bisection found (perflab.core.bisection), with the record it is kept in."""

    record: Record = field(kw_only=True)


class CommitFailed(Exception):
    """The benchmark failed at a commit (not a build failure): the commit cannot be judged."""


class Bisection:
    """One bisection: the record, the store, the worktrees and the samples gathered so far."""

    def __init__(self, store, record: Record, say: Callable[[str], None] = lambda _m: None,
                 measurer: Measurer | None = None):
        self.store = store
        self.rec = record
        self.settings = Settings(**record.settings)
        self.say = say
        self.repo = Path(record.repo)
        self.samples: dict[str, list[float]] = defaultdict(list)     # commit -> values used so far
        self.stored: dict[str, deque] = defaultdict(deque)           # commit -> stored values not yet used
        self.stored_failures: dict[str, str] = {}
        self.worktrees: Worktrees | None = None
        self.measurer = measurer     # None: the record's (here, or on its lab box), made by run()
        self.fresh_runs = 0
        self.runs_used = 0
        self.end_pairs: list[tuple[float, float]] = []               # (good, bad) taken one after the other
        self.pairs: dict[str, list[tuple[float, float]]] = defaultdict(list)   # commit -> (good, commit)
        self.paired = False
        # The order within each pair is random (RMIT); seeded by the bisection so a resume replays it.
        self.rng = random.Random(record.id)
        self.ends_checked: dict[str, int] = {}                       # end -> samples when the ends' check passed
        self.exact: dict | None = None    # set by exact.check_ends when the metric is exact
        self.exact_note = ""
        self._load_stored()

    # -- samples ------------------------------------------------------------------
    def _load_stored(self) -> None:
        runs = self.store.find_runs(tag=self.rec.tag)
        ids = [r.id for r in runs if r.commit]
        by_run = defaultdict(list)
        for row in self.store.samples(ids):
            if row.metric == self.rec.metric:
                by_run[row.run_id].append(row.value)
        for r in runs:
            if not r.commit:
                continue
            if r.status == "failed" and not by_run.get(r.id):
                self.stored_failures.setdefault(r.commit, r.error or "the benchmark failed")
            self.stored[r.commit].extend(by_run.get(r.id, []))

    def measure(self, commit: str, k: int, role: str) -> list[float]:
        """k more samples of `commit`: stored ones first (a resume), then fresh runs."""
        out = []
        queue = self.stored[commit]
        while queue and len(out) < k:
            out.append(queue.popleft())
        if len(out) < k:
            if commit in self.stored_failures and not self.samples[commit] and not out:
                raise CommitFailed(self.stored_failures[commit])
            out.extend(self._run(commit, k - len(out), role))
        self.samples[commit].extend(out)
        self.runs_used += len(out)
        return out

    def _run(self, commit: str, k: int, role: str) -> list[float]:
        """k fresh runs of `commit` through the Measurer, in the slot of its role; their values of the metric."""
        rec = self.rec
        what = {GOOD: "good end", BAD: "bad end", "culprit": "confirming the culprit",
                "parent": "confirming against the culprit's parent"}.get(role, "step")
        job = rec.job.with_(runs=k, tag=rec.tag,
                            comment=f"perflab bisect {rec.id}: {what} {commit[:12]} (metric {rec.metric})")
        try:
            got = self.measurer.measure(commit, [job], slot=role if role in (GOOD, BAD, "culprit", "parent")
                                        else "step")[0]
        except SourceFailed as e:
            raise BisectError(f"box {rec.box}: {e.error or 'the job was cancelled'}") from None
        if got.status == "cancelled":
            raise BisectError(f"box {rec.box}: {got.error or 'the job was cancelled'}")
        values = got.values.get(rec.metric, [])
        self.fresh_runs += len(values)
        if not values and (got.status != "done" or not got.runs):
            raise CommitFailed(got.error or f"box {rec.box} produced no run")
        if not values:
            where = self.measurer.place
            # Here the run's other metrics are at hand to list; a box's message has always been shorter.
            produced = "" if where else f"; it produced: {', '.join(sorted(got.values)) or 'nothing'}"
            raise BisectError(f"--metric {rec.metric}: the job at {commit[:12]}{where} did not produce it{produced}")
        return values

    # -- the ends --------------------------------------------------------------------
    def check_ends(self) -> sequential.EndsVerdict:
        s = self.settings
        good, bad = self.rec.good, self.rec.bad
        if s.exact != "off":
            verdict = exactpath.check_ends(self)
            if verdict is not None and not verdict.differ:
                raise EndsDoNotDiffer(verdict)
            if verdict is not None:
                return verdict
        verdict = None
        for look in range(s.ends_looks):
            target = s.ends_start * 2 ** look
            # The ends in pairs, one run right after the other, the order alternating: drift of the
            # machine hits both alike, and a pair shares the machine's level of the moment.
            while len(self.end_pairs) < target:
                self._end_pair(starting=True)
            g, b = (list(x) for x in zip(*self.end_pairs))
            pays, gain = sequential.pairing_pays(g, b)
            paired = sequential.ends_differ_paired(g, b, s.ends_alpha, s.ends_looks, s.threshold)
            unpaired = sequential.ends_differ(self.samples[good], self.samples[bad], s.ends_alpha, s.ends_looks,
                                              s.threshold)
            # Auto: pairs when their runs move together, and also when single runs were disturbed or
            # tell another story than the pairs (a change of the machine's speed among the first
            # runs splits each end's samples between two levels: the single runs then show a
            # change that is not there).
            moved = unpaired.dropped > 0 or (math.isfinite(paired.ci[0]) and unpaired.differ
                                             and not paired.ci[0] <= unpaired.change <= paired.ci[1])
            self.paired = s.pairing == "on" or s.local_ends or (s.pairing == "auto" and (pays or moved))
            verdict = paired if self.paired else unpaired
            self.say(f"ends: good {good[:12]} n={verdict.n_good}, bad {bad[:12]} n={verdict.n_bad}: "
                     f"{verdict.change * 100:+.2f}% (p={verdict.p_value:.2g}, "
                     f"{'differ' if verdict.differ else verdict.reason}; "
                     f"{'paired' if self.paired else 'unpaired'}: correlation of a pair's runs {gain:+.2f})")
            if verdict.differ:
                self.ends_checked = {good: len(self.samples[good]), bad: len(self.samples[bad])}
                return verdict
        assert verdict is not None
        raise EndsDoNotDiffer(verdict)

    def _one(self, commit: str, role: str) -> float:
        """One run's value of `commit` (the mean, when a run gives several samples of the metric)."""
        values = self.measure(commit, 1, role)
        return sum(values) / len(values)

    def _end_pair(self, starting: bool = False) -> None:
        good, bad = self.rec.good, self.rec.bad
        order = ((good, GOOD), (bad, BAD)) if self.rng.random() < 0.5 else ((bad, BAD), (good, GOOD))
        got = {}
        for commit, role in order:
            try:
                got[role] = self._one(commit, role)
            except BuildFailed as e:
                raise BisectError(f"--build {self.rec.build!r} fails at the {role} end "
                                  f"{commit[:12]}: {str(e).removeprefix('--build failed: ')}") from None
            except CommitFailed as e:
                raise BisectError(f"the job fails at the {role} end {commit[:12]}: {e}") from None
        self.end_pairs.append((got[GOOD], got[BAD]))

    def _step_pair(self, commit: str, role: str = "step") -> None:
        pairs = self.pairs[commit]
        order = ((commit, role), (self.rec.good, GOOD)) if self.rng.random() < 0.5 else \
            ((self.rec.good, GOOD), (commit, role))
        got = {r: self._one(c, r) for c, r in order}
        pairs.append((got[GOOD], got[role]))

    def _decide_paired(self, commit: str, role: str = "step") -> StepRecord:
        """Measure `commit` in pairs with good until the paired sequential test calls it (or max_step
        pairs); `role`: the worktree it is measured in (a step's, or the confirmation's)."""
        import numpy as np

        s = self.settings
        while len(self.pairs[commit]) < s.min_step:
            self._step_pair(commit, role)
        while True:
            # One scale for every pair (logs when every value measured in pairs is positive),
            # each pair's difference taken second minus first: bad - good, commit - good.
            logged = all(v > 0 for pairs in (self.end_pairs, *self.pairs.values()) for pair in pairs for v in pair)

            def differences(pairs):
                a = np.array(pairs, dtype=float)
                return np.log(a[:, 1]) - np.log(a[:, 0]) if logged else a[:, 1] - a[:, 0]

            others = [differences(p) for c, p in self.pairs.items() if c != commit and p]
            v = sequential.classify_paired(differences(self.end_pairs), differences(self.pairs[commit]), s.alpha,
                                           s.min_step, others)
            n = len(self.samples[commit])
            if v.verdict is not None:
                return StepRecord(commit, v.verdict, n, v.llr, v.p_bad, v.position, paired=True, between=v.between)
            if len(self.pairs[commit]) >= s.max_step:
                return StepRecord(commit, BAD if v.llr > 0 else GOOD, n, v.llr, v.p_bad, v.position, forced=True,
                                  paired=True, between=v.between)
            if v.next == "ends" and len(self.end_pairs) < s.max_end:
                self._end_pair()
            else:
                self._step_pair(commit, role)

    def decide_again(self, commit: str, role: str) -> StepRecord:
        """`commit` decided afresh in pairs with good, in `role`'s worktree, its earlier pairs set
        aside (what is in doubt after a refuted confirmation: confirm.contradicted)."""
        while len(self.end_pairs) < self.settings.min_step:
            self._end_pair()
        self.pairs[commit] = []
        return self._decide_paired(commit, role)

    # -- one step ----------------------------------------------------------------------
    def decide(self, commit: str) -> StepRecord:
        """Measure `commit` until the sequential test calls it good or bad (or max_step runs)."""
        if self.exact:
            return StepRecord(commit, **exactpath.decide(self, commit))
        if self.paired:
            return self._decide_paired(commit)
        s = self.settings
        good, bad = self.rec.good, self.rec.bad
        first_good, first_bad = len(self.samples[good]), len(self.samples[bad])
        local = False   # judged against end samples taken alongside it
        if local:
            # commit, good, bad, commit, good, bad ...: each machine state hits all three alike
            for _ in range(s.min_step):
                self.measure(commit, 1, "step")
                self.measure(good, 1, GOOD)
                self.measure(bad, 1, BAD)
        else:
            self.measure(commit, s.min_step, "step")
        while True:
            g = self.samples[good][first_good:] if local else self.samples[good]
            b = self.samples[bad][first_bad:] if local else self.samples[bad]
            if len(g) < s.min_step or len(b) < s.min_step:
                self.measure(good if len(g) <= len(b) else bad, 1, GOOD if len(g) <= len(b) else BAD)
                continue
            v = sequential.classify(g, b, self.samples[commit], s.alpha, s.min_step)
            if v.outside and not local:
                if s.pairing == "auto" and self.end_pairs:
                    # The machine's level has moved since the ends were measured: from here on,
                    # every measurement is a pair taken one run after the other.
                    self.say(f"  {commit[:12]}: its samples lie outside the ends' range (position "
                             f"{v.position:+.2f}): the machine's speed moved; measuring in pairs from here on")
                    self.paired = True
                    return self._decide_paired(commit)
                self.say(f"  {commit[:12]}: its samples lie outside the ends' range (position {v.position:+.2f}): "
                         "measuring the ends again beside it")
                local = True
                continue
            if v.verdict is not None:
                return StepRecord(commit, v.verdict, len(self.samples[commit]), v.llr, v.p_bad, v.position,
                                  drift=local, between=v.between)
            if len(self.samples[commit]) >= s.max_step:
                return StepRecord(commit, BAD if v.llr > 0 else GOOD, len(self.samples[commit]), v.llr, v.p_bad,
                                  v.position, forced=True, drift=local, between=v.between)
            end = {GOOD: good, BAD: bad}.get(v.next)
            if end is not None and (local or len(self.samples[end]) < s.max_end):
                self.measure(end, 1, v.next)
            else:
                self.measure(commit, 1, "step")

    # -- the whole -----------------------------------------------------------------------
    def run(self) -> Result:
        rec = self.rec
        prune_stale(self.repo)
        self.worktrees = new_worktrees(self.repo, rec.id)
        made = self.measurer is None        # a Measurer given (a series') is closed by its owner
        if made:
            self.measurer = measurer_for(self.store, measurer_spec(rec, self.worktrees), self.say)
        try:
            with _sigterm_as_interrupt():
                ends = self.check_ends()
                steps = self._bisect()
                result = self._result(ends, steps)
                for _ in range(RECHECKS):
                    corrected = confirm.contradicted(self, result, steps)
                    if corrected is None:
                        break
                    rec.status = "running"           # a resume without --id finds it again
                    steps = self._bisect(steps, corrected)
                    result = self._result(ends, steps)
                if self.settings.kind:
                    self._kind(result)
                if self.settings.revert:
                    self._revert(result)
                return result
        except EndsDoNotDiffer as e:
            rec.status = "refused"
            rec.save()
            v = e.verdict
            if v.reason.startswith("exact"):
                raise BisectError(f"good {rec.good[:12]} and bad {rec.bad[:12]} do not differ in {rec.metric}: "
                                  f"{v.change * 100:+.4f}% ({v.reason}); these runs would call a change beyond "
                                  f"{v.detectable * 100:.2g}%; refusing to bisect") from None
            raise BisectError(
                f"good {rec.good[:12]} and bad {rec.bad[:12]} do not differ in {rec.metric}: "
                f"{v.change * 100:+.2f}% (p={v.p_value:.2g}, {v.reason}, n={v.n_good}+{v.n_bad}); "
                f"these samples could detect a change of {size_in_words(v.detectable)} with 90% power; "
                "refusing to bisect noise") from None
        except (BisectError, GitError):
            if rec.status == "running" and not self.samples:
                rec.status = "refused"
            rec.save()
            raise
        finally:
            far = getattr(self.measurer, "far", None) if made else None
            if far:
                far.close()      # the commits' trees copied to the SSH machine the steps ran on
            self.worktrees.close()

    def _bisect(self, before: list[StepRecord] = (), corrected: StepRecord | None = None) -> list[StepRecord]:
        """git bisect from the ends, each step decided by the sequential test. `before`: a pass
        before this one, whose verdicts are taken as they were, but `corrected`'s (confirm.contradicted)."""
        rec = self.rec
        # git bisect checks the steps out here; a kernel tree's files are not needed (the Measurer
        # builds each commit in a worktree of its own): a sparse checkout of none of them.
        path = self.worktrees.paths.get("step") or self.worktrees.add("step", rec.good, files=not rec.kernel)
        known = {s.commit: s for s in before}
        if corrected is not None:
            known[corrected.commit] = corrected
            git(path, "bisect", "reset", check=False)
        out = git(path, "bisect", "start", rec.bad, rec.good)
        text = out.stdout + out.stderr
        steps: list[StepRecord] = []
        while not _finished(text):
            commit = git(path, "rev-parse", "HEAD").stdout.strip()
            info = Commit(**commit_info(path, commit))
            skip = rec.skips.get(commit)     # skipped before an interruption: not built again
            step = known.get(commit)         # a later pass: the verdict as it was, or as corrected
            if step is None and skip is None:
                try:
                    step = self.decide(commit)
                except KernelFailed as e:
                    skip = Skip(str(e), SkipCause.BOOT, e.console_tail)
                except BuildFailed as e:
                    skip = Skip(str(e), SkipCause.BUILD)
                except CommitFailed as e:
                    skip = Skip(str(e), SkipCause.RUN)
            if step is None:
                rec.skips[commit] = skip
                step = StepRecord(commit, "skip", why=skip.why, console=skip.console, cause=skip.cause)
            steps.append(step)
            rec.steps = list(steps)
            rec.save()
            if commit not in known or step is corrected:
                self.say(step_line(len(steps), info, step, (len(self.samples[rec.good]), len(self.samples[rec.bad]))))
            out = git(path, "bisect", step.verdict, commit, check=False)
            text = out.stdout + out.stderr
            if out.returncode != 0 and not _finished(text):
                raise BisectError(f"git bisect {step.verdict} {commit[:12]}: "
                                  f"{(text.strip() or 'failed').splitlines()[-1]}")
        self._final_output = text
        return steps

    def _result(self, ends: sequential.EndsVerdict, steps: list[StepRecord]) -> Result:
        rec = self.rec
        path = self.worktrees.paths["step"]
        log = git(path, "bisect", "log").stdout
        text = getattr(self, "_final_output", "")
        first = re.search(r"^([0-9a-f]{40}) is the first bad commit", text, re.MULTILINE)
        culprit: Commit | None = None
        unconfirmed: Commit | None = None
        candidates: list[Commit] = []
        checked: Confirmation | None = None
        also: list[UntestedCommit] = []
        parent = None
        if first:
            culprit = self._commit(first.group(1))
        else:
            shas = re.findall(r"^([0-9a-f]{40})$", text, re.MULTILINE)
            candidates = [self._commit(sha) for sha in shas]
            found = ambiguous.first_measured_bad(self, shas, steps)
            if found is not None:
                culprit = self._commit(found[0])
                also = [self._untested(sha) for sha in found[1]]
                parent = ambiguous.nearest_good(self, found[0], steps)
                self.say(f"only untested commits are left beside {found[0][:12]}, the first measured bad "
                         f"commit: it is named, and {', '.join(c.sha[:12] for c in also)} could also be "
                         "the first bad commit")
        noise = [] if self.exact else confirm.noise_findings(self)
        for finding in noise:
            self.say(f"noise: {finding}")
        if culprit is not None:
            checked = self._confirm(culprit.sha, parent)
            if checked.verdict != "confirmed":
                culprit, unconfirmed = None, culprit
        named = culprit or unconfirmed
        if self.exact and named:
            evidence = _typed(Evidence, exactpath.evidence(self, named.sha, checked.parent))
        else:
            evidence = self._evidence(named.sha if named else None, steps, parent)
        result = Result(
            id=rec.id, repo=rec.repo, metric=rec.metric, tag=rec.tag, good=rec.good, bad=rec.bad,
            alpha=self.settings.alpha,
            ends=EndsChange(ends.change, tuple(ends.ci), ends.p_value, ends.detectable, ends.n_good, ends.n_bad),
            culprit=culprit, candidates=candidates, evidence=evidence, log=log, runs_used=self.runs_used,
            commits_measured=self._measured(), steps=steps, skipped=len(rec.skips), noise=noise,
            confirmation=checked, unconfirmed=unconfirmed,
            exact=_typed(ExactEnds, self.exact) if self.exact else None, exact_note=self.exact_note,
            ambiguous_with=also, record=rec)
        rec.status = "done"
        rec.result = _stored(result)
        rec.save()
        return result

    def _kind(self, result: Result) -> None:
        """The culprit's change against its parent labelled by counting both (automate.change_kind)."""
        from perflab.automate import change_kind

        rec = self.rec
        if result.culprit is None or result.evidence is None:
            return
        got = change_kind.label_or_why(self.measurer, rec.job, rec.metric, rec.direction,
                                       result.evidence.parent or rec.good, result.culprit.sha, result.evidence.change,
                                       exact=exactpath.counted(self.exact), tag=f"{rec.tag}-kind", seed=rec.id, say=self.say,
                                       slots=("parent", "culprit"))
        result.change_kind = change_kind.sentence_of(got)
        self.say(f"kind of change: {result.change_kind}")
        rec.result["kind"] = change_kind.stored(got)
        rec.save()

    def _revert(self, result: Result) -> None:
        """The culprit reverted on the bad end, measured beside both ends (automate.revert.revert_check)."""
        from perflab.automate.revert import revert_check

        rec = self.rec
        c = result.culprit
        if c is None or c.sha == rec.bad:
            return     # the bad end's own revert is its parent, which the confirmation measured
        check = revert_check(self.repo, rec.bad, rec.good, c.sha, c.subject, f'{c.sha[:12]} ("{c.subject}")',
                             self.measurer, rec.job, rec.metric, rec.direction, exact_metric=bool(self.exact),
                             tag=rec.tag, seed=rec.id, say=self.say,
                             words=dict(on="bad end", base_name="good end", later="later commits"))
        result.revert_check = check.sentence
        rec.result["revert"] = check.to_dict()
        rec.save()

    def _commit(self, sha: str) -> Commit:
        return Commit(**commit_info(self.repo, sha))

    def _untested(self, sha: str) -> UntestedCommit:
        skip = self.rec.skips.get(sha)
        return UntestedCommit(**commit_info(self.repo, sha), why=skip.why if skip else "",
                              cause=skip.cause if skip else None)

    def _confirm(self, culprit: str, parent: str | None = None) -> Confirmation:
        """The named commit against its parent (or, when that could not be measured, `parent`: its
        nearest measured good ancestor) in randomly ordered pairs (confirm.confirm_culprit)."""
        which = "its parent" if parent is None else "its nearest measured good ancestor"
        parent = parent or git(self.repo, "rev-parse", f"{culprit}^").stdout.strip()
        if self.exact:
            with step(f"confirming {culprit[:12]} against {which} {parent[:12]}"):
                return _typed(Confirmation, exactpath.confirm(self, culprit, parent))
        self.say(f"confirming {culprit[:12]} against {which} {parent[:12]} in pairs, the order random "
                 "within each pair")
        try:
            with step(f"confirming {culprit[:12]} against {which} {parent[:12]} in pairs"):
                checked = confirm.confirm_culprit(self, culprit, parent)
        except (BuildFailed, CommitFailed) as e:
            return Confirmation("failed", parent, culprit, why=str(e))
        self.say(f"confirmation: {checked.verdict} after {checked.pairs} pairs: "
                 f"{checked.change * 100:+.2f}% against the parent, the ends differ by "
                 f"{checked.ends_change * 100:+.2f}%")
        return checked

    def _measured(self) -> int:
        return sum(1 for values in self.samples.values() if values)

    def _evidence(self, culprit: str | None, steps: list[StepRecord], parent: str | None = None) -> Evidence | None:
        import numpy as np

        from perflab.stats.compare import compare_many
        from perflab.stats.power import detectable_change

        if culprit is None or not self.samples.get(culprit):
            return None

        # The same samples the sequential test judged by: disturbed ones left out.
        (g, c), logged = sequential.transform(self.samples[self.rec.good], self.samples[culprit])
        (g, c), dropped = sequential.drop_disturbed(g, c)
        good, values = (np.exp(g), np.exp(c)) if logged else (g, c)
        cmp = compare_many([(good, values, self.rec.direction)], alpha=0.05, threshold=self.settings.threshold)[0]
        sd = sequential.pooled_sd(g, c)
        decided = next((s for s in steps if s.commit == culprit), None)
        if parent is None:
            parent = git(self.repo, "rev-parse", f"{culprit}^").stdout.strip() if culprit != self.rec.good else ""
        parent_step = next((s for s in steps if s.commit == parent), None)
        return Evidence(
            n_good=len(good), n_culprit=len(values), culprit_values=list(self.samples[culprit]), dropped=dropped,
            good_mean=cmp.base.mean, culprit_mean=cmp.head.mean, change=cmp.pct_change,
            ci=tuple(cmp.ci) if cmp.ci is not None else None, p_value=cmp.p_value, verdict=cmp.verdict,
            detectable=detectable_change(len(good), len(values), sd, 0.05, logged=logged, scale=cmp.base.mean),
            llr=decided.llr if decided else None, p_bad=decided.p_bad if decided else None,
            parent=parent, parent_p_bad=parent_step.p_bad if parent_step else None,
            parent_is_good_end=parent == self.rec.good)


def _typed(cls, values: dict):
    """One of the result's dataclasses from the dict exact.py gives (its keys are the field names)."""
    names = {f.name for f in fields(cls)}
    return cls(**{k: tuple(v) if k == "ci" and isinstance(v, list) else v for k, v in values.items() if k in names})


def _stored(result: Result) -> dict:
    """The result's JSON form in the record, for a reader of the file (a resume computes it again)."""
    def form(value):
        return asdict(value) if value is not None else None

    # culprit: named and confirmed; ambiguous: the same, with untested commits before it that could
    # also be the first bad one; unconfirmed: named but not confirmed; candidates: git's list alone.
    return {"state": result.state, "culprit": form(result.culprit),
            "candidates": [asdict(c) for c in result.candidates], "evidence": form(result.evidence) or {},
            "runs_used": result.runs_used, "commits_measured": result.commits_measured, "noise": result.noise,
            "confirmation": form(result.confirmation) or {}, "unconfirmed": form(result.unconfirmed),
            "exact": form(result.exact), "exact_note": result.exact_note,
            "ambiguous_with": [asdict(c) for c in result.ambiguous_with]}


class EndsDoNotDiffer(Exception):
    def __init__(self, verdict: sequential.EndsVerdict):
        self.verdict = verdict
        super().__init__(verdict.reason)


def _finished(text: str) -> bool:
    """Whether git bisect's output says it is done (a first bad commit, or only skipped ones left)."""
    return "is the first bad commit" in text or "only 'skip'ped commits left" in text


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM between runs ends the bisection through the finally blocks (worktrees removed)."""
    from perflab.execution.interrupt import Interrupted

    def handler(signum, _frame):
        raise Interrupted(signum)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


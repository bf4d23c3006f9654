"""The kind of a timed change (perflab.stats.change_kind) and the revert check's judgement
(perflab.automate.revert.judge_revert): the rules on given figures."""

from __future__ import annotations

import math

from perflab.automate.revert import DOES_NOT, PARTLY, RESTORES, judge_revert
from perflab.core.model import HIGHER_IS_BETTER, LOWER_IS_BETTER
from perflab.stats.change_kind import CODE_PATH, NOT_REPRODUCED, TIMING_ONLY, classify, cost_change
from perflab.stats.compare import compare_many

COUNT = [1_000_000.0, 1_000_000.0]


def test_a_count_that_moves_with_the_time_is_the_code_path():
    k = classify(metric="time.elapsed_time", direction=LOWER_IS_BETTER, time_change=0.20, counted_metric="c",
                 base_counts=COUNT, head_counts=[1_180_000.0, 1_180_000.0])
    assert k.label == CODE_PATH and math.isclose(k.share, 0.9) and "accounts for 90%" in k.sentence


def test_a_rate_is_turned_into_its_cost_before_the_count_is_set_against_it():
    # ops/s -20% is +25% cost per operation; instructions +25% explain all of it.
    assert math.isclose(cost_change(-0.2, HIGHER_IS_BETTER), 0.25)
    k = classify(metric="ops", direction=HIGHER_IS_BETTER, time_change=-0.2, counted_metric="c",
                 base_counts=COUNT, head_counts=[1_250_000.0] * 2)
    assert k.label == CODE_PATH and math.isclose(k.share, 1.0)


def test_an_unmoved_count_is_timing_only_when_the_time_holds_and_not_reproduced_when_it_does_not():
    base, slow, same = [10.0, 10.1, 9.9, 10.0, 10.05, 9.95], [13.0, 13.1, 12.9, 13.0, 13.05, 12.95], \
        [10.0, 9.9, 10.1, 10.02, 9.98, 10.0]
    held = compare_many([(base, slow, LOWER_IS_BETTER)], threshold=0.0)[0]
    gone = compare_many([(base, same, LOWER_IS_BETTER)], threshold=0.0)[0]
    args = dict(metric="t", direction=LOWER_IS_BETTER, time_change=0.30, counted_metric="c", base_counts=COUNT,
                head_counts=[1_000_050.0] * 2)
    assert classify(**args, retimed=held).label == TIMING_ONLY
    k = classify(**args, retimed=gone)
    assert k.label == NOT_REPRODUCED and "the first verdict was noise" in k.sentence
    # a count that moved the other way, or by a small share, does not explain the time either
    assert classify(**{**args, "head_counts": [990_000.0] * 2}, retimed=held).label == TIMING_ONLY
    assert classify(**{**args, "head_counts": [1_050_000.0] * 2}, retimed=held).label == TIMING_ONLY


def test_the_revert_is_judged_against_the_base_exactly_and_statistically():
    exact = {"b": [100.0, 100.0], "h": [130.0, 130.0], "r": [100.0, 100.0]}
    assert judge_revert("[PATCH 1/2] x", "m", LOWER_IS_BETTER, "r", exact, "b", "h", True).verdict == RESTORES
    part = judge_revert("[PATCH 1/2] x", "m", LOWER_IS_BETTER, "r", {**exact, "r": [115.0, 115.0]}, "b", "h", True)
    assert part.verdict == PARTLY and math.isclose(part.undone, 0.5) and "50% of the change only" in part.sentence
    kept = judge_revert("[PATCH 1/2] x", "m", LOWER_IS_BETTER, "r", {**exact, "r": [130.0, 130.0]}, "b", "h", True)
    assert kept.verdict == DOES_NOT
    timed = {"b": [10.0, 10.2, 9.8, 10.1, 9.9, 10.0], "h": [20.0, 20.3, 19.7, 20.1, 19.9, 20.0],
             "r": [10.1, 9.9, 10.0, 10.2, 9.8, 10.05]}
    assert judge_revert("p", "m", LOWER_IS_BETTER, "r", timed, "b", "h", False).verdict == RESTORES
    stuck = {**timed, "r": [20.1, 19.9, 20.0, 20.2, 19.8, 20.05]}
    assert judge_revert("p", "m", LOWER_IS_BETTER, "r", stuck, "b", "h", False).verdict == DOES_NOT


def test_a_rate_counted_under_icount_is_a_cost_on_both_sides():
    # per_process_ops -51% timed, -60% as instruction-time: a cost of +150% against +104%.
    k = classify(metric="ops", direction=HIGHER_IS_BETTER, time_change=-0.51, counted_metric="ops",
                 base_counts=[3.3e6, 3.3e6], head_counts=[1.32e6, 1.32e6], counted_direction=HIGHER_IS_BETTER)
    assert k.label == CODE_PATH and 1.4 < k.share < 1.5

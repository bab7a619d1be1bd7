"""A study's looks: each open comparison is decided against group-sequential boundaries, only arms with an
open comparison train the next seeds, the family-wise error holds across comparisons and looks, and the
numbers after a stop account for the looks."""

from __future__ import annotations

import math

import numpy as np
import pytest

from studies.sequential import DECISIONS, LookRecord, SequentialMonitor
from studies.spec.sections import SequentialDesign

SUPERIORITY = SequentialDesign(test="superiority", effect=0.01)  # looks at 3, 5, 7, 9, 10 seeds


def _monitor(design=SUPERIORITY, methods=("a", "b", "ref"), higher_is_better=True) -> SequentialMonitor:
    return SequentialMonitor(
        design, methods=list(methods), reference="ref", higher_is_better=higher_is_better
    )


def _run(monitor: SequentialMonitor, effects: dict[str, float], *, sd=0.01, rng=None) -> dict:
    """Drive a simulated study to its end: a shared seed effect plus per-method noise (paired)."""
    rng = rng or np.random.default_rng(0)
    values: dict[str, dict[int, float]] = {m: {} for m in monitor.methods}
    arms, seeds = list(monitor.methods), monitor.design.seeds_added_at(0)
    while seeds:
        for seed in seeds:
            shared = rng.normal(0.9, sd)
            for arm in arms:
                values[arm][seed] = shared + effects.get(arm, 0.0) + rng.normal(0.0, sd)
        monitor.look(values)
        arms, seeds = monitor.open_arms(), monitor.next_seeds()
    return values


def test_a_large_difference_stops_early_and_only_the_open_arm_and_the_reference_train_on():
    monitor = _monitor()
    values = {"a": {}, "b": {}, "ref": {}}
    for seed in range(3):
        values["ref"][seed] = 0.90 + 0.001 * seed
        values["a"][seed] = 0.30 + 0.001 * seed + 0.0001 * (seed % 2)  # collapsed: far below, tiny spread
        values["b"][seed] = 0.90 + 0.001 * seed + 0.004 * (-1) ** seed
    record = monitor.look(values)
    assert record.look == 1
    assert record.comparisons["a"].decision == "efficacy" and record.comparisons["a"].estimate < 0
    assert record.decisions["a"] == "efficacy"
    assert monitor.comparisons["b"].is_open
    assert record.open_arms == ["b", "ref"] == monitor.open_arms()
    assert monitor.next_seeds() == [3, 4]
    assert not record.final


def test_a_lower_is_better_metric_counts_a_lower_value_as_an_improvement():
    monitor = _monitor(methods=("a", "ref"), higher_is_better=False)
    values = {
        "ref": {s: 1.0 + 0.001 * s for s in range(3)},
        "a": {s: 0.5 + 0.001 * s + 1e-5 * s * s for s in range(3)},
    }
    point = monitor.look(values).comparisons["a"]
    assert point.estimate > 0 and point.z > 0


def test_under_no_effect_the_family_wise_error_stays_at_alpha_across_three_comparisons_and_five_looks():
    rng = np.random.default_rng(7)
    studies, wrong = 1500, 0
    for _ in range(studies):
        monitor = _monitor(methods=("a", "b", "c", "ref"))
        _run(monitor, {}, rng=rng)
        wrong += any(c.rejected for c in monitor.comparisons.values())
    error = wrong / studies
    assert error <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / studies)


def test_under_a_clear_effect_most_studies_stop_before_the_maximum_seeds():
    rng = np.random.default_rng(3)
    trials, rejected, studies = [], 0, 300
    for _ in range(studies):
        monitor = _monitor(methods=("a", "ref"))
        values = _run(monitor, {"a": 0.03}, rng=rng)
        trials.append(sum(len(v) for v in values.values()))
        rejected += monitor.comparisons["a"].decision == "efficacy"
    assert rejected / studies > 0.9
    assert np.mean(trials) < 0.7 * 2 * SUPERIORITY.max_seeds


def test_futility_stops_a_comparison_that_is_level_when_the_effect_of_interest_is_large():
    design = SequentialDesign(test="superiority", effect=0.05)
    rng = np.random.default_rng(11)
    stopped = 0
    for _ in range(100):
        monitor = _monitor(design, methods=("a", "ref"))
        _run(monitor, {}, sd=0.005, rng=rng)
        stopped += monitor.comparisons["a"].decision == "futility"
    assert stopped > 80


def test_without_futility_a_level_comparison_runs_to_the_maximum_seeds():
    design = SequentialDesign(test="superiority", effect=0.05, futility=False)
    monitor = _monitor(design, methods=("a", "ref"))
    values = _run(monitor, {}, sd=0.005, rng=np.random.default_rng(1))
    assert monitor.comparisons["a"].decision in ("max_seeds", "efficacy")
    if monitor.comparisons["a"].decision == "max_seeds":
        assert len(values["a"]) == design.max_seeds
        assert monitor.records[-1].final and monitor.records[-1].open_arms == []


def test_equivalence_is_shown_for_a_level_method_and_refused_for_one_outside_the_margin():
    design = SequentialDesign(test="equivalence", margin=0.02)
    monitor = _monitor(design)
    _run(monitor, {"a": 0.0, "b": -0.2}, sd=0.002, rng=np.random.default_rng(5))
    assert monitor.comparisons["a"].decision == "equivalent"
    assert monitor.comparisons["b"].decision == "not_equivalent"


def test_non_inferiority_is_shown_for_a_method_slightly_worse_than_the_reference_within_the_margin():
    design = SequentialDesign(test="non_inferiority", margin=0.02)
    monitor = _monitor(design, methods=("a", "ref"))
    _run(monitor, {"a": -0.005}, sd=0.002, rng=np.random.default_rng(2))
    assert monitor.comparisons["a"].decision == "non_inferior"


def test_holm_tests_the_remaining_comparisons_at_a_raised_level_once_one_is_rejected():
    monitor = _monitor(methods=("a", "b", "c", "ref"))
    values = {m: {} for m in monitor.methods}
    for seed in range(3):
        values["ref"][seed] = 0.9 + 0.002 * seed
        values["a"][seed] = 0.5 + 0.002 * seed + 1e-5 * seed * seed
        values["b"][seed] = 0.9 + 0.002 * seed + 0.01 * (seed - 1) ** 2
        values["c"][seed] = 0.9 + 0.002 * seed - 0.01 * (seed - 1) ** 2
    record = monitor.look(values)
    assert record.comparisons["a"].level == pytest.approx(0.05 / 3)
    assert record.comparisons["b"].level == pytest.approx(0.05 / 2)  # after a's rejection


def test_a_look_whose_every_new_trial_failed_adds_no_point_and_the_comparison_waits():
    monitor = _monitor(methods=("a", "ref"))
    values = {"a": {0: 0.90, 1: 0.91, 2: 0.90}, "ref": {0: 0.90, 1: 0.905, 2: 0.91}}
    monitor.look(values)
    assert monitor.comparisons["a"].is_open
    second = monitor.look(values)  # seeds 3 and 4 failed for both arms
    assert second.comparisons == {} and second.decisions["a"] == "open"
    assert len(monitor.comparisons["a"].points) == 1


def test_after_a_stop_the_repeated_interval_is_wider_than_the_naive_t_interval():
    rng = np.random.default_rng(4)
    monitor = _monitor(methods=("a", "ref"))
    _run(monitor, {"a": 0.03}, rng=rng)
    (outcome,) = monitor.outcomes()
    point = monitor.comparisons["a"].points[-1]
    from scipy import stats

    naive = stats.t.ppf(0.975, point.seeds - 1) * point.standard_error
    low, high = outcome.interval
    assert high - low > 2 * naive
    assert low < outcome.estimate < high
    assert outcome.p_value is not None and 0 < outcome.p_value < 0.05
    assert outcome.interval_level == pytest.approx(0.95)


def test_every_decision_has_words_and_a_replay_from_stored_records_equals_the_live_monitor():
    monitor = _monitor(methods=("a", "b", "ref"))
    _run(monitor, {"a": 0.03}, rng=np.random.default_rng(9))
    assert all(c.decision in DECISIONS for c in monitor.comparisons.values())
    stored = [LookRecord.from_json(r.to_json()) for r in monitor.records]
    replayed = SequentialMonitor.replay(
        monitor.design, stored, methods=monitor.methods, reference="ref", higher_is_better=True
    )
    assert replayed.to_json() == monitor.to_json()


def test_the_reference_must_be_one_of_the_methods():
    with pytest.raises(ValueError, match="reference"):
        SequentialMonitor(SUPERIORITY, methods=["a", "b"], reference="ref", higher_is_better=True)


def test_an_extra_pair_is_a_comparison_of_its_own_whose_arms_train_while_it_is_open():
    design = SUPERIORITY.model_copy(update={"pairs": [["a", "b"]]})
    monitor = _monitor(design, methods=("a", "b", "c", "ref"))
    assert set(monitor.comparisons) == {"a", "b", "c", "a vs b"}
    # a and b level with the reference and c far below it: c stops early and trains fewer seeds, while
    # a and b train on for their pair.
    values = _run(monitor, {"a": 0.0, "b": 0.0, "c": -0.5}, sd=0.01)
    assert monitor.comparisons["c"].decision == "efficacy" and len(values["c"]) < len(values["a"])
    pair = monitor.comparisons["a vs b"]
    assert (pair.method, pair.reference) == ("a", "b") and pair.points
    (outcome,) = [o for o in monitor.outcomes() if o.method == "a vs b"]
    assert outcome.reference == "b"
    # Holm counts the pair: four comparisons, so the first look tests each at alpha / 4.
    assert monitor.records[0].comparisons["a vs b"].level == pytest.approx(0.05 / 4)


def test_a_pair_only_opens_its_own_arms():
    design = SUPERIORITY.model_copy(update={"pairs": [["a", "b"]]})
    monitor = _monitor(design, methods=("a", "b", "ref"))
    for state in monitor.comparisons.values():
        state.decision = "efficacy" if state.method != "a" or state.reference != "b" else "open"
    assert monitor.open_arms() == ["a", "b"]


def test_a_pair_naming_an_unknown_method_is_refused():
    with pytest.raises(ValueError, match="two different methods"):
        _monitor(SUPERIORITY.model_copy(update={"pairs": [["a", "zz"]]}))


def test_without_a_reference_the_design_pairs_are_the_only_comparisons_and_their_arms_train_on():
    design = SequentialDesign(
        test="superiority", effect=0.01, first_seeds=3, seeds_per_look=2, max_seeds=7, pairs=[["a", "b"]]
    )
    monitor = SequentialMonitor(design, methods=["a", "b", "c"], reference=None, higher_is_better=True)
    assert list(monitor.comparisons) == ["a vs b"]
    record = monitor.look({"a": {0: 0.9, 1: 0.95, 2: 0.91}, "b": {0: 0.92, 1: 0.9, 2: 0.93}, "c": {0: 0.1}})
    assert record.open_arms == ["a", "b"]  # c is in no comparison: it trained the first look only


def test_a_design_without_a_reference_needs_a_pair():
    with pytest.raises(ValueError, match="compares the pairs of its design: none given"):
        SequentialMonitor(
            SequentialDesign(effect=0.01), methods=["a", "b"], reference=None, higher_is_better=True
        )

"""`rank_trainability`: init rank predicts training only if it does so within a norm placement, with each
configuration read at its own best learning rate (chosen on validation, never on test), collapsed
configurations failing and plateaued ones training; a pooled correlation carried by the placement split
is not enough."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from studies.claims import (
    CONTRADICTED,
    INCONCLUSIVE,
    SUPPORTED,
    RankTrainabilityCheck,
    ReferenceRow,
    Sensitivity,
    TrendCheck,
    TrialData,
    parse_check,
)
from studies.claims.trainability import DIAGNOSTIC, select_learning_rates
from studies.claims.verdicts import NOT_TESTED
from tests.studies.claims.synthetic import data

REFERENCE = ReferenceRow(row={"norm_placement": "pre", "skip_scale": 1.0}, at_least=0.95)
CHECK = RankTrainabilityCheck(collapse_level=0.1, plateau_level=0.2, fails_below=0.5, reference_row=REFERENCE)
SKIPS = (0.1, 1.0, 3.0, 10.0)
LRS = (0.001, 0.003)


def _trials(placement, skip, rank, accuracy, *, best_lr=0.001, scale=None, val_shift=0.0):
    """Three seeds at each learning rate: `accuracy` at `best_lr`, far worse at the other one. Validation
    accuracy tracks test accuracy (shifted by `val_shift`)."""
    trials = []
    for lr in LRS:
        reached = accuracy if lr == best_lr else max(0.1, accuracy - 0.3)
        knobs = {"norm_placement": placement, "skip_scale": skip, "lr": lr}
        knobs |= {} if scale is None else {"init_scale": scale}
        for seed in range(3):
            wobble = 0.002 * (seed - 1)
            trials.append(
                TrialData(
                    "frozen_ln",
                    seed,
                    "succeeded",
                    reached + wobble,
                    metrics={"val_accuracy": reached + val_shift + wobble},
                    group=",".join(f"{k}={v}" for k, v in knobs.items()),
                    knobs=knobs,
                    history=({"epoch": 0, "init_erank_jacobian": rank + wobble},),
                )
            )
    return trials


def _study(pre, post, scale=None, skips=SKIPS):
    """`pre` / `post`: (rank, accuracy) per skip scale in `skips`."""
    trials = []
    for placement, rows in (("pre", pre), ("post", post)):
        for skip, (rank, accuracy) in zip(skips, rows, strict=True):
            trials += _trials(placement, skip, rank, accuracy, scale=scale)
    return trials


# Within each placement, higher rank trains better; Post-Norm's two collapsed configurations fail.
PRE_RISING = [(0.95, 0.99), (0.6, 0.985), (0.45, 0.975), (0.4, 0.96)]
POST_RISING = [(0.9, 0.97), (0.3, 0.96), (0.08, 0.2), (0.07, 0.12)]


def test_rank_predicting_accuracy_within_placement_with_collapsed_configurations_failing_supports_it():
    result = CHECK.evaluate(data(_study(PRE_RISING, POST_RISING)))
    assert result.verdict == SUPPORTED
    within, collapsed, plateaued, pooled = result.findings
    assert within.measured == pytest.approx(1.0) and within.p_value == pytest.approx(2 / 576)  # 4! x 4!
    assert collapsed.n == 2 and collapsed.measured == pytest.approx(0.2) and collapsed.verdict == SUPPORTED
    assert plateaued.n == 6 and plateaued.verdict == SUPPORTED
    assert pooled.verdict == DIAGNOSTIC


def test_a_pooled_correlation_carried_by_the_placement_split_does_not_support_it():
    # Pre-Norm has the higher ranks and trains, Post-Norm the lower ones and does not: pooled, rank
    # "predicts" accuracy; within each placement the higher-rank configurations train worse.
    order = (7, 8, 5, 6, 3, 4, 1, 2)  # accuracy's rank order along rising init rank: rho -0.905
    pre_ranks = (0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
    post_ranks = (0.05, 0.06, 0.07, 0.08, 0.15, 0.2, 0.25, 0.3)
    pre = [(rank, 0.95 + 0.005 * r) for rank, r in zip(pre_ranks, order, strict=True)]
    post = [(rank, 0.1 + 0.05 * r) for rank, r in zip(post_ranks, order, strict=True)]
    trials = _study(pre, post, skips=(1.0, 0.1, 0.3, 2.0, 3.0, 5.0, 10.0, 30.0))
    pooled_trend = TrendCheck(x="init_erank_jacobian", expect="positive", reference_row=REFERENCE)
    assert pooled_trend.evaluate(data([t for t in trials if t.knob("lr") == 0.001])).verdict == SUPPORTED
    result = CHECK.evaluate(data(trials))
    assert result.verdict == CONTRADICTED
    within, *_, pooled = result.findings
    assert within.verdict == CONTRADICTED and within.measured == pytest.approx(-0.905, abs=1e-3)
    assert within.p_value is not None and within.p_value < 0.01
    assert pooled.measured is not None and pooled.measured > 0.5  # shown, but not part of the verdict


def test_no_within_placement_association_is_inconclusive_with_the_detectable_effect():
    pre = [(0.95, 0.97), (0.6, 0.99), (0.45, 0.96), (0.4, 0.98)]
    post = [(0.9, 0.96), (0.3, 0.98), (0.08, 0.3), (0.07, 0.1)]
    result = CHECK.evaluate(data(_study(pre, post)))
    within = result.findings[0]
    assert within.verdict == INCONCLUSIVE and result.verdict == INCONCLUSIVE
    assert within.mde is not None and 0.8 < within.mde < 1.0
    assert "smallest within-stratum rho detectable" in within.note


def test_a_collapsed_configuration_that_trains_to_the_reference_level_contradicts_it():
    post = [(0.9, 0.99), (0.3, 0.985), (0.08, 0.975), (0.07, 0.2)]
    result = CHECK.evaluate(data(_study(PRE_RISING, post)))
    assert result.findings[1].verdict == CONTRADICTED and result.verdict == CONTRADICTED
    assert "reach the trained level 0.95" in result.findings[1].note


def test_a_plateaued_configuration_that_fails_contradicts_it():
    pre = [(0.95, 0.99), (0.6, 0.985), (0.45, 0.975), (0.4, 0.3)]
    result = CHECK.evaluate(data(_study(pre, POST_RISING)))
    assert result.findings[2].verdict == CONTRADICTED and result.verdict == CONTRADICTED


def test_without_a_collapsed_configuration_it_is_not_tested():
    post = [(0.9, 0.97), (0.3, 0.96), (0.18, 0.2), (0.15, 0.12)]  # the lowest rank stays above 0.1
    result = CHECK.evaluate(data(_study(PRE_RISING, post)))
    assert result.verdict == NOT_TESTED
    assert result.reason is not None and "below the claim's collapse level 0.1" in result.reason


def test_a_reference_configuration_that_did_not_train_leaves_it_not_tested():
    pre = [(0.95, 0.99), (0.6, 0.9), (0.45, 0.85), (0.4, 0.8)]  # Pre-Norm at beta 1 reaches 0.9 < 0.95
    result = CHECK.evaluate(data(_study(pre, POST_RISING)))
    assert result.verdict == NOT_TESTED
    assert result.reason is not None and "did not train" in result.reason and "at lr = 0.001" in result.reason


def test_each_configuration_is_read_at_the_learning_rate_with_the_best_mean_validation_metric():
    trials = _trials("post", 3.0, 0.08, 0.5, best_lr=0.003)
    # At lr 1e-3 this configuration scores best on test but worst on validation: validation decides.
    trials = [
        t
        if t.knob("lr") == 0.003
        else TrialData(**{**t.__dict__, "value": 0.9, "metrics": {"val_accuracy": 0.15}})
        for t in trials
    ]
    (configuration,), problem = select_learning_rates(trials, "lr", "val_accuracy", higher_is_better=True)
    assert problem is None and configuration.chosen == 0.003
    assert configuration.scores == pytest.approx({0.001: 0.15, 0.003: 0.5})
    assert sorted(t.value for t in configuration.trials) == pytest.approx([0.498, 0.5, 0.502])
    assert configuration.label == "frozen_ln [norm_placement=post,skip_scale=3.0]"


def test_equal_validation_scores_choose_the_smaller_learning_rate_and_losses_choose_the_lowest():
    trials = [
        TrialData("m", 0, "succeeded", 0.5, metrics={"val_accuracy": 0.8, "val_loss": loss}, group=f"lr={lr}", knobs={"lr": lr})
        for lr, loss in ((0.003, 0.2), (0.001, 0.4))
    ]  # fmt: skip
    (by_accuracy,), _ = select_learning_rates(trials, "lr", "val_accuracy", higher_is_better=True)
    (by_loss,), _ = select_learning_rates(trials, "lr", "val_loss", higher_is_better=False)
    assert by_accuracy.chosen == 0.001 and by_loss.chosen == 0.003


def test_a_swept_learning_rate_without_a_validation_metric_is_not_tuned_on_test():
    trials = [TrialData(**{**t.__dict__, "metrics": {}}) for t in _study(PRE_RISING, POST_RISING)]
    result = CHECK.evaluate(data(trials))
    assert result.verdict == NOT_TESTED
    assert "report no val_accuracy" in (result.reason or "") and "bias" in (result.reason or "")


def test_the_verdict_is_shown_per_init_scale_with_the_registered_one_as_headline():
    trials = _study(PRE_RISING, POST_RISING, scale=1.0) + _study(
        PRE_RISING, [(0.9, 0.97), (0.3, 0.96), (0.18, 0.2), (0.15, 0.12)], scale=16.0
    )
    check = CHECK.model_copy(update={"sensitivity": Sensitivity(knob="init_scale", at=1.0)})
    result = check.evaluate(data(trials))
    assert result.verdict == SUPPORTED
    assert "supported for init_scale <= 1 only (grid 1 to 16)" in result.summary
    assert any(note.startswith("init_scale = 16: not tested") for note in result.notes)


def test_levels_out_of_order_and_unknown_fields_are_rejected():
    with pytest.raises(ValidationError, match="plateau_level"):
        RankTrainabilityCheck(collapse_level=0.2, plateau_level=0.1, fails_below=0.5, reference_row=REFERENCE)
    with pytest.raises(ValidationError):
        parse_check({"type": "rank_trainability", "collapse_level": 0.1, "plateau_level": 0.2,
                     "fails_below": 0.5, "reference_row": REFERENCE.model_dump(), "x": "init_rank"})  # fmt: skip
    parsed = parse_check(
        {"type": "rank_trainability", "collapse_level": 0.1, "plateau_level": 0.2,
         "fails_below": {"cifar10": 0.25}, "reference_row": REFERENCE.model_dump()}
    )  # fmt: skip
    assert isinstance(parsed, RankTrainabilityCheck) and parsed.tuned_knob == "lr"


def test_a_study_on_a_dataset_without_a_failure_level_is_not_tested():
    cifar_only = CHECK.model_copy(update={"fails_below": {"cifar10": 0.25}})
    result = cifar_only.evaluate(data(_study(PRE_RISING, POST_RISING)))
    assert result.verdict == NOT_TESTED and "no failure level for digits" in (result.reason or "")

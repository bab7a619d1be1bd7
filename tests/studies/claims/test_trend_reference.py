"""`trend` of a trained metric on the init rank: judged only once a named reference configuration has
trained; can pass and can fail; shown per init scale."""

from __future__ import annotations

from studies.claims import CONTRADICTED, SUPPORTED, ReferenceRow, Sensitivity, TrendCheck
from studies.claims.verdicts import NOT_TESTED
from tests.studies.claims.synthetic import data, trial

REFERENCE = ReferenceRow(row={"norm_placement": "pre", "skip_scale": 1.0}, at_least=0.95)
CHECK = TrendCheck(x="init_erank_jacobian", y="primary", expect="positive", reference_row=REFERENCE)


def _study(accuracy_of, scale=None):
    trials = []
    for placement in ("pre", "post"):
        for skip in (0.3, 1.0, 3.0, 10.0):
            rank = (0.9 if placement == "pre" else 0.5) / (1 + skip)
            for seed in range(2):
                knobs = {"norm_placement": placement, "skip_scale": skip}
                knobs |= {} if scale is None else {"init_scale": scale}
                init = {"init_erank_jacobian": rank + 0.001 * seed}
                trials.append(
                    trial(knobs, seed, init, value=accuracy_of(rank, placement, skip) + 0.001 * seed)
                )
    return trials


def test_collapsed_configurations_failing_to_train_support_the_claim():
    result = CHECK.evaluate(data(_study(lambda rank, *_: 0.5 + rank)))
    assert result.verdict == SUPPORTED
    assert result.notes[-1].startswith("norm_placement=pre,skip_scale=1.0 reached test_accuracy 0.9")


def test_collapsed_configurations_training_best_contradicts_the_claim():
    result = CHECK.evaluate(data(_study(lambda rank, *_: 0.99 - 0.04 * rank)))
    assert result.verdict == CONTRADICTED


def test_a_reference_configuration_that_did_not_train_leaves_the_claim_not_tested():
    result = CHECK.evaluate(data(_study(lambda rank, *_: 0.3 + rank)))
    assert result.verdict == NOT_TESTED
    assert result.reason is not None and "did not train" in result.reason and "needs >= 0.95" in result.reason
    missing = TrendCheck(
        x="init_erank_jacobian", reference_row=ReferenceRow(row={"skip_scale": 99}, at_least=0.9)
    )
    assert "no completed trial" in (missing.evaluate(data(_study(lambda r, *_: r))).reason or "")


def test_the_trainability_verdict_is_shown_per_init_scale():
    trials = _study(lambda rank, *_: 0.5 + rank, scale=1.0) + _study(
        lambda rank, *_: 0.99 - 0.1 * rank, scale=16.0
    )
    check = CHECK.model_copy(update={"sensitivity": Sensitivity(knob="init_scale", at=1.0)})
    result = check.evaluate(data(trials))
    assert result.verdict == SUPPORTED
    assert "supported for init_scale <= 1 only (grid 1 to 16)" in result.summary


def test_a_level_per_dataset_applies_the_studys_and_a_missing_one_is_not_tested():
    row = {"norm_placement": "pre", "skip_scale": 1.0}
    per_dataset = ReferenceRow(row=row, at_least={"digits": 0.95, "cifar10": 0.5})
    check = CHECK.model_copy(update={"reference_row": per_dataset})
    assert check.evaluate(data(_study(lambda rank, *_: 0.5 + rank))).verdict == SUPPORTED
    other = ReferenceRow(row=row, at_least={"cifar10": 0.5})
    result = CHECK.model_copy(update={"reference_row": other}).evaluate(
        data(_study(lambda rank, *_: 0.5 + rank))
    )
    assert result.verdict == NOT_TESTED and "no level" in (result.reason or "")

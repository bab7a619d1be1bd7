"""A claim on a sequential study is judged on what its looks decided: the repeated interval and the
stage-wise p replace a fixed-seed t test of seeds the looks chose, and a pair the looks never compared is
"not tested" rather than judged on biased numbers."""

from __future__ import annotations

import dataclasses

import pytest

from studies.catalog.claims import load_claims
from studies.claims import (
    INCONCLUSIVE,
    SUPPORTED,
    DifferenceCheck,
    OrderingCheck,
    StudyData,
    TrialData,
    parse_check,
)
from studies.claims.sequential import SequentialComparison, sequential_problem
from studies.claims.verdicts import NOT_TESTED
from studies.spec import SequentialDesign, StudySpec

# Seeds a naive paired t would call a clear gain (+0.02, tiny spread): the looks' numbers must win.
ROWS = {
    "autonorm_s": [0.92, 0.921, 0.919, 0.92, 0.921],
    "frozen_ln": [0.90, 0.901, 0.899, 0.90, 0.90],
    "dyt": [0.90, 0.902, 0.898, 0.901, 0.90],
}


def _outcome(method: str, **changes) -> SequentialComparison:
    fields = {
        "method": method,
        "decision": "efficacy",
        "decision_text": "stopped: differs from the reference",
        "seeds": 3,
        "look": 1,
        "estimate": 0.02,
        "interval_low": 0.004,
        "interval_high": 0.036,
        "interval_level": 0.975,
        "p_value": 0.01,
        "tested_at_level": 0.025,
        "alpha": 0.05,
    }
    return SequentialComparison(**{**fields, **changes})


def _study(**outcomes: SequentialComparison) -> StudyData:
    trials = tuple(
        TrialData(method=method, seed=seed, status="succeeded", value=value)
        for method, values in ROWS.items()
        for seed, value in enumerate(values)
    )
    return StudyData("digits", "test_accuracy", True, "frozen_ln", trials, sequential=outcomes)


def test_a_comparison_the_looks_stopped_for_efficacy_supports_a_claimed_gain_with_their_numbers():
    result = DifferenceCheck(method="autonorm_s").evaluate(_study(autonorm_s=_outcome("autonorm_s")))
    assert result.verdict == SUPPORTED
    (finding,) = result.findings
    assert (finding.ci_low, finding.ci_high, finding.n) == (0.004, 0.036, 3)  # the repeated interval
    assert finding.p_value == 0.01 and finding.p_adjusted == pytest.approx(0.02)  # 0.01 x 0.05 / 0.025
    assert (
        "sequential design: stopped: differs from the reference at look 1 with 3 paired seeds" in finding.note
    )


def test_a_futility_stop_is_inconclusive_even_where_a_naive_t_test_of_its_seeds_would_reject():
    futile = _outcome(
        "autonorm_s",
        decision="futility",
        decision_text="stopped for futility",
        estimate=0.02,
        interval_low=-0.01,
        interval_high=0.05,
        p_value=0.2,
    )
    fixed_seeds = dataclasses.replace(_study(), sequential=None)
    assert DifferenceCheck(method="autonorm_s").evaluate(fixed_seeds).verdict == SUPPORTED
    result = DifferenceCheck(method="autonorm_s").evaluate(_study(autonorm_s=futile))
    assert result.verdict == INCONCLUSIVE
    assert "stopped for futility" in result.findings[0].note


def test_equivalence_is_supported_when_the_repeated_interval_lies_within_the_margin():
    level = _outcome("dyt", decision="equivalent", estimate=0.001, interval_low=-0.004, interval_high=0.006)
    check = DifferenceCheck(method="dyt", expect="no_difference", margin=0.01)
    assert check.evaluate(_study(dyt=level)).verdict == SUPPORTED
    wide = _outcome("dyt", decision="max_seeds", estimate=0.001, interval_low=-0.02, interval_high=0.02)
    assert check.evaluate(_study(dyt=wide)).verdict == INCONCLUSIVE


def test_a_pair_the_looks_never_compared_is_not_tested():
    check = OrderingCheck(pairs=[{"method": "autonorm_s", "reference": "dyt"}])
    result = check.evaluate(_study(autonorm_s=_outcome("autonorm_s")))
    assert result.verdict == NOT_TESTED
    assert "each method with frozen_ln, or the pairs its design names" in result.findings[0].note


def test_a_pair_of_the_design_is_judged_on_its_looks_in_either_order():
    # The design compared "dyt vs autonorm_s": dyt 0.015 worse, its repeated interval below zero.
    pair = _outcome(
        "dyt vs autonorm_s",
        arm="dyt",
        reference="autonorm_s",
        estimate=-0.015,
        interval_low=-0.03,
        interval_high=-0.002,
    )
    study = _study(**{"dyt vs autonorm_s": pair})
    as_designed = OrderingCheck(pairs=[{"method": "dyt", "reference": "autonorm_s", "expect": "worse"}])
    assert as_designed.evaluate(study).verdict == SUPPORTED
    turned = OrderingCheck(pairs=[{"method": "autonorm_s", "reference": "dyt", "expect": "better"}])
    result = turned.evaluate(study)
    assert result.verdict == SUPPORTED
    (finding,) = result.findings
    assert (finding.measured, finding.ci_low, finding.ci_high) == (0.015, 0.002, 0.03)


def test_a_non_inferiority_pair_read_the_other_way_round_is_not_tested():
    shown = _outcome(
        "dyt vs autonorm_s", arm="dyt", reference="autonorm_s", decision="non_inferior", symmetric=False
    )
    turned = OrderingCheck(pairs=[{"method": "autonorm_s", "reference": "dyt", "expect": "better"}])
    assert turned.evaluate(_study(**{"dyt vs autonorm_s": shown})).verdict == NOT_TESTED


def test_grid_points_are_judged_on_the_pair_of_rows_their_selectors_pick():
    gates = {"sample": [0.90, 0.91, 0.90], "hard": [0.905, 0.90, 0.91]}
    trials = tuple(
        TrialData("autonorm_s", seed, "succeeded", value, group=f"post_freeze_gate={gate}")
        for gate, values in gates.items()
        for seed, value in enumerate(values)
    )
    hard, sample = "autonorm_s [post_freeze_gate=hard]", "autonorm_s [post_freeze_gate=sample]"
    level = _outcome(
        f"{hard} vs {sample}",
        arm=hard,
        reference=sample,
        decision="equivalent",
        estimate=0.001,
        interval_low=-0.006,
        interval_high=0.008,
    )
    study = StudyData("digits", "test_accuracy", True, "frozen_ln", trials, sequential={level.method: level})
    check = OrderingCheck(
        pairs=[
            {
                "method": {"method": "autonorm_s", "post_freeze_gate": "hard"},
                "reference": {"method": "autonorm_s", "post_freeze_gate": "sample"},
                "expect": "no_difference",
                "margin": 0.01,
            }
        ]
    )
    result = check.evaluate(study)
    assert result.verdict == SUPPORTED
    assert (result.findings[0].ci_low, result.findings[0].ci_high) == (-0.006, 0.008)


COMPARE = StudySpec.model_validate(
    {
        "name": "looks",
        "dataset": "digits",
        "methods": ["frozen_ln", "dyt", "autonorm_s"],
        "method_search": {"autonorm_s": {"t_freeze": 2}},
        "sequential": {"effect": 0.01},
    }
)


@pytest.mark.parametrize(
    ("check", "problem"),
    [
        ({"type": "difference", "method": "autonorm_s"}, None),
        ({"type": "ordering", "pairs": [{"method": "dyt", "reference": "frozen_ln"}]}, None),
        ({"type": "ordering", "pairs": [{"method": "dyt", "reference": "autonorm_s"}]}, "rows other than"),
        (
            {"type": "difference", "method": {"method": "autonorm_s", "post_freeze_gate": "hard"}},
            "rows other than",
        ),
        ({"type": "difference", "method": "dyt", "metric": "test_loss"}, "primary metric only"),
        ({"type": "trend", "x": "skip_scale", "y": "init_erank", "expect": "negative"}, "every seed"),
    ],
)
def test_the_looks_can_answer_method_against_reference_pairs_on_the_primary_metric_only(check, problem):
    found = sequential_problem(parse_check(check), COMPARE)
    assert (found is None) if problem is None else (problem in found)


def test_a_pair_of_the_design_answers_a_check_of_it_in_either_order_unless_non_inferiority():
    check = parse_check({"type": "ordering", "pairs": [{"method": "autonorm_s", "reference": "dyt"}]})
    superiority = COMPARE.model_copy(
        update={"sequential": SequentialDesign(effect=0.01, pairs=[["dyt", "autonorm_s"]])}
    )
    assert sequential_problem(check, superiority) is None
    non_inferiority = COMPARE.model_copy(
        update={
            "sequential": SequentialDesign(test="non_inferiority", margin=0.01, pairs=[["dyt", "autonorm_s"]])
        }
    )
    assert "rows other than" in sequential_problem(check, non_inferiority)


def test_the_catalog_ablation_claim_is_answered_by_a_grid_whose_pairs_name_its_gates():
    hard, expected, sample = (f"autonorm_s [post_freeze_gate={g}]" for g in ("hard", "expected", "sample"))
    grid = StudySpec.model_validate(
        {
            "name": "gates",
            "dataset": "digits",
            "kind": "grid",
            "methods": ["autonorm_s", "frozen_ln"],
            "method_search": {
                "autonorm_s": {
                    "t_freeze": 2,
                    "post_freeze_gate": {"type": "grid", "values": ["sample", "expected", "hard"]},
                }
            },
            "claim": "autonorm_s_post_freeze_gate_ablation",
            "sequential": {
                "test": "equivalence",
                "margin": 0.01,
                "pairs": [[sample, expected], [hard, sample]],
            },
        }
    )
    assert grid.sequential_claim_problem() is None
    one_pair = grid.sequential.model_copy(update={"pairs": [[hard, sample]]})
    assert "rows other than" in sequential_problem(
        load_claims()["autonorm_s_post_freeze_gate_ablation"].check,
        grid.model_copy(update={"sequential": one_pair}),
    )


def test_the_looks_numbers_carry_no_warning_of_the_fixed_seed_test_they_replaced():
    # The reference has seeds the method lacks (its arm stopped earlier): the t test would warn of it.
    trials = tuple(
        TrialData(method=method, seed=seed, status="succeeded", value=value)
        for method, values in (
            ("autonorm_s", [0.92, 0.921, 0.919]),
            ("frozen_ln", [0.9, 0.901, 0.899, 0.9, 0.9]),
        )
        for seed, value in enumerate(values)
    )
    study = StudyData(
        "digits",
        "test_accuracy",
        True,
        "frozen_ln",
        trials,
        sequential={"autonorm_s": _outcome("autonorm_s")},
    )
    (finding,) = DifferenceCheck(method="autonorm_s").evaluate(study).findings
    assert "seed sets differ" not in finding.note and "sequential design" in finding.note

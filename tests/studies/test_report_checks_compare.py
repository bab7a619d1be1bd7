"""Claim checks that compare rows on a metric (difference, ordering, sweep), on synthetic seeds whose
verdict is known: supported, contradicted, or inconclusive at this power."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from studies.claims import (
    CONTRADICTED,
    INCONCLUSIVE,
    SUPPORTED,
    DifferenceCheck,
    OrderingCheck,
    StudyData,
    SweepCheck,
    TrialData,
    parse_check,
)

NOISE = [0.004, -0.003, 0.001, -0.002, 0.0]  # a fixed, small seed-to-seed wobble


def _study(
    rows: dict[str, list[float]], *, higher_is_better=True, metric="test_accuracy", reference="frozen_ln"
):
    trials = tuple(
        TrialData(method=method, seed=seed, status="succeeded", value=value)
        for method, values in rows.items()
        for seed, value in enumerate(values)
    )
    return StudyData("digits", metric, higher_is_better, reference, trials)


def _around(centre: float, wobble=NOISE, scale: float = 1.0) -> list[float]:
    return [centre + scale * w for w in wobble]


# ------------------------------------------------------------------------------------------ difference


def test_a_clear_gain_in_the_claimed_direction_supports_the_claim():
    data = _study({"autonorm_s": _around(0.90), "frozen_ln": _around(0.85, NOISE[::-1])})
    result = DifferenceCheck(method="autonorm_s", reference="frozen_ln").evaluate(data)
    assert result.verdict == SUPPORTED
    (finding,) = result.findings
    assert finding.measured == pytest.approx(0.05)
    assert finding.ci_low > 0 and finding.n == 5
    assert finding.expected == "> 0"


def test_a_clear_loss_contradicts_a_claimed_gain():
    data = _study({"autonorm_s": _around(0.80), "frozen_ln": _around(0.85, NOISE[::-1])})
    result = DifferenceCheck(method="autonorm_s", reference="frozen_ln").evaluate(data)
    assert result.verdict == CONTRADICTED
    assert "opposite direction" in result.findings[0].note


def test_noise_larger_than_the_gain_is_inconclusive_and_quotes_the_detectable_effect():
    data = _study(
        {"autonorm_s": [0.90, 0.80, 0.88], "frozen_ln": [0.85, 0.86, 0.84]},
    )
    result = DifferenceCheck(method="autonorm_s", reference="frozen_ln").evaluate(data)
    assert result.verdict == INCONCLUSIVE
    finding = result.findings[0]
    assert finding.mde is not None and finding.mde > abs(finding.measured)
    assert f"{finding.mde:.4g}" in finding.note and "80 % power" in finding.note


def test_better_means_lower_for_an_error_metric():
    data = _study(
        {"autonorm_s": _around(0.50), "frozen_ln": _around(0.60, NOISE[::-1])},
        higher_is_better=False,
        metric="test_rmse",
    )
    result = DifferenceCheck(method="autonorm_s", reference="frozen_ln").evaluate(data)
    assert result.verdict == SUPPORTED
    assert result.findings[0].expected == "< 0"


def test_the_reference_defaults_to_the_study_reference():
    data = _study({"autonorm_s": _around(0.90), "frozen_ln": _around(0.85, NOISE[::-1])})
    result = DifferenceCheck(method="autonorm_s").evaluate(data)
    assert result.findings[0].label.startswith("autonorm_s − frozen_ln")


def test_a_named_metric_is_read_from_the_trials_metrics():
    corruption = {"autonorm_s": _around(0.72), "frozen_ln": _around(0.68, NOISE[::-1])}
    trials = tuple(
        TrialData(
            method=m, seed=s, status="succeeded", value=0.9, metrics={"test_accuracy_corruption_mean": v}
        )
        for m, values in corruption.items()
        for s, v in enumerate(values)
    )
    data = StudyData("digits_c", "test_accuracy", True, "frozen_ln", trials)
    result = DifferenceCheck(method="autonorm_s", metric="test_accuracy_corruption_mean").evaluate(data)
    assert result.verdict == SUPPORTED
    assert result.findings[0].measured == pytest.approx(0.04)
    assert "(test_accuracy_corruption_mean)" in result.findings[0].label


def test_a_margin_turns_an_interval_that_rules_out_the_claimed_gain_into_a_contradiction():
    data = _study({"autonorm_s": _around(0.851), "frozen_ln": _around(0.85, NOISE[::-1])})
    loose = DifferenceCheck(method="autonorm_s").evaluate(data)
    strict = DifferenceCheck(method="autonorm_s", margin=0.02).evaluate(data)
    assert loose.verdict == INCONCLUSIVE
    assert strict.verdict == CONTRADICTED
    assert "rules out an effect of 0.02" in strict.findings[0].note


def test_equivalence_is_supported_when_the_whole_interval_lies_within_the_margin():
    data = _study({"autonorm_s": _around(0.851), "frozen_ln": _around(0.85, NOISE[::-1])})
    result = DifferenceCheck(method="autonorm_s", expect="no_difference", margin=0.01).evaluate(data)
    assert result.verdict == SUPPORTED
    assert result.findings[0].expected == "within ±0.01"


def test_equivalence_is_contradicted_by_a_difference_beyond_the_margin():
    data = _study({"autonorm_s": _around(0.90), "frozen_ln": _around(0.85, NOISE[::-1])})
    result = DifferenceCheck(method="autonorm_s", expect="no_difference", margin=0.01).evaluate(data)
    assert result.verdict == CONTRADICTED


def test_equivalence_with_an_interval_straddling_the_margin_is_inconclusive():
    data = _study({"autonorm_s": [0.86, 0.84, 0.87], "frozen_ln": [0.85, 0.85, 0.85]})
    result = DifferenceCheck(method="autonorm_s", expect="no_difference", margin=0.01).evaluate(data)
    assert result.verdict == INCONCLUSIVE
    assert "straddles" in result.findings[0].note


def test_a_relative_margin_scales_with_the_reference_mean():
    data = _study(
        {"autonorm_s": _around(0.601), "frozen_ln": _around(0.60, NOISE[::-1])},
        higher_is_better=False,
        metric="test_rmse",
    )
    result = DifferenceCheck(method="autonorm_s", expect="no_difference", relative_margin=0.05).evaluate(data)
    assert result.findings[0].expected == "within ±0.03"
    assert result.verdict == SUPPORTED


def test_equivalence_without_a_margin_is_refused():
    with pytest.raises(ValidationError, match="needs a margin"):
        DifferenceCheck(method="autonorm_s", expect="no_difference")


def test_rows_without_completed_seeds_are_inconclusive():
    trials = (TrialData("autonorm_s", 0, "failed", None), TrialData("frozen_ln", 0, "succeeded", 0.8))
    data = StudyData("digits", "test_accuracy", True, "frozen_ln", trials)
    assert DifferenceCheck(method="autonorm_s").evaluate(data).verdict == INCONCLUSIVE


def test_the_paper_difference_comes_from_the_papers_numbers_per_row():
    data = _study({"autonorm_s": _around(0.90), "frozen_ln": _around(0.85, NOISE[::-1])})
    result = DifferenceCheck(method="autonorm_s").evaluate(
        data, paper={"autonorm_s": 0.8635, "frozen_ln": 0.8297}
    )
    assert result.findings[0].paper == pytest.approx(0.0338)


# -------------------------------------------------------------------------------------------- ordering


def _stabilisation(random_selector: float, autonorm: float, autonorm_s: float) -> StudyData:
    return _study(
        {
            "random_selector": _around(random_selector),
            "autonorm": _around(autonorm, NOISE[::-1]),
            "autonorm_s": _around(autonorm_s, NOISE[1:] + NOISE[:1]),
            "frozen_ln": _around(0.83, NOISE[2:] + NOISE[:2]),
        }
    )


ORDERING = OrderingCheck(
    pairs=[
        {"method": "random_selector", "reference": "autonorm", "expect": "better"},
        {"method": "autonorm_s", "reference": "frozen_ln", "expect": "better"},
    ]
)


def test_an_ordering_holds_when_every_pair_holds():
    result = ORDERING.evaluate(_stabilisation(0.85, 0.80, 0.86))
    assert result.verdict == SUPPORTED
    assert [f.verdict for f in result.findings] == [SUPPORTED, SUPPORTED]


def test_one_reversed_pair_contradicts_the_ordering():
    result = ORDERING.evaluate(_stabilisation(0.80, 0.85, 0.86))
    assert result.verdict == CONTRADICTED
    assert [f.verdict for f in result.findings] == [CONTRADICTED, SUPPORTED]


def test_an_ordering_with_an_undecided_pair_is_inconclusive():
    data = _stabilisation(0.85, 0.80, 0.86)
    tied = StudyData(
        data.dataset,
        data.metric,
        True,
        "frozen_ln",
        tuple(t for t in data.trials if t.method != "autonorm_s")
        + tuple(
            TrialData("autonorm_s", s, "succeeded", v) for s, v in enumerate([0.90, 0.76, 0.84, 0.81, 0.87])
        ),
    )
    result = ORDERING.evaluate(tied)
    assert result.verdict == INCONCLUSIVE


def test_ordering_p_values_are_holm_adjusted_across_pairs():
    result = ORDERING.evaluate(_stabilisation(0.85, 0.80, 0.86))
    for finding in result.findings:
        assert finding.p_adjusted >= finding.p_value
    smallest = min(result.findings, key=lambda f: f.p_value)
    assert smallest.p_adjusted == pytest.approx(min(1.0, 2 * smallest.p_value))


# ----------------------------------------------------------------------------------------------- sweep


# Every sweep point's freeze fired (after epoch 2): a point where it did not is not tested
# (tests/studies/claims/test_sweep_freeze.py).
FROZE = (
    {"epoch": 0, "gates_frozen": 0, "freeze_epoch": -1},
    {"epoch": 4, "gates_frozen": 1, "freeze_epoch": 2},
)


def _sweep(gain_at_default: float, gain_elsewhere: float) -> StudyData:
    trials = []
    for seed, wobble in enumerate(NOISE):
        trials.append(
            TrialData("autonorm", seed, "succeeded", 0.80 + wobble, group="tau=0.5", knobs={"tau": 0.5})
        )
        trials.append(
            TrialData("autonorm", seed, "succeeded", 0.70 + wobble, group="tau=1.0", knobs={"tau": 1.0})
        )
        for t_freeze in (2, 4):
            for eps_h, tau in ((0.1, 0.5), (0.3, 0.5), (0.1, 1.0)):
                base = 0.80 if tau == 0.5 else 0.70
                gain = gain_at_default if (eps_h, tau) == (0.1, 0.5) else gain_elsewhere
                trials.append(
                    TrialData(
                        "autonorm_s",
                        seed,
                        "succeeded",
                        base + gain + NOISE[(seed + 1) % 5],
                        group=f"t_freeze={t_freeze},eps_h={eps_h},tau={tau}",
                        knobs={"t_freeze": t_freeze, "eps_h": eps_h, "tau": tau},
                        history=FROZE,
                    )
                )
    return StudyData("digits", "test_accuracy", True, "frozen_ln", tuple(trials))


SWEEP = SweepCheck(focus={"eps_h": 0.1, "tau": 0.5})


def test_a_sweep_is_judged_at_the_papers_setting_against_the_reference_at_the_same_tau():
    result = SWEEP.evaluate(_sweep(0.05, 0.0))
    assert result.verdict == SUPPORTED
    assert len(result.findings) == 6
    focus = [f for f in result.findings if "eps_h=0.1,tau=0.5" in f.label]
    assert len(focus) == 2 and all(f.verdict == SUPPORTED for f in focus)
    assert all("autonorm [tau=0.5]" in f.label for f in focus)
    assert "2 of 6 sweep points significantly better" in result.summary


def test_a_sweep_whose_papers_setting_loses_contradicts_the_claim():
    assert SWEEP.evaluate(_sweep(-0.05, 0.05)).verdict == CONTRADICTED


def test_a_sweep_without_the_papers_setting_is_inconclusive():
    result = SweepCheck(focus={"eps_h": 0.05}).evaluate(_sweep(0.05, 0.05))
    assert result.verdict == INCONCLUSIVE
    assert "lacks the paper's setting" in result.summary


# ------------------------------------------------------------------------------------------- parsing


def test_checks_parse_from_their_mapping_and_refuse_unknown_fields():
    check = parse_check({"type": "difference", "method": "autonorm_s", "expect": "worse"})
    assert isinstance(check, DifferenceCheck) and check.expect == "worse"
    with pytest.raises(ValidationError):
        parse_check({"type": "difference", "method": "autonorm_s", "expected": "worse"})
    with pytest.raises(ValidationError):
        parse_check({"type": "no_such_check"})

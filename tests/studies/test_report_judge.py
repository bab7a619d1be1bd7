"""A claim gets a verdict only when the experiment can answer it: the dataset can express the claim, every
arm trained and the reference converged; otherwise the verdict is `not tested`, with the measured level.
Verdicts on stand-ins are labelled as such, and the report shows the verdict across its free choices and
the seeds the paper's effect needs."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from studies.catalog import claim_ids, get_claim
from studies.catalog.lint import freeze_rule_problems
from studies.claims import StudyData, TrialData
from studies.claims.preconditions import arms_trained, freezing_rows, reference_converged
from studies.claims.trials import describe_selector
from studies.convergence import Convergence
from studies.report import Provenance, build_report
from studies.report.judge import judge_claim
from studies.stats import seeds_for_equivalence

PROVENANCE = Provenance(
    study_id="st-1",
    study_name="catalog-mnist",
    status="succeeded",
    spec={
        "name": "catalog-mnist",
        "budget": {"epochs": 4},
        "method_search": {"autonorm_s": {"t_freeze": 2, "eps_h": 0.1, "tau": 0.5}},
        "search": {"lr": 0.001},
    },
    seeds=(0, 1, 2, 3, 4),
    tune_seeds=(5,),
    split_seed=0,
    normlab_version="0.1.0",
    git_revision="abc123",
    packages={},
    generated_at="2026-01-01T00:00:00+00:00",
)
LEVEL = Convergence(at_least=0.95, source="a baseline on the same split")
CIFAR10 = get_claim("cifar10_autonorm_s_beats_frozen_ln")
MNIST = get_claim("mnist_autonorm_s_level_with_frozen_ln")


# What the training loop records of AutoNorm-S's freeze: nothing frozen at the start, frozen after epoch 2.
FROZE = (
    {"epoch": 0, "gates_frozen": 0, "freeze_epoch": -1},
    {"epoch": 4, "gates_frozen": 1, "freeze_epoch": 2},
)


def _data(dataset: str, method: list[float | None], reference: list[float | None], *, status="succeeded"):
    trials = [TrialData("autonorm_s", s, status, v, history=FROZE) for s, v in enumerate(method)]
    trials += [TrialData("frozen_ln", s, "succeeded", v) for s, v in enumerate(reference)]
    return StudyData(dataset, "test_accuracy", True, "frozen_ln", tuple(trials))


# FrozenLN at 35 % on digits beats AutoNorm-S at 27 %, significantly: the old verdict "contradicted".
UNTRAINED = _data("digits", [0.26, 0.27, 0.28, 0.25, 0.29], [0.35, 0.36, 0.34, 0.37, 0.33])


def test_a_reference_that_did_not_converge_leaves_the_claim_not_tested_with_the_measured_level():
    judgement = judge_claim(CIFAR10, UNTRAINED, convergence=LEVEL)
    assert judgement.result.verdict == "not tested"
    assert (
        judgement.result.reason == "reference did not converge: frozen_ln test_accuracy 0.35, needs >= 0.95"
    )
    assert judgement.result.findings == ()  # no number is offered as evidence
    # the same numbers with a reference that trained are a real verdict
    trained = _data("digits", [0.96, 0.97, 0.95, 0.96, 0.97], [0.975, 0.98, 0.976, 0.979, 0.981])
    assert judge_claim(CIFAR10, trained, convergence=LEVEL).result.verdict == "contradicted"


def test_the_catalog_level_for_the_dataset_applies_when_the_spec_states_none():
    judgement = judge_claim(CIFAR10, UNTRAINED)
    assert judgement.result.verdict == "not tested"
    assert "needs >= 0.95" in judgement.result.reason  # digits' level in studies/catalog/convergence.yaml


def test_an_arm_whose_trials_all_failed_or_diverged_is_not_tested():
    failed = _data("cifar10", [None] * 5, [0.85] * 5, status="failed")
    assert judge_claim(
        CIFAR10, failed, convergence=LEVEL.model_copy(update={"at_least": 0.8})
    ).result.reason == ("arm autonorm_s failed (5 of 5 trial(s) did not complete)")
    diverged = _data("cifar10", [float("nan")] * 5, [0.85, 0.86, 0.84, 0.85, 0.86])
    assert "arm autonorm_s diverged" in judge_claim(CIFAR10, diverged).result.reason


def test_preconditions_for_errors_read_at_most():
    data = StudyData(
        "california_housing",
        "test_rmse",
        False,
        "frozen_ln",
        tuple(TrialData("frozen_ln", s, "succeeded", v) for s, v in enumerate([0.9, 1.0, 1.1])),
    )
    unmet = reference_converged(data, Convergence(at_most=0.75, source="OLS"))
    assert not unmet.met and unmet.measured == "1 over 3 seed(s)"
    assert reference_converged(data, Convergence(at_most=1.5, source="OLS")).met
    assert [r.met for r in arms_trained(data)] == [True]


def test_a_convergence_level_needs_exactly_one_bound():
    with pytest.raises(ValueError, match="exactly one"):
        Convergence(source="x")
    with pytest.raises(ValueError, match="exactly one"):
        Convergence(at_least=0.9, at_most=1.0, source="x")


def test_a_100_class_claim_on_a_10_class_set_is_not_tested():
    cifar100 = get_claim("cifar100_autonorm_s_beats_frozen_ln")
    trained = _data("digits", [0.97] * 5, [0.96, 0.97, 0.95, 0.96, 0.97])
    result = judge_claim(cifar100, trained).result
    assert result.verdict == "not tested" and "cannot express" in result.reason


def test_a_verdict_on_a_stand_in_is_a_verdict_about_the_stand_in():
    trained = _data("digits", [0.96, 0.97, 0.95, 0.96, 0.97], [0.975, 0.98, 0.976, 0.979, 0.981])
    report = build_report(trained, provenance=PROVENANCE, claim=CIFAR10)
    assert report.scope == "stand-in" and report.verdict == "contradicted"
    assert "verdict about digits, a stand-in, not about cifar10" in report.to_markdown()
    assert json.loads(json.dumps(report.to_json()))["scope"] == "stand-in"


def test_the_report_prints_preregistered_values_and_preconditions_before_the_verdict():
    trained = _data("mnist", [0.981, 0.983, 0.982, 0.984, 0.98], [0.982, 0.984, 0.981, 0.983, 0.982])
    text = build_report(trained, provenance=PROVENANCE, claim=MNIST).to_markdown()
    order = ["## Pre-registered values", "## Preconditions", "**Verdict:", "## Sensitivity", "## Power"]
    positions = [text.index(marker) for marker in order]
    assert positions == sorted(positions)
    assert "| margin | 0.01 | NormLab's choice: The paper states no equivalence margin." in text
    assert "| convergence level (mnist) | >= 0.98 |" in text
    assert "| t_freeze | 2 | NormLab's choice:" in text
    html = build_report(trained, provenance=PROVENANCE, claim=MNIST).to_html()
    assert "Pre-registered values" in html and "Preconditions" in html


def test_an_equivalence_verdict_is_shown_across_its_margin():
    # a difference of about half a point: level within ±1 and ±2 points, not within ±0.5
    method = [0.985, 0.986, 0.984, 0.987, 0.985]
    reference = [0.98, 0.981, 0.979, 0.982, 0.98]
    judgement = judge_claim(MNIST, _data("mnist", method, reference))
    by_margin = {row.value: row.verdict for row in judgement.sensitivity}
    assert by_margin[0.01] == judgement.result.verdict == "supported"
    assert by_margin[0.005] == "contradicted"
    assert by_margin[0.02] == by_margin[0.03] == "supported"
    assert [row.preregistered for row in judgement.sensitivity] == [False, True, False, False]


def test_power_states_the_papers_effect_the_measured_spread_and_the_seeds_to_detect_it():
    reference = [0.88, 0.885, 0.89, 0.886, 0.87]
    method = [0.90, 0.91, 0.905, 0.915, 0.90]  # differences .02 .025 .015 .029 .03
    (row,) = judge_claim(CIFAR10, _data("cifar10", method, reference)).power
    assert row.paper_effect == pytest.approx(0.0338)  # the paper's 3.38 points
    assert row.seeds_run == 5 and row.margin is None
    assert row.sd_difference == pytest.approx(0.0063008, abs=1e-6)
    assert row.seeds_needed == 3  # 0.0338 against an SD of 0.0063: d = 5.4


def test_an_equivalence_claim_needs_the_seeds_that_put_its_interval_inside_the_margin():
    method = [0.985, 0.983, 0.986, 0.982, 0.984]
    reference = [0.98, 0.981, 0.982, 0.979, 0.983]
    (row,) = judge_claim(MNIST, _data("mnist", method, reference)).power
    assert row.paper_effect == pytest.approx(0.0036)
    assert row.margin == pytest.approx(0.01)
    assert row.sd_difference == pytest.approx(0.001581, abs=1e-6)  # differences .005 .002 .004 .003 .001
    # Not the seeds to detect 0.0036 (4 at this spread): the seeds for the 95 % interval to land within
    # ±0.01 when the true difference is 0.0036.
    assert row.seeds_needed == 3
    noisy = [0.99, 0.975, 0.992, 0.97, 0.988]
    (noisier,) = judge_claim(MNIST, _data("mnist", noisy, reference)).power
    assert noisier.seeds_needed == 18


def test_an_equivalence_claim_is_also_sized_for_no_true_difference():
    reference = [0.98, 0.981, 0.982, 0.979, 0.983]
    noisy = [0.99, 0.975, 0.992, 0.97, 0.988]
    (row,) = judge_claim(MNIST, _data("mnist", noisy, reference)).power
    # two one-sided tests at the measured spread when the true difference is 0: fewer seeds than when it
    # is the paper's 0.0036, which sits closer to the margin
    assert row.seeds_needed_null == seeds_for_equivalence(0.0, row.sd_difference, 0.01) == 11
    assert row.seeds_needed == 18 and row.missing is None


def _post_freeze_gate_arm(gate: str, values: list[float]) -> list[TrialData]:
    knobs = {"t_freeze": 2, "eps_h": 0.1, "tau": 0.5, "post_freeze_gate": gate}
    return [
        TrialData(
            "autonorm_s", s, "succeeded", v, group=f"post_freeze_gate={gate}", knobs=knobs, history=FROZE
        )
        for s, v in enumerate(values)
    ]


def test_an_equivalence_without_a_papers_effect_gets_the_null_effect_count_instead_of_a_dash():
    ablation = get_claim("autonorm_s_post_freeze_gate_ablation")
    sample = [0.97, 0.96, 0.95, 0.97, 0.96]
    expected = [v + d for v, d in zip(sample, [0.01, -0.02, 0.0, 0.03, 0.005], strict=True)]
    hard = [v + d for v, d in zip(sample, [0.0, 0.01, -0.01, 0.02, 0.0], strict=True)]
    trials = [
        *_post_freeze_gate_arm("sample", sample),
        *_post_freeze_gate_arm("expected", expected),
        *_post_freeze_gate_arm("hard", hard),
        *(TrialData("frozen_ln", s, "succeeded", 0.98) for s in range(5)),
    ]
    data = StudyData("digits", "test_accuracy", True, "frozen_ln", tuple(trials))
    expected_row, hard_row = judge_claim(ablation, data).power
    assert expected_row.paper_effect is None and expected_row.seeds_needed is None
    assert expected_row.sd_difference == pytest.approx(0.018028, abs=1e-6)
    assert expected_row.seeds_needed_null == 37  # ±0.01 at an SD of 0.018 with no true difference
    assert hard_row.seeds_needed_null == 16  # SD 0.0114
    assert expected_row.missing == "the paper states no effect: sized for no true difference only"


def test_a_power_row_without_a_measured_spread_says_why_it_has_no_count():
    # one seed shared between the arms: no spread of paired differences to size from
    trials = [TrialData("autonorm_s", s, "succeeded", 0.985, history=FROZE) for s in (0, 1)]
    trials += [TrialData("frozen_ln", s, "succeeded", 0.984) for s in (1, 2)]
    data = StudyData("mnist", "test_accuracy", True, "frozen_ln", tuple(trials))
    (row,) = judge_claim(MNIST, data).power
    assert row.sd_difference is None and row.seeds_needed is None and row.seeds_needed_null is None
    assert row.missing == "fewer than two paired seeds: no spread of the differences was measured"


def test_an_unclaimed_study_states_whether_its_reference_converged():
    report = build_report(UNTRAINED, provenance=PROVENANCE, convergence=LEVEL)
    assert report.verdict is None
    assert any("reference did not converge" in n for n in report.notes)
    unchecked = build_report(UNTRAINED, provenance=PROVENANCE)
    assert any("states no convergence level" in n for n in unchecked.notes)


def _gated_trial(seed: int, value: float, *, freezes: bool) -> TrialData:
    history = [{"epoch": 0, "train_gate_entropy_mean": 0.693, "gates_frozen": 0, "freeze_epoch": -1}]
    for epoch in (1, 2, 3, 4):
        frozen = freezes and epoch >= 2
        row = {
            "epoch": epoch,
            "train_gate_entropy_mean": 0.69 if freezes else 0.6 / epoch,
            "gates_frozen": int(frozen),
            "freeze_epoch": 2 if frozen else -1,
        }
        if not frozen:
            row["selector_grad_var"] = 1e-4 / epoch
        history.append(row)
    return TrialData(
        "autonorm_s",
        seed,
        "succeeded",
        value,
        knobs={"t_freeze": 2, "eps_h": 0.1, "tau": 0.5},
        history=tuple(history),
    )


def test_every_autonorm_report_shows_whether_and_when_each_seed_froze():
    trials = [_gated_trial(0, 0.981, freezes=True), _gated_trial(1, 0.982, freezes=False)]
    trials += [TrialData("frozen_ln", s, "succeeded", v) for s, v in enumerate([0.982, 0.983])]
    data = StudyData("mnist", "test_accuracy", True, "frozen_ln", tuple(trials))
    report = build_report(data, provenance=PROVENANCE, claim=MNIST)
    text = report.to_markdown()
    assert "## Mechanism: AutoNorm's gates, seed by seed" in text
    assert "| autonorm_s | 0 | yes, after epoch 2 |" in text
    assert "| autonorm_s | 1 | no | 0.15 | 0.1 | 2 |" in text
    names = {f.name for f in report.figures}
    assert {"gate_entropy_trajectory_autonorm_s", "selector_grad_var_autonorm_s"} <= names
    assert report.to_json()["mechanism"]["methods"][0]["seeds"][0]["freeze_epoch"] == 2
    # a study without gated methods has no mechanism section
    plain = StudyData("mnist", "test_accuracy", True, "frozen_ln", tuple(trials[2:]))
    assert build_report(plain, provenance=PROVENANCE).mechanism is None


def test_a_post_freeze_ablation_where_the_freeze_never_fired_is_not_tested():
    ablation = get_claim("autonorm_s_post_freeze_gate_ablation")

    def arm(gate: str, *, freezes: bool) -> list[TrialData]:
        return [
            TrialData(
                "autonorm_s",
                s,
                "succeeded",
                0.97,
                group=f"post_freeze_gate={gate}",
                knobs={**t.knobs, "post_freeze_gate": gate},
                history=t.history,
            )
            for s, t in enumerate(_gated_trial(s, 0.97, freezes=freezes) for s in range(3))
        ]

    reference = [TrialData("frozen_ln", s, "succeeded", 0.97) for s in range(3)]
    never = arm("sample", freezes=False) + arm("expected", freezes=False) + arm("hard", freezes=False)
    data = StudyData("digits", "test_accuracy", True, "frozen_ln", (*never, *reference))
    result = judge_claim(ablation, data).result
    assert result.verdict == "not tested"
    assert result.reason.startswith(
        "freeze did not fire: autonorm_s [post_freeze_gate=expected] froze in 0 of 3 seeds, needs 3"
    )
    fired = arm("sample", freezes=True) + arm("expected", freezes=True) + arm("hard", freezes=True)
    data = StudyData("digits", "test_accuracy", True, "frozen_ln", (*fired, *reference))
    assert judge_claim(ablation, data).result.verdict == "supported"  # identical accuracies, within ±1 point
    # the ablation keeps its stricter rule: one seed of five without the freeze is enough to leave it
    # untested, where a claim about AutoNorm-S as a whole would accept four of five
    mostly = [*arm("sample", freezes=True), *arm("expected", freezes=True), *arm("hard", freezes=True)]
    mostly[3] = replace(mostly[3], history=_gated_trial(0, 0.97, freezes=False).history)
    data = StudyData("digits", "test_accuracy", True, "frozen_ln", (*mostly, *reference))
    assert "froze in seeds 1, 2 (2 of 3), needs 3" in judge_claim(ablation, data).result.reason


# ----- AutoNorm-S verdicts only where AutoNorm-S acted ----------------------------------------------------

CIFAR10_GROUP = ("cifar10_stabilisation", "vision_gates_collapse_to_ln", "svhn_adanorm_best")


def _cifar10_study(froze: set[int], *, seeds: int = 8, autonorm_s: float = 0.96) -> StudyData:
    """AutoNorm-S (whose freeze fired in the seeds `froze`) against FrozenLN at 0.98, 8 seeds."""
    trials = [_gated_trial(s, autonorm_s + 0.001 * (s % 3), freezes=s in froze) for s in range(seeds)]
    trials += [TrialData("frozen_ln", s, "succeeded", 0.98 + 0.001 * (s % 2)) for s in range(seeds)]
    return StudyData("digits", "test_accuracy", True, "frozen_ln", tuple(trials))


def test_every_autonorm_s_comparison_states_per_seed_whether_the_freeze_fired():
    judgement = judge_claim(CIFAR10, _cifar10_study({0, 1, 2, 3, 4, 5, 6, 7}))
    (freeze,) = [p for p in judgement.preconditions if p.name.startswith("freeze fired")]
    assert freeze.met and freeze.measured == "froze in seeds 0, 1, 2, 3, 4, 5, 6, 7 (8 of 8)"
    assert judgement.result.verdict == "contradicted"  # 0.96 against 0.98: a verdict on AutoNorm-S


def test_a_comparison_where_the_freeze_fired_in_too_few_seeds_is_not_tested():
    # the cpu study on digits: the freeze fired in 3 of 8 seeds; in the others AutoNorm-S was AutoNorm
    judgement = judge_claim(CIFAR10, _cifar10_study({1, 3, 4}))
    result = judgement.result
    assert result.verdict == "not tested" and result.findings == ()
    assert result.summary.startswith("not tested: freeze did not fire: autonorm_s froze in seeds 1, 3, 4")
    assert "(3 of 8), needs 7" in result.reason
    (freeze,) = [p for p in judgement.preconditions if p.name.startswith("freeze fired")]
    assert not freeze.met and freeze.measured == "froze in seeds 1, 3, 4 (3 of 8)"
    assert "80 %" in freeze.source


def test_the_freeze_must_fire_in_at_least_80_percent_of_the_seeds():
    assert judge_claim(CIFAR10, _cifar10_study({0, 1, 2, 3, 4, 5, 6})).result.verdict == "contradicted"
    assert judge_claim(CIFAR10, _cifar10_study({0, 1, 2, 3, 4, 5})).result.verdict == "not tested"
    # five seeds: four must freeze; three seeds: all three (and never fewer than two)
    assert judge_claim(CIFAR10, _cifar10_study({0, 1, 2, 3}, seeds=5)).result.verdict == "contradicted"
    assert judge_claim(CIFAR10, _cifar10_study({0, 1}, seeds=3)).result.verdict == "not tested"


def test_seeds_whose_history_does_not_record_the_freeze_do_not_count_as_frozen():
    unrecorded = StudyData(
        "digits",
        "test_accuracy",
        True,
        "frozen_ln",
        tuple(TrialData(m, s, "succeeded", 0.97) for m in ("autonorm_s", "frozen_ln") for s in range(5)),
    )
    result = judge_claim(CIFAR10, unrecorded).result
    assert result.verdict == "not tested"
    assert "froze in 0 of 5 seeds; not recorded in seeds 0, 1, 2, 3, 4" in result.reason


@pytest.mark.parametrize(
    "claim", ["svhn_adanorm_best", "cifar10_stabilisation", "vision_gates_collapse_to_ln"]
)
def test_ordering_pairs_and_gate_patterns_on_autonorm_s_carry_the_freeze_precondition_too(claim):
    judgement = judge_claim(get_claim(claim), _cifar10_study({2}))
    assert judgement.result.verdict == "not tested"
    assert judgement.result.reason.startswith("freeze did not fire: autonorm_s froze in seeds 2 (1 of 8)")


def test_claims_that_read_no_autonorm_s_row_have_no_freeze_precondition():
    nlp = get_claim("nlp_gates_mixed_deeper_dyt")  # read on unfrozen AutoNorm
    assert freezing_rows(nlp.check) == []
    sweep = get_claim("autonorm_s_freeze_sweep")  # judged per grid point by the check itself
    assert freezing_rows(sweep.check) == []
    assert freezing_rows(CIFAR10.check) == ["autonorm_s"]
    ablation = get_claim("autonorm_s_post_freeze_gate_ablation")
    assert [describe_selector(r) for r in freezing_rows(ablation.check)] == [
        "autonorm_s [post_freeze_gate=expected]",
        "autonorm_s [post_freeze_gate=sample]",
        "autonorm_s [post_freeze_gate=hard]",
    ]


@pytest.mark.parametrize("claim", claim_ids())
def test_no_autonorm_s_claim_escapes_the_freeze_precondition(claim):
    assert freeze_rule_problems(get_claim(claim)) == []


def test_a_check_that_names_autonorm_s_where_the_judge_cannot_see_it_is_rejected():
    spike = get_claim("mean_spike_one_matrix_relu")
    spiking = {**spike.check.spiking, "method": "autonorm_s"}
    hidden = spike.model_copy(update={"check": spike.check.model_copy(update={"spiking": spiking})})
    assert "names autonorm_s where the judge does not look for it" in " ".join(freeze_rule_problems(hidden))
    ablation = get_claim("autonorm_s_post_freeze_gate_ablation")
    nlp = get_claim("nlp_gates_mixed_deeper_dyt")
    mislabelled = nlp.model_copy(update={"requires": ablation.requires})
    assert "requires the freeze to fire but reads no AutoNorm-S row" in " ".join(
        freeze_rule_problems(mislabelled)
    )


def test_a_trainability_grid_is_not_held_to_the_mean_over_every_configuration():
    # The grid's reference method runs collapsed configurations and unchosen learning rates too: pooled,
    # FrozenLN sits far below digits' 0.95 while the plain configuration (Pre-Norm, beta 1) trains. The
    # check's own reference row is what must converge, so the verdict is the check's.
    from tests.studies.claims.test_trainability import POST_RISING, PRE_RISING, _study

    claim = get_claim("init_rank_predicts_trainability")
    trials = [
        replace(t, knobs={**t.knobs, "init_scale": 1.0}, group=f"{t.group},init_scale=1.0")
        for t in _study(PRE_RISING, POST_RISING)
    ]
    study = StudyData("digits", "test_accuracy", True, "frozen_ln", tuple(trials))
    pooled = sum(t.value for t in trials) / len(trials)
    assert pooled < 0.95
    judgement = judge_claim(claim, study)
    assert "reference converged" not in [p.name for p in judgement.preconditions]
    assert judgement.result.verdict == "supported", judgement.result.summary

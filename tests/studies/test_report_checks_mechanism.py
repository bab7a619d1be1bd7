"""Claim checks about mechanisms (gate patterns, rank against depth, mean spike, width threshold, trends)
on synthetic trials whose verdict is known: supported, contradicted, or inconclusive at this power."""

from __future__ import annotations

import pytest

from studies.claims import (
    CONTRADICTED,
    INCONCLUSIVE,
    SUPPORTED,
    GatePatternCheck,
    MeanSpikeCheck,
    RankVsDepthCheck,
    StudyData,
    TrendCheck,
    TrialData,
    WidthThresholdCheck,
)
from studies.claims.verdicts import NOT_TESTED
from studies.claims.width_threshold import activation_survival, theoretical_threshold

WOBBLE = [0.01, -0.008, 0.004, -0.005, 0.0]


def _data(trials) -> StudyData:
    return StudyData("digits", "test_accuracy", True, "frozen_ln", tuple(trials))


# ------------------------------------------------------------------------------------------- gates


def _gate_trials(weights_per_layer, entropies_per_layer=None, seeds=5):
    trials = []
    for seed in range(seeds):
        metrics = {
            f"gate_dyt_weight_{i}": w + WOBBLE[(seed + i) % 5] for i, w in enumerate(weights_per_layer)
        }
        for i, e in enumerate(entropies_per_layer or [0.3] * len(weights_per_layer)):
            metrics[f"gate_entropy_{i}"] = e + WOBBLE[(seed + 2) % 5]
        trials.append(TrialData("autonorm_s", seed, "succeeded", 0.9, metrics=metrics))
    return _data(trials)


COLLAPSE = GatePatternCheck(pattern="collapse_to_ln")
MIXED = GatePatternCheck(pattern="mixed_deeper_dyt")


def test_vision_gates_below_one_half_in_every_layer_support_collapse_to_ln():
    result = COLLAPSE.evaluate(_gate_trials([0.10, 0.20, 0.15, 0.05]))
    assert result.verdict == SUPPORTED
    assert [f.label for f in result.findings] == [f"layer {i}: final DyT weight" for i in range(4)]
    assert result.findings[1].measured == pytest.approx(0.20 + sum(WOBBLE) / 5)  # every wobble once


def test_one_layer_preferring_dyt_contradicts_collapse_to_ln():
    result = COLLAPSE.evaluate(_gate_trials([0.10, 0.20, 0.90, 0.05]))
    assert result.verdict == CONTRADICTED
    assert result.findings[2].verdict == CONTRADICTED


def test_gates_still_at_one_half_are_inconclusive_about_collapse():
    result = COLLAPSE.evaluate(_gate_trials([0.50, 0.49, 0.51]))
    assert result.verdict == INCONCLUSIVE
    assert all("80 % power" in f.note for f in result.findings)


def test_without_gate_metrics_the_pattern_cannot_be_judged():
    data = _data([TrialData("autonorm_s", s, "succeeded", 0.9) for s in range(3)])
    result = COLLAPSE.evaluate(data)
    assert result.verdict == INCONCLUSIVE and not result.findings
    assert "gate_dyt_weight" in result.summary


def test_mixed_gates_with_dyt_rising_with_depth_support_the_nlp_pattern():
    result = MIXED.evaluate(_gate_trials([0.2, 0.4, 0.6, 0.8], [0.5, 0.6, 0.6, 0.5]))
    assert result.verdict == SUPPORTED
    slope, entropy = result.findings
    assert slope.measured == pytest.approx(0.2, abs=0.01)
    assert entropy.measured == pytest.approx(0.55 + sum(WOBBLE) / 5)


def test_dyt_falling_with_depth_contradicts_the_nlp_pattern():
    result = MIXED.evaluate(_gate_trials([0.8, 0.6, 0.4, 0.2], [0.5, 0.6, 0.6, 0.5]))
    assert result.verdict == CONTRADICTED
    assert result.findings[0].verdict == CONTRADICTED


def test_collapsed_nlp_gates_contradict_staying_mixed():
    result = MIXED.evaluate(_gate_trials([0.2, 0.4, 0.6, 0.8], [0.02, 0.03, 0.02, 0.03]))
    assert result.findings[1].verdict == CONTRADICTED
    assert result.verdict == CONTRADICTED


def test_flat_noisy_gates_are_inconclusive_about_the_depth_trend():
    trials = []
    for seed, weights in enumerate([[0.5, 0.6, 0.4], [0.5, 0.4, 0.6], [0.55, 0.5, 0.5]]):
        metrics = {f"gate_dyt_weight_{i}": w for i, w in enumerate(weights)}
        metrics |= {f"gate_entropy_{i}": 0.6 for i in range(3)}
        trials.append(TrialData("autonorm_s", seed, "succeeded", 0.9, metrics=metrics))
    result = MIXED.evaluate(_data(trials))
    assert result.findings[0].verdict == INCONCLUSIVE
    assert result.verdict == INCONCLUSIVE


# -------------------------------------------------------------------------------------- rank vs depth


def _rank_trials(post: list[float], pre: list[float], per_depth: dict[str, list[float]] | None = None):
    trials = []
    for placement, values in (("post", post), ("pre", pre)):
        for seed, value in enumerate(values):
            init = {"epoch": 0, "init_erank_jacobian": value}
            for depth, rank in enumerate((per_depth or {}).get(placement, [])):
                init[f"init_erank_repr_{depth}"] = rank + WOBBLE[(seed + depth) % 5] / 10
            trials.append(
                TrialData(
                    "frozen_ln",
                    seed,
                    "succeeded",
                    0.3,
                    group=f"norm_placement={placement}",
                    knobs={"norm_placement": placement},
                    history=(init, {"epoch": 1, "val_accuracy": 0.3}),
                )
            )
    return _data(trials)


RANK = RankVsDepthCheck()


def test_post_norm_collapsing_while_pre_norm_plateaus_supports_the_claim():
    result = RANK.evaluate(_rank_trials([0.05, 0.04, 0.06, 0.05], [0.40, 0.38, 0.42, 0.41]))
    assert result.verdict == SUPPORTED
    assert [f.expected for f in result.findings] == ["< 0.1", "> 0.2", "> 0"]
    assert "no rank at every depth" in result.notes[0]


def test_post_norm_keeping_its_rank_contradicts_the_collapse():
    result = RANK.evaluate(_rank_trials([0.50, 0.52, 0.49, 0.51], [0.40, 0.38, 0.42, 0.41]))
    assert result.verdict == CONTRADICTED
    assert result.findings[0].verdict == CONTRADICTED


def test_two_noisy_seeds_are_inconclusive_about_rank_collapse():
    result = RANK.evaluate(_rank_trials([0.05, 0.3], [0.4, 0.1]))
    assert result.verdict == INCONCLUSIVE


def test_ranks_at_every_depth_add_a_slope_finding():
    per_depth = {"post": [0.4, 0.3, 0.2, 0.1, 0.05], "pre": [0.4, 0.35, 0.33, 0.33, 0.33]}
    result = RANK.evaluate(_rank_trials([0.05, 0.04, 0.06, 0.05], [0.40, 0.38, 0.42, 0.41], per_depth))
    assert len(result.findings) == 4
    slope = result.findings[3]
    assert slope.expected == "< 0" and slope.verdict == SUPPORTED
    assert slope.measured == pytest.approx(-0.09, abs=0.003)  # least squares over depths 0..4
    assert not result.notes


def test_init_measurements_come_from_the_epoch_zero_row_of_the_history():
    trial = _rank_trials([0.05], [0.4]).trials[0]
    assert trial.get("init_erank_jacobian") == 0.05
    assert trial.get("val_accuracy") is None  # the last metrics hold it, not the init row


# ---------------------------------------------------------------------------------------- mean spike


def _spike_trials(growth: dict[tuple[str, str], float]):
    trials = []
    for k, ((branch, activation), grow) in enumerate(growth.items()):
        for seed in range(5):
            last = 0.5 + grow + WOBBLE[(seed + k) % 5]
            init = {"epoch": 0, "init_mean_spike_first": 0.5, "init_mean_spike_last": last}
            trials.append(
                TrialData(
                    "frozen_ln",
                    seed,
                    "succeeded",
                    0.2,
                    group=f"branch={branch},activation={activation}",
                    knobs={"branch": branch, "activation": activation},
                    history=(init,),
                )
            )
    return _data(trials)


SPIKE = MeanSpikeCheck()


def test_a_spike_growing_only_for_one_matrix_relu_supports_the_claim():
    data = _spike_trials(
        {("one_matrix", "relu"): 0.15, ("two_matrix", "relu"): 0.0, ("one_matrix", "tanh"): -0.01}
    )
    result = SPIKE.evaluate(data)
    assert result.verdict == SUPPORTED
    assert len(result.findings) == 3
    assert result.findings[1].measured == pytest.approx(0.15)  # each row's wobble averages out


def test_a_spike_growing_more_with_two_matrices_contradicts_the_claim():
    data = _spike_trials(
        {("one_matrix", "relu"): 0.05, ("two_matrix", "relu"): 0.2, ("one_matrix", "tanh"): 0.0}
    )
    result = SPIKE.evaluate(data)
    assert result.verdict == CONTRADICTED
    assert result.findings[1].verdict == CONTRADICTED


def test_a_missing_control_row_leaves_the_spike_claim_inconclusive():
    data = _spike_trials({("one_matrix", "relu"): 0.15, ("two_matrix", "relu"): 0.0})
    result = SPIKE.evaluate(data)
    assert result.verdict == INCONCLUSIVE
    assert result.findings[2].measured is None and result.findings[2].verdict == INCONCLUSIVE


# ----------------------------------------------------------------------------------- width threshold


def test_the_theoretical_thresholds_are_one_over_the_mean_squared_derivative():
    assert activation_survival("relu") == pytest.approx(0.5, abs=1e-6)
    assert activation_survival("gelu") == pytest.approx(0.456, abs=1e-3)
    assert theoretical_threshold("relu") == pytest.approx(2.0, abs=1e-5)
    assert theoretical_threshold("gelu") == pytest.approx(2.19, abs=0.01)


# Widths on both sides of each threshold, close enough to resolve it (ReLU 2, GELU ~2.19).
RESOLVING_WIDTHS = (1.5, 1.75, 1.9, 2.1, 2.3, 2.5, 3.0, 4.0)


def _width_trials(rank_of, widths=RESOLVING_WIDTHS, metric="init_branch_active_width"):
    trials = []
    for activation in ("relu", "gelu"):
        for width in widths:
            for seed in range(3):
                trials.append(
                    TrialData(
                        "frozen_ln",
                        seed,
                        "succeeded",
                        0.2,
                        group=f"width_expansion={width},activation={activation}",
                        knobs={"width_expansion": width, "activation": activation},
                        history=({"epoch": 0, metric: rank_of(activation, width, seed)},),
                    )
                )
    return _data(trials)


# The catalog's reading: the soft count of active units per width, full at 1, judged outside ±4 %.
WIDTH = WidthThresholdCheck(
    metric="init_branch_active_width", full_level=1.0, tolerance=0.04, resolution=0.05
)


def test_rank_deficient_below_and_full_above_the_threshold_supports_the_claim():
    def count(activation, width, seed):
        return activation_survival(activation) * width + 0.002 * (seed - 1)

    result = WIDTH.evaluate(_width_trials(count), paper={"relu": 2.0, "gelu": 2.19})
    assert result.verdict == SUPPORTED
    relu = next(f for f in result.findings if f.label == "relu: full-rank width threshold")
    gelu = next(f for f in result.findings if f.label == "gelu: full-rank width threshold")
    assert relu.measured == pytest.approx(2.0, abs=1e-6) and relu.paper == 2.0  # interpolated crossing
    assert gelu.measured == pytest.approx(theoretical_threshold("gelu"), abs=1e-3)


def test_full_rank_well_below_the_threshold_contradicts_the_claim():
    def count(activation, width, seed):
        return 1.2 + 0.01 * seed if activation == "gelu" else 0.5 * width

    result = WIDTH.evaluate(_width_trials(count))
    assert result.verdict == CONTRADICTED
    gelu = next(f for f in result.findings if f.label == "gelu: full-rank width threshold")
    assert gelu.verdict == CONTRADICTED and gelu.measured == 1.5


def test_a_grid_with_a_wide_gap_around_the_threshold_leaves_it_not_tested():
    # 1.5 and 3.0 on either side of ReLU's 2: any threshold between them would pass.
    def rank(activation, width, seed):
        return min(1.0, activation_survival(activation) * width - 0.01 * seed)

    check = WidthThresholdCheck(activations=["relu"])
    result = check.evaluate(_width_trials(rank, widths=(1.0, 1.5, 3.0, 4.0), metric="init_branch_rank"))
    assert result.verdict == NOT_TESTED
    relu = next(f for f in result.findings if f.label == "relu: full-rank width threshold")
    assert "any threshold between them would pass" in relu.note


def test_without_the_branch_rank_measurement_the_width_claim_is_inconclusive():
    data = _data([TrialData("frozen_ln", 0, "succeeded", 0.2, knobs={"width_expansion": 2.0})])
    result = WIDTH.evaluate(data)
    assert result.verdict == INCONCLUSIVE
    assert "init_branch_active_width" in result.summary


# ---------------------------------------------------------------------------------------------- trend


def _trend_trials(points: list[tuple[float, float]], seeds=2):
    trials = []
    for skip, rank in points:
        for seed in range(seeds):
            trials.append(
                TrialData(
                    "frozen_ln",
                    seed,
                    "succeeded",
                    rank * 2,
                    group=f"skip_scale={skip}",
                    knobs={"skip_scale": skip},
                    history=({"epoch": 0, "init_erank_jacobian": rank + WOBBLE[seed] / 100},),
                )
            )
    return _data(trials)


SKIP = TrendCheck(x="knob.skip_scale", y="init_erank_jacobian", expect="negative")


def test_rank_falling_with_the_branch_scale_supports_a_negative_trend():
    data = _trend_trials([(0.1, 0.99), (0.3, 0.95), (1.0, 0.9), (3.0, 0.7), (10.0, 0.6), (30.0, 0.5)])
    result = SKIP.evaluate(data)
    assert result.verdict == SUPPORTED
    (finding,) = result.findings
    assert finding.measured == pytest.approx(-1.0)
    assert finding.n == 6
    assert finding.p_value == pytest.approx(2 / 720)  # exact permutation: 2 of 6! orderings as extreme


def test_rank_rising_with_the_branch_scale_contradicts_a_negative_trend():
    data = _trend_trials([(0.1, 0.5), (0.3, 0.6), (1.0, 0.7), (3.0, 0.9), (10.0, 0.95), (30.0, 0.99)])
    assert SKIP.evaluate(data).verdict == CONTRADICTED


def test_four_points_cannot_reach_significance_and_say_what_they_could_detect():
    data = _trend_trials([(0.1, 0.99), (0.3, 0.95), (1.0, 0.9), (3.0, 0.7)])
    result = SKIP.evaluate(data)
    assert result.verdict == INCONCLUSIVE
    finding = result.findings[0]
    assert finding.p_value == pytest.approx(1 / 12)
    assert finding.mde is not None and 0.9 < finding.mde < 1.0
    assert "smallest |rho| detectable" in finding.note


def test_a_trend_of_the_final_metric_on_the_init_rank_reads_both_axes_per_grid_point():
    data = _trend_trials([(0.1, 0.99), (0.3, 0.95), (1.0, 0.9), (3.0, 0.7), (10.0, 0.6)])
    check = TrendCheck(x="init_erank_jacobian", y="primary", expect="positive")
    points = check.points(data)
    assert len(points) == 5 and all(n == 2 for *_, n in points)
    assert check.evaluate(data).verdict == SUPPORTED

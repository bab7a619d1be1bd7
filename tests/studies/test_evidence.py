"""Mechanism evidence on synthetic trials with known answers: per-layer gates across seeds, the
layers x epochs matrices, init rank against depth per placement, and final metric against init rank."""

from __future__ import annotations

import json
import math

import pytest
from scipy import stats

from studies.evidence import (
    EvidenceTrial,
    build_evidence,
    depth_series,
    gate_evidence,
    layer_gate_values,
    rank_evidence,
)

# autonorm_s, 3 seeds, 2 layers, epochs 0..2. Final DyT weight of layer 0: 0.1, 0.2, 0.3 (mean 0.2);
# layer 1: 0.7, 0.8, 0.9 (mean 0.8). Entropy of layer 0 is 0.3 on every seed.
FINAL_WEIGHTS = {0: (0.1, 0.7), 1: (0.2, 0.8), 2: (0.3, 0.9)}


def _gated_trial(seed: int, method: str = "autonorm_s", status: str = "succeeded") -> EvidenceTrial:
    w0, w1 = FINAL_WEIGHTS[seed]
    history = (
        {"epoch": 0, "gate_dyt_weight_0": 0.5, "gate_dyt_weight_1": 0.5, "gate_entropy_0": math.log(2)},
        {"epoch": 1, "gate_dyt_weight_0": 0.3 + seed / 10, "gate_dyt_weight_1": 0.6, "gate_entropy_0": 0.5},
        {"epoch": 2, "gate_dyt_weight_0": w0, "gate_dyt_weight_1": w1, "gate_entropy_0": 0.3},
    )
    final = {**history[-1], "gate_entropy_mean": 0.3, "train_gate_entropy_0": 0.01, "test_accuracy": 0.9}
    return EvidenceTrial(
        trial_key=f"s/final/{method}/seed{seed}",
        method=method,
        seed=seed,
        status=status,
        value=0.9,
        final=final,
        history=history,
    )


def test_layer_gate_values_read_per_layer_keys_only():
    metrics = {
        "gate_dyt_weight_0": 0.2,
        "gate_dyt_weight_11": 0.9,
        "gate_entropy_0": 0.4,
        "gate_entropy_mean": 0.4,  # the layer average, not a layer
        "train_gate_entropy_0": 0.1,  # the training-batch signal, not the evaluation gate
        "gate_dyt_weight_2": float("nan"),
    }
    assert layer_gate_values(metrics) == {"dyt_weight": {0: 0.2, 11: 0.9}, "entropy": {0: 0.4}}


def test_final_gates_per_layer_are_the_mean_over_seeds_with_a_t_interval():
    evidence = gate_evidence([_gated_trial(s) for s in range(3)], confidence=0.95)
    assert evidence is not None
    [method] = evidence.methods
    assert (method.label, method.n_trials) == ("autonorm_s", 3)
    layer0, layer1 = method.layers
    assert layer0.dyt_weight.mean == pytest.approx(0.2) and layer1.dyt_weight.mean == pytest.approx(0.8)
    half_width = stats.t.ppf(0.975, df=2) * 0.1 / math.sqrt(3)  # sd of (0.1, 0.2, 0.3) is 0.1
    assert layer0.dyt_weight.ci_low == pytest.approx(0.2 - half_width)
    assert layer0.dyt_weight.ci_high == pytest.approx(0.2 + half_width)
    # Identical values on every seed: the interval collapses onto the mean.
    assert (layer0.entropy.mean, layer0.entropy.ci_low, layer0.entropy.ci_high) == pytest.approx((0.3,) * 3)
    assert layer1.entropy.n == 0 and layer1.entropy.mean is None  # layer 1 never reported an entropy


def test_the_epoch_matrices_are_layers_by_epochs_averaged_over_seeds():
    [method] = gate_evidence([_gated_trial(s) for s in range(3)]).methods
    assert method.epochs == (0, 1, 2)
    assert method.dyt_weight_by_epoch[0] == pytest.approx((0.5, 0.4, 0.2))
    assert method.dyt_weight_by_epoch[1] == pytest.approx((0.5, 0.6, 0.8))
    assert method.entropy_by_epoch[0] == pytest.approx((math.log(2), 0.5, 0.3))
    assert method.entropy_by_epoch[1] == (None, None, None)


def test_failed_trials_and_methods_without_gates_are_left_out_of_the_gate_views():
    plain = EvidenceTrial(
        "s/final/frozen_ln/seed0", "frozen_ln", 0, "succeeded", 0.8, final={"objective": 0.8}
    )
    failed = _gated_trial(2, status="failed")
    evidence = gate_evidence([_gated_trial(0), _gated_trial(1), failed, plain])
    assert [m.label for m in evidence.methods] == ["autonorm_s"]
    assert evidence.methods[0].n_trials == 2
    assert gate_evidence([plain]) is None


def test_grid_points_of_one_method_are_separate_rows():
    trials = [
        EvidenceTrial(
            f"k{i}", "autonorm", 0, "succeeded", 0.9, group=f"tau={tau}", final={"gate_dyt_weight_0": tau}
        )
        for i, tau in enumerate((0.5, 1.0))
    ]
    assert [m.label for m in gate_evidence(trials).methods] == ["autonorm [tau=0.5]", "autonorm [tau=1.0]"]


# ------------------------------------------------------------------------------------------- ranks


def _grid_trial(placement: str, seed: int, ranks: list[float], jacobian: float, value: float | None):
    init = {"epoch": 0, "init_erank_jacobian": jacobian, "objective": 0.1}
    init.update({f"init_erank_repr_{depth}": rank for depth, rank in enumerate(ranks)})
    return EvidenceTrial(
        trial_key=f"s/grid/frozen_ln/norm_placement={placement}/seed{seed}",
        method="frozen_ln",
        seed=seed,
        status="succeeded" if value is not None else "failed",
        value=value,
        group=f"norm_placement={placement}",
        placement=placement,
        history=(init, {"epoch": 1, "objective": 0.5}),
    )


RANK_TRIALS = [
    _grid_trial("pre", 0, [0.9, 0.8, 0.7], jacobian=0.8, value=0.91),
    _grid_trial("pre", 1, [0.9, 0.6, 0.5], jacobian=0.7, value=0.90),
    _grid_trial("post", 0, [0.9, 0.4, 0.1], jacobian=0.2, value=0.35),
    _grid_trial("post", 1, [0.9, 0.2, 0.1], jacobian=0.1, value=None),  # could not train
]


def test_init_rank_against_depth_is_averaged_per_placement():
    evidence = rank_evidence(RANK_TRIALS, metric="accuracy", higher_is_better=True)
    assert evidence is not None and evidence.per_depth and evidence.notes == ()
    curves = {curve.label: curve for curve in evidence.placements}
    assert set(curves) == {"pre", "post"}
    assert [p.depth for p in curves["pre"].points] == [0, 1, 2]
    assert [p.value.mean for p in curves["pre"].points] == pytest.approx([0.9, 0.7, 0.6])
    # Failed trials count: the init rank does not depend on training.
    assert curves["post"].n_trials == 2
    assert [p.value.mean for p in curves["post"].points] == pytest.approx([0.9, 0.3, 0.1])
    assert [curve.label for curve in evidence.groups] == [
        "frozen_ln [norm_placement=pre]",
        "frozen_ln [norm_placement=post]",
    ]


def test_the_scatter_has_one_point_per_trial_and_a_rank_correlation_over_those_with_a_value():
    evidence = rank_evidence(RANK_TRIALS, metric="accuracy", higher_is_better=True)
    assert [(p.seed, p.placement, p.init_rank, p.value) for p in evidence.points] == [
        (0, "pre", 0.8, 0.91),
        (1, "pre", 0.7, 0.90),
        (0, "post", 0.2, 0.35),
        (1, "post", 0.1, None),
    ]
    # Ranks 0.8 > 0.7 > 0.2 and values 0.91 > 0.90 > 0.35: perfectly monotone.
    assert evidence.spearman == pytest.approx(1.0)


def test_without_per_depth_ranks_first_and_last_stand_for_depth_zero_and_the_model_depth():
    init = {"epoch": 0, "init_erank_repr_first": 0.9, "init_erank_repr_last": 0.3}
    assert depth_series(init, 8) == ({0: 0.9, 8: 0.3}, False)
    assert depth_series(init, None) == ({}, False)
    assert depth_series({**init, "init_erank_repr_0": 0.9, "init_erank_repr_1": 0.5}, 8) == (
        {0: 0.9, 1: 0.5},
        True,
    )
    known = EvidenceTrial(
        "a", "frozen_ln", 0, "succeeded", 0.9, depth=8, history=({**init, "init_erank_jacobian": 0.5},)
    )
    unknown = EvidenceTrial(
        "b", "frozen_ln", 1, "succeeded", 0.8, history=({**init, "init_erank_jacobian": 0.4},)
    )
    evidence = rank_evidence([known, unknown], metric="accuracy", higher_is_better=True)
    assert not evidence.per_depth
    [curve] = evidence.placements
    assert [(p.depth, p.value.mean, p.value.n) for p in curve.points] == [(0, 0.9, 1), (8, 0.3, 1)]
    assert any("first (depth 0) and last" in note for note in evidence.notes)
    assert any("left out of the curves" in note for note in evidence.notes)
    assert len(evidence.points) == 2 and evidence.spearman is None  # two points: no correlation


def test_trials_without_an_epoch_zero_report_give_no_rank_views():
    assert rank_evidence([_gated_trial(0)], metric="accuracy", higher_is_better=True) is None


# ------------------------------------------------------------------------------------------- whole


def test_build_evidence_combines_both_views_and_renders_plain_json():
    evidence = build_evidence(
        [*(_gated_trial(s) for s in range(3)), *RANK_TRIALS],
        dataset="fashion_mnist",
        metric="accuracy",
        higher_is_better=True,
    )
    assert not evidence.is_empty
    payload = evidence.to_json()
    assert json.loads(json.dumps(payload, allow_nan=False)) == payload  # strict JSON, lists not tuples
    assert payload["gates"]["methods"][0]["dyt_weight_by_epoch"][1] == pytest.approx([0.5, 0.6, 0.8])
    assert payload["ranks"]["spearman"] == pytest.approx(1.0)
    assert {c["label"] for c in payload["ranks"]["placements"]} == {"pre", "post"}


def test_evidence_without_gate_or_rank_data_is_empty():
    plain = EvidenceTrial("k", "frozen_ln", 0, "succeeded", 0.9, history=({"epoch": 1, "objective": 0.9},))
    evidence = build_evidence([plain], dataset="digits", metric="accuracy", higher_is_better=True)
    assert evidence.is_empty and evidence.to_json()["gates"] is None


def test_a_confidence_outside_zero_and_one_is_refused():
    with pytest.raises(ValueError, match="confidence"):
        build_evidence([], dataset="digits", metric="accuracy", higher_is_better=True, confidence=1.5)


def test_no_rank_correlation_is_given_over_ranks_that_differ_only_by_round_off():
    # 0.9999999996 to 1.0 (float32 round-off of one rank): a rho over their order would rank noise.
    trials = [
        _grid_trial("pre", seed, [0.9, 0.8, 0.7], jacobian=1.0 - 4e-10 * seed, value=0.5 + 0.1 * seed)
        for seed in range(4)
    ]
    evidence = rank_evidence(trials, metric="accuracy", higher_is_better=True, rank_key="init_erank_jacobian")
    assert evidence.spearman is None
    assert any("round-off of one value, so their order is noise" in note for note in evidence.notes)

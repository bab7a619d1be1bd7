import math

import pytest
import torch

from workers.training.metrics import (
    FREEZE_SIGNAL_PREFIXES,
    SELECTOR_GRAD_VAR,
    GateStats,
    MetricAccumulator,
    SelectorGradVariance,
    TaskLoss,
    TrainGateEntropy,
    layer_entropies,
)
from workers.training.seed_metrics import StackedSelectorGradVariance


def test_accuracy_ignores_padded_tokens():
    acc = MetricAccumulator("accuracy", ignore_index=-100)
    logits = torch.tensor([[[5.0, 0.0], [0.0, 5.0], [5.0, 0.0]]])  # (B=1, T=3, K=2)
    labels = torch.tensor([[0, 0, -100]])
    acc.update(logits, labels)
    assert acc.compute() == pytest.approx(0.5)


def test_rmse_is_reported_in_original_target_units():
    rmse = MetricAccumulator("rmse", target_std=3.0)
    rmse.update(torch.tensor([[1.0], [2.0]]), torch.tensor([0.0, 0.0]))
    assert rmse.compute() == pytest.approx(math.sqrt(2.5) * 3.0)


def test_perplexity_is_exp_of_mean_token_cross_entropy():
    ppl = MetricAccumulator("perplexity")
    logits = torch.zeros(2, 3, 4)  # uniform over 4 tokens -> perplexity 4
    ppl.update(logits, torch.tensor([[1, 2, -100], [0, 3, 1]]))
    assert ppl.compute() == pytest.approx(4.0)


def test_an_empty_pass_gives_nan_not_an_error():
    assert math.isnan(MetricAccumulator("accuracy").compute())


def test_label_smoothing_applies_to_classification_and_soft_targets():
    logits = torch.tensor([[4.0, 0.0, 0.0]])
    hard = TaskLoss("image_classification", label_smoothing=0.0)(logits, torch.tensor([0]))
    smooth = TaskLoss("image_classification", label_smoothing=0.1)(logits, torch.tensor([0]))
    soft = TaskLoss("image_classification", label_smoothing=0.1)(logits, torch.tensor([[1.0, 0.0, 0.0]]))
    assert smooth > hard
    assert soft == pytest.approx(smooth.item())


def test_regression_loss_is_mse_on_standardised_targets():
    loss = TaskLoss("regression")(torch.tensor([[1.0], [3.0]]), torch.tensor([0.0, 1.0]))
    assert loss.item() == pytest.approx((1 + 4) / 2)


def test_gate_stats_weight_batches_by_size_and_average_layers():
    stats = GateStats()
    stats.update(
        [
            {"layer": "a", "dyt_weight": 1.0, "entropy": 0.2},
            {"layer": "b", "dyt_weight": 0.0, "entropy": 0.4},
        ],
        3,
    )
    stats.update(
        [
            {"layer": "a", "dyt_weight": 0.0, "entropy": 0.6},
            {"layer": "b", "dyt_weight": 0.0, "entropy": 0.0},
        ],
        1,
    )
    metrics = stats.compute()
    assert metrics["gate_dyt_weight_0"] == pytest.approx(0.75)
    assert metrics["gate_entropy_0"] == pytest.approx(0.3)
    assert metrics["gate_entropy_1"] == pytest.approx(0.3)
    assert metrics["gate_entropy_mean"] == pytest.approx(0.3)


def test_models_without_gates_report_no_gate_metrics():
    stats = GateStats()
    stats.update([], 8)
    assert stats.compute() == {}


def _gated_model():
    from models import build_model

    torch.manual_seed(0)
    return build_model("vit_lite_tiny", {"norm": "autonorm", "num_classes": 3})


def _entropy(probs: torch.Tensor) -> torch.Tensor:
    return -(probs * probs.log()).sum(-1)  # (B,)


def test_train_gate_entropy_is_the_noise_free_entropy_per_layer_over_the_epochs_samples():
    from models.norms import gated_norms

    model = _gated_model().train()
    for norm in (n for _, n in gated_norms(model)):  # gates away from (0.5, 0.5), different per layer
        torch.nn.init.normal_(norm.selector.fc2.weight, std=2.0)
    norms = [norm for _, norm in gated_norms(model)]
    tracker = TrainGateEntropy(norms)
    seen: list[list[torch.Tensor]] = [[] for _ in norms]
    for batch in (4, 2):  # batches of different sizes: the mean is per sample
        model(torch.randn(batch, 1, 8, 8))
        tracker.update()
        for i, norm in enumerate(norms):
            seen[i].append(_entropy(norm.last_probs))
    metrics = tracker.compute()
    expected = [float(torch.cat(layer).mean()) for layer in seen]
    assert [metrics[f"train_gate_entropy_{i}"] for i in range(len(norms))] == pytest.approx(expected)
    assert metrics["train_gate_entropy_mean"] == pytest.approx(sum(expected) / len(expected))
    assert len(set(round(e, 4) for e in expected)) > 1  # the layers really differ


def test_train_gate_entropy_ignores_the_gumbel_noise_of_the_training_forward():
    from models.norms import gated_norms

    model = _gated_model().train()
    norms = [norm for _, norm in gated_norms(model)]
    tracker = TrainGateEntropy(norms)
    model(torch.randn(3, 1, 8, 8))  # zero-initialised selectors: noise-free gates are exactly (0.5, 0.5)
    tracker.update()
    assert tracker.compute()["train_gate_entropy_mean"] == pytest.approx(math.log(2), abs=1e-6)


def test_train_gate_entropy_resets_per_epoch_and_is_empty_without_gates():
    assert TrainGateEntropy([]).compute() == {}
    from models.norms import gated_norms

    model = _gated_model().train()
    tracker = TrainGateEntropy([norm for _, norm in gated_norms(model)])
    model(torch.randn(2, 1, 8, 8))
    tracker.update()
    tracker.reset()
    assert tracker.compute() == {}


def test_layer_entropies_read_the_freeze_signal_from_an_epochs_metrics():
    metrics = {
        "gate_entropy_0": 0.1, "gate_entropy_1": 0.2, "gate_entropy_mean": 0.15,
        "train_gate_entropy_0": 0.3, "train_gate_entropy_1": 0.4, "train_gate_entropy_mean": 0.35,
    }  # fmt: skip
    assert layer_entropies(metrics, "train") == [0.3, 0.4]
    assert layer_entropies(metrics, "val") == [0.1, 0.2]
    assert layer_entropies({}, "train") == []


def test_the_freeze_signals_are_the_spec_knobs_categories():
    from studies.spec import KNOBS

    assert tuple(FREEZE_SIGNAL_PREFIXES) == KNOBS["freeze_signal"].categories


def test_per_token_gates_of_a_causal_head_count_one_entry_per_token():
    from types import SimpleNamespace

    sure, unsure = torch.tensor([1.0, 0.0]), torch.tensor([0.5, 0.5])
    layer = SimpleNamespace(
        last_probs=torch.stack([torch.stack([sure, unsure, unsure])] * 2)
    )  # (B=2, T=3, 2)
    tracker = TrainGateEntropy([layer])
    tracker.update()
    assert tracker.compute()["train_gate_entropy_0"] == pytest.approx(2 / 3 * math.log(2))


def _selector_steps(seed: int, steps: int = 5) -> list[list[torch.Tensor]]:
    """Per step, the gradients of two parameters shaped (3, 4) and (2,), with a common offset (the mean
    gradient) that the variance must not count."""
    generator = torch.Generator().manual_seed(seed)
    return [
        [torch.randn(3, 4, generator=generator) + 5.0, torch.randn(2, generator=generator) - 3.0]
        for _ in range(steps)
    ]


def test_selector_grad_var_is_the_per_element_variance_across_steps_averaged_over_elements():
    params = [torch.nn.Parameter(torch.zeros(3, 4)), torch.nn.Parameter(torch.zeros(2))]
    steps = _selector_steps(0)
    tracker = SelectorGradVariance(params)
    tracker.reset()
    for grads in steps:
        for param, grad in zip(params, grads, strict=True):
            param.grad = grad
        tracker.update()
    flat = torch.stack([torch.cat([g.reshape(-1) for g in grads]) for grads in steps]).double()  # (n, P)
    expected = flat.var(dim=0, unbiased=False).mean()
    assert tracker.compute() == {SELECTOR_GRAD_VAR: pytest.approx(float(expected), rel=1e-9)}


def test_selector_grad_var_is_zero_for_a_constant_gradient_and_absent_without_a_trained_selector():
    param = torch.nn.Parameter(torch.zeros(4))
    tracker = SelectorGradVariance([param])
    tracker.reset()
    assert tracker.compute() == {}  # no step yet
    for _ in range(3):
        param.grad = torch.full((4,), 1e3)
        tracker.update()
    assert tracker.compute() == {SELECTOR_GRAD_VAR: pytest.approx(0.0, abs=1e-9)}
    param.requires_grad_(False)  # frozen (AutoNorm-S): no selector left to measure
    param.grad = None
    tracker.reset()
    tracker.update()
    assert tracker.compute() == {}
    assert SelectorGradVariance([]).compute() == {}  # a model without AutoNorm


def test_the_stacked_variance_is_each_seeds_own_and_skips_a_frozen_seed():
    seeds = [_selector_steps(seed) for seed in (0, 1)]
    tracker = StackedSelectorGradVariance(["a", "b"], num_seeds=2)
    tracker.reset([14, 14])
    for step in range(5):
        tracker.update(
            {name: torch.stack([seeds[i][step][j] for i in (0, 1)]) for j, name in enumerate("ab")}
        )
    values = tracker.compute()
    for i in (0, 1):
        single = SelectorGradVariance(
            [torch.nn.Parameter(torch.zeros(3, 4)), torch.nn.Parameter(torch.zeros(2))]
        )
        single.reset()
        for grads in seeds[i]:
            for param, grad in zip(single._params, grads, strict=True):
                param.grad = grad
            single.update()
        assert values[i][SELECTOR_GRAD_VAR] == pytest.approx(single.compute()[SELECTOR_GRAD_VAR], rel=1e-9)
    tracker.reset([0, 14])  # seed 0 froze every selector: its gradient slices arrive zeroed
    tracker.update({"a": torch.zeros(2, 3, 4), "b": torch.zeros(2, 2)})
    assert tracker.compute() == [{}, {SELECTOR_GRAD_VAR: 0.0}]


def test_a_partly_frozen_model_measures_the_selectors_that_still_train():
    trained, frozen = torch.nn.Parameter(torch.zeros(3)), torch.nn.Parameter(torch.zeros(5))
    frozen.requires_grad_(False)  # a per_layer freeze: this selector has no gradient any more
    tracker = SelectorGradVariance([trained, frozen])
    tracker.reset()
    grads = [torch.tensor([1.0, 2.0, 3.0]), torch.tensor([3.0, 2.0, 1.0])]
    for grad in grads:
        trained.grad = grad
        tracker.update()
    expected = float(torch.stack(grads).var(dim=0, unbiased=False).mean())  # over 3 elements, not 8
    assert tracker.compute()[SELECTOR_GRAD_VAR] == pytest.approx(expected)

import math

import pytest
import torch

from workers.training.metrics import GateStats, MetricAccumulator, TaskLoss


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

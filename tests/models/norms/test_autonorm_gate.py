import math

import pytest
import torch

from models.norms import AutoNorm, gate_entropy, gate_summary
from models.norms.autonorm import NormSelector

DIM = 16


def test_entropy_is_ln2_for_an_even_gate_and_zero_for_a_certain_one() -> None:
    probs = torch.tensor([[0.5, 0.5], [1.0, 0.0], [0.0, 1.0]])
    torch.testing.assert_close(gate_entropy(probs), torch.tensor([math.log(2.0), 0.0, 0.0]))


def test_entropy_stays_within_zero_and_ln2_for_any_logits() -> None:
    probs = (torch.randn(1000, 2) * 20).softmax(-1)
    entropy = gate_entropy(probs)
    assert entropy.min() >= 0.0 and entropy.max() <= math.log(2.0) + 1e-7


def test_gate_summary_reports_noise_free_weights_and_entropy_of_the_last_forward() -> None:
    model = torch.nn.Sequential(AutoNorm(DIM, tau=0.1), torch.nn.Linear(DIM, DIM), AutoNorm(DIM))
    torch.nn.init.normal_(model[0].selector.fc2.weight, std=2.0)
    model.train()
    x = torch.randn(8, 5, DIM)
    model(x)
    rows = gate_summary(model)
    assert [row["layer"] for row in rows] == ["0", "2"]
    probs = model[0].last_probs
    # Noise-free even in training: equal to the eval softmax of the same input.
    model.eval()
    model(x)
    torch.testing.assert_close(model[0].last_probs, probs)
    assert rows[0]["dyt_weight"] == pytest.approx(float(probs[:, 0].mean()))
    assert 0.0 <= rows[0]["entropy"] <= math.log(2.0)
    assert rows[1] == {
        "layer": "2",
        "dyt_weight": pytest.approx(0.5),
        "entropy": pytest.approx(math.log(2.0)),
    }


def test_gate_summary_is_empty_for_a_model_without_gated_norms() -> None:
    assert gate_summary(torch.nn.Sequential(torch.nn.LayerNorm(4))) == []


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_gate_has_no_nan_and_stays_float32_under_autocast(dtype: torch.dtype) -> None:
    norm = AutoNorm(DIM, tau=0.01).train()
    torch.nn.init.normal_(norm.selector.fc2.weight, std=50.0)  # extreme logits
    x = torch.randn(16, 5, DIM) * 100
    with torch.autocast("cpu", dtype=dtype):
        weights, probs = norm.gate(x)
        y = norm(torch.nn.Linear(DIM, DIM)(x))
    assert weights.dtype == torch.float32 and probs.dtype == torch.float32
    assert torch.isfinite(weights).all() and torch.isfinite(probs).all() and torch.isfinite(y).all()


def test_gate_stays_float32_when_the_model_itself_is_half_precision() -> None:
    selector = NormSelector(DIM).to(torch.bfloat16)
    logits = selector(torch.randn(3, DIM))
    assert logits.dtype == torch.float32


def test_non_positive_temperature_is_rejected() -> None:
    with pytest.raises(ValueError, match="tau"):
        AutoNorm(DIM, tau=0.0)


@pytest.mark.parametrize("hard", [False, True])
def test_fused_cpu_autonorm_matches_the_eager_module_in_training_with_the_same_gumbel_noise(
    hard: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    import models.norms.autonorm as autonorm_module

    norm = AutoNorm(DIM, tau=0.7, hard=hard).train()
    with torch.no_grad():
        for param in norm.parameters():
            param.add_(torch.randn_like(param) * 0.3)
    x = torch.randn(5, 4, DIM, requires_grad=True)
    upstream = torch.randn(5, 4, DIM)

    def run() -> tuple[torch.Tensor, ...]:
        torch.manual_seed(123)  # same Gumbel draw on both paths
        y = norm(x)
        return (y, norm.last_probs, *torch.autograd.grad(y, [x, *norm.parameters()], upstream))

    fused = run()
    monkeypatch.setattr(autonorm_module, "_fast_path_applies", lambda _x: False)
    eager = run()
    for got, want in zip(fused, eager, strict=True):
        torch.testing.assert_close(got, want, atol=2e-5, rtol=1e-4)

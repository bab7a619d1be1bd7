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


def _perturbed_autonorm(**options: object) -> AutoNorm:
    norm = AutoNorm(DIM, **options)  # type: ignore[arg-type]
    with torch.no_grad():
        for param in norm.parameters():
            param.add_(torch.randn_like(param) * 0.3)  # leave the documented init: gates away from 0.5
    return norm


def _fused_and_eager_runs(
    norm: AutoNorm, x: torch.Tensor, monkeypatch: pytest.MonkeyPatch
) -> tuple[tuple[torch.Tensor | None, ...], tuple[torch.Tensor | None, ...]]:
    """(output, last_probs, grads of x and of every parameter) on the fused path, then on the eager one."""
    import models.norms.autonorm as autonorm_module

    upstream = torch.randn_like(x)
    inputs = [x, *(p for p in norm.parameters() if p.requires_grad)]

    def run() -> tuple[torch.Tensor | None, ...]:
        torch.manual_seed(123)  # same Gumbel draw on both paths
        y = norm(x)
        return (y, norm.last_probs, *torch.autograd.grad(y, inputs, upstream))

    fused = run()
    with monkeypatch.context() as patch:
        patch.setattr(autonorm_module, "_fast_path_applies", lambda _x: False)
        eager = run()
    return fused, eager


@pytest.mark.parametrize("tau", [0.1, 0.7, 2.0])
@pytest.mark.parametrize("hard", [False, True])
@pytest.mark.parametrize("training", [True, False])
def test_fused_cpu_autonorm_matches_the_eager_module_output_probs_and_every_gradient(
    tau: float, hard: bool, training: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    norm = _perturbed_autonorm(tau=tau, hard=hard).train(training)
    x = torch.randn(6, 5, DIM, requires_grad=True)
    fused, eager = _fused_and_eager_runs(norm, x, monkeypatch)
    assert len(fused) == 2 + 1 + 9  # y, probs, x and all nine parameters
    for got, want in zip(fused, eager, strict=True):
        torch.testing.assert_close(got, want, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("shape", [(7, DIM), (2, 3, 4, DIM)])
def test_fused_cpu_autonorm_matches_the_eager_module_for_2d_and_4d_inputs(
    shape: tuple[int, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    norm = _perturbed_autonorm(tau=0.5).train()
    x = torch.randn(*shape, requires_grad=True)
    fused, eager = _fused_and_eager_runs(norm, x, monkeypatch)
    assert fused[0].shape == shape
    for got, want in zip(fused, eager, strict=True):
        torch.testing.assert_close(got, want, atol=2e-5, rtol=1e-4)


def test_fused_cpu_autonorm_with_frozen_selector_gives_it_no_grad_but_still_trains_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    norm = _perturbed_autonorm(tau=0.5).train()
    for param in norm.selector.parameters():
        param.requires_grad_(False)
    x = torch.randn(4, 6, DIM, requires_grad=True)
    fused, eager = _fused_and_eager_runs(norm, x, monkeypatch)
    assert len(fused) == 2 + 1 + 5  # x, alpha and the four affine vectors: no selector gradient
    for got, want in zip(fused, eager, strict=True):
        torch.testing.assert_close(got, want, atol=2e-5, rtol=1e-4)
    norm(x).sum().backward()
    assert all(param.grad is None for param in norm.selector.parameters())
    assert all(param.grad is not None for name, param in norm.named_parameters() if "selector" not in name)


def test_double_backward_is_refused_on_the_fused_path_rather_than_silently_wrong() -> None:
    from models.norms._kernel_loader import load_mixed_norm_library

    norm = _perturbed_autonorm().train()
    x = torch.randn(3, 4, DIM, requires_grad=True)
    (grad_x,) = torch.autograd.grad(norm(x).square().sum(), x, create_graph=True)
    if load_mixed_norm_library() is None:  # NORMLAB_FUSED_NORMS=0: the eager path is twice differentiable
        (second,) = torch.autograd.grad(grad_x.sum(), x)
        assert torch.isfinite(second).all() and second.abs().sum() > 0
    else:
        with pytest.raises(RuntimeError, match="once_differentiable"):
            grad_x.sum().backward()


def test_torch_func_grad_over_the_parameters_of_an_autonorm_fed_a_plain_input_matches_autograd() -> None:
    # The input is an ordinary tensor, only the parameters are transformed: the layer must still notice
    # the active torch.func transform and take its differentiable eager path.
    norm = _perturbed_autonorm(tau=0.5).eval()
    x = torch.randn(3, 4, DIM)
    params = {name: param.detach() for name, param in norm.named_parameters()}

    def loss(p: dict[str, torch.Tensor]) -> torch.Tensor:
        return torch.func.functional_call(norm, p, (x,)).square().sum()

    got = torch.func.grad(loss)(params)
    want = torch.autograd.grad(norm(x).square().sum(), list(norm.parameters()))
    for name, expected in zip(params, want, strict=True):
        torch.testing.assert_close(got[name], expected, atol=2e-5, rtol=1e-4)


def test_the_environment_chooses_the_whole_layer_cuda_kernel_mode_and_a_typo_is_refused() -> None:
    from models.norms.autonorm import layer_kernel_mode

    assert layer_kernel_mode({}) == "auto"
    assert layer_kernel_mode({"NORMLAB_AUTONORM_LAYER_KERNEL": " "}) == "auto"
    for on in ("1", "on", "always", "TRUE"):
        assert layer_kernel_mode({"NORMLAB_AUTONORM_LAYER_KERNEL": on}) == "on"
    for off in ("0", "off", "no"):
        assert layer_kernel_mode({"NORMLAB_AUTONORM_LAYER_KERNEL": off}) == "off"
    with pytest.raises(ValueError, match="must be auto, 1 or 0; got 'maybe'"):
        layer_kernel_mode({"NORMLAB_AUTONORM_LAYER_KERNEL": "maybe"})


def test_by_default_the_whole_layer_kernel_takes_eager_calls_and_narrow_traced_ones_never_stacked_seeds() -> (
    None
):
    from models.norms.autonorm import LAYER_KERNEL_MAX_TRACED_DIM, layer_kernel_pays_off

    # Plain eager calls: measured faster at both widths timed (128 and 768).
    assert layer_kernel_pays_off(768, traced_or_captured=False, transformed=False)
    # Traced or captured (torch.compile, CUDA graphs): faster at 128, slower at 768.
    assert layer_kernel_pays_off(LAYER_KERNEL_MAX_TRACED_DIM, traced_or_captured=True, transformed=False)
    assert not layer_kernel_pays_off(
        LAYER_KERNEL_MAX_TRACED_DIM + 1, traced_or_captured=True, transformed=False
    )
    # Stacked seeds (torch.func): not measured with it, so the mixed-norm kernels keep them.
    for traced in (False, True):
        assert not layer_kernel_pays_off(64, traced_or_captured=traced, transformed=True)


def test_the_auto_rule_reads_whether_a_call_is_traced_or_under_a_torch_func_transform(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from models.norms import autonorm
    from models.norms.autonorm import _layer_kernel_wanted

    monkeypatch.setattr(autonorm, "LAYER_KERNEL_EVERYWHERE", False)  # "auto", whatever this shell exported

    assert _layer_kernel_wanted(torch.zeros(2, 3, 768))  # a plain eager call, any width
    seen: list[bool] = []

    def record(x: torch.Tensor) -> torch.Tensor:
        seen.append(_layer_kernel_wanted(x))
        return x

    torch.func.vmap(record)(torch.zeros(4, 2, 3, 64))  # stacked seeds
    torch.compile(record, backend="eager", fullgraph=False)(torch.zeros(2, 3, 768))  # traced, too wide
    assert seen == [False, False]

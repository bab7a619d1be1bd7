import copy
import math

import pytest
import torch

from models.norms import NORM_KINDS, AdaNorm, AutoNorm, DyT, FiLMNorm, RandomSelectorNorm, build_norm
from models.norms.mixed import mixed_norm, mixed_norm_reference

DIM = 16


@pytest.mark.parametrize("kind", sorted(NORM_KINDS))
@pytest.mark.parametrize("shape", [(3, 5, DIM), (4, DIM), (2, 3, 4, DIM)])
def test_every_norm_maps_any_leading_shape_to_the_same_shape(kind: str, shape: tuple[int, ...]) -> None:
    norm = build_norm(kind, DIM)
    assert norm(torch.randn(*shape)).shape == shape


@pytest.mark.parametrize("kind", sorted(NORM_KINDS))
def test_gradients_reach_every_trainable_parameter(kind: str) -> None:
    norm = build_norm(kind, DIM)
    # Zero-initialised last layers (FiLM, selector) block gradients to earlier layers at step 0: nudge them.
    with torch.no_grad():
        for name, param in norm.named_parameters():
            if name.endswith(("modulator.2.weight", "selector.fc2.weight")):
                param.normal_(std=0.1)
    x = torch.randn(4, 6, DIM, requires_grad=True)
    (norm(x) * torch.randn(4, 6, DIM)).sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0
    for name, param in norm.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, name


def test_unknown_kind_or_option_is_rejected_with_the_valid_choices() -> None:
    with pytest.raises(ValueError, match="layernorm"):
        build_norm("batchnorm", DIM)
    with pytest.raises(ValueError, match="tau"):
        build_norm("autonorm", DIM, temperature=0.5)


def test_dyt_starts_with_alpha_one_half_unit_weight_and_zero_bias() -> None:
    norm = DyT(DIM)
    assert norm.alpha.shape == () and norm.alpha.item() == 0.5
    assert torch.equal(norm.weight, torch.ones(DIM)) and torch.equal(norm.bias, torch.zeros(DIM))
    x = torch.randn(2, 3, DIM)
    torch.testing.assert_close(norm(x), torch.tanh(0.5 * x))
    assert DyT(DIM, alpha_init=1.5).alpha.item() == 1.5


def test_adanorm_matches_the_hand_computed_formula_with_unbiased_std() -> None:
    x = torch.tensor([[1.0, 2.0, 3.0, 6.0]], dtype=torch.float64, requires_grad=True)
    y = AdaNorm(4, k=0.1, scale=2.0, eps=1e-5)(x)
    mean, std = 3.0, math.sqrt(((1 - 3) ** 2 + (2 - 3) ** 2 + 0 + (6 - 3) ** 2) / 3)
    z = [(v - mean) / (std + 1e-5) for v in (1.0, 2.0, 3.0, 6.0)]
    torch.testing.assert_close(y, torch.tensor([[2 * zi * (1 - 0.1 * zi) for zi in z]], dtype=torch.float64))


def test_adanorm_gradient_treats_the_one_minus_kz_factor_as_a_constant() -> None:
    x = torch.randn(3, 8, dtype=torch.float64, requires_grad=True)
    upstream = torch.randn(3, 8, dtype=torch.float64)
    (AdaNorm(8)(x) * upstream).sum().backward()
    # Expected: gradient of 2 * z * c with c = (1 - 0.1 z) frozen at its forward value.
    x2 = x.detach().clone().requires_grad_(True)
    centred = x2 - x2.mean(-1, keepdim=True)
    z = centred / (centred.std(-1, keepdim=True, unbiased=True) + 1e-5)
    factor = (1 - 0.1 * z).detach()
    (2 * z * factor * upstream).sum().backward()
    torch.testing.assert_close(x.grad, x2.grad)


def test_film_starts_as_plain_layernorm() -> None:
    x = torch.randn(2, 5, DIM)
    torch.testing.assert_close(FiLMNorm(DIM)(x), torch.nn.functional.layer_norm(x, (DIM,)))


def test_autonorm_starts_as_an_even_mixture_of_dyt_and_layernorm() -> None:
    norm = AutoNorm(DIM).eval()
    x = torch.randn(2, 5, DIM)
    expected = 0.5 * torch.tanh(0.5 * x) + 0.5 * torch.nn.functional.layer_norm(x, (DIM,))
    torch.testing.assert_close(norm(x), expected)
    torch.testing.assert_close(norm.last_probs, torch.full((2, 2), 0.5))


def test_autonorm_eval_is_deterministic_and_training_is_stochastic() -> None:
    norm = AutoNorm(DIM)
    torch.nn.init.normal_(norm.selector.fc2.weight, std=1.0)
    x = torch.randn(4, 5, DIM)
    norm.eval()
    assert torch.equal(norm(x), norm(x))
    norm.train()
    assert not torch.equal(norm(x), norm(x))


def test_autonorm_hard_gate_picks_one_branch_per_sample_with_straight_through_gradients() -> None:
    norm = AutoNorm(DIM, hard=True).train()
    torch.nn.init.normal_(norm.selector.fc2.weight, std=1.0)
    x = torch.randn(6, 5, DIM)
    y = norm(x)
    dyt = torch.tanh(0.5 * x)
    ln = torch.nn.functional.layer_norm(x, (DIM,))
    for sample in range(6):
        assert torch.allclose(y[sample], dyt[sample], atol=1e-5) or torch.allclose(
            y[sample], ln[sample], atol=1e-5
        )
    y.sum().backward()
    assert norm.selector.fc2.weight.grad.abs().sum() > 0


def test_random_selector_is_deterministic_half_mixture_in_eval_and_random_in_training() -> None:
    norm = RandomSelectorNorm(DIM)
    x = torch.randn(4, 5, DIM)
    norm.eval()
    expected = 0.5 * torch.tanh(0.5 * x) + 0.5 * torch.nn.functional.layer_norm(x, (DIM,))
    torch.testing.assert_close(norm(x), expected)
    assert torch.equal(norm(x), norm(x))
    norm.train()
    assert not torch.equal(norm(x), norm(x))


@pytest.mark.parametrize("use_ln", [True, False])
def test_fused_cpu_kernel_matches_the_eager_reference_values_and_gradients(use_ln: bool) -> None:
    torch.manual_seed(1)
    x = torch.randn(3, 7, 24, requires_grad=True)
    alpha = torch.tensor(0.7, requires_grad=True)
    coefs = [torch.randn(3, 24, requires_grad=True) for _ in range(3)]
    upstream = torch.randn(3, 7, 24)
    fused = mixed_norm(x, alpha, *coefs, eps=1e-5, use_ln=use_ln)
    inputs = [x, alpha, *coefs]
    grads = torch.autograd.grad(fused, inputs, upstream, allow_unused=True)
    grads = [torch.zeros_like(t) if g is None else g for g, t in zip(grads, inputs, strict=True)]
    x64, alpha64, *coefs64 = (t.detach().double().requires_grad_() for t in (x, alpha, *coefs))
    reference = mixed_norm_reference(x64, alpha64, *coefs64, eps=1e-5, use_ln=use_ln)
    inputs64 = [x64, alpha64, *coefs64]
    ref_grads = torch.autograd.grad(reference, inputs64, upstream.double(), allow_unused=True)
    torch.testing.assert_close(fused.double(), reference, atol=1e-5, rtol=1e-5)
    for got, want, source in zip(grads, ref_grads, inputs64, strict=True):
        want = torch.zeros_like(source) if want is None else want  # cl is unused without the LN branch
        torch.testing.assert_close(got.double(), want, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("kind", ["autonorm", "random", "dyt", "film"])
def test_fused_float32_layers_agree_with_their_float64_eager_path(kind: str) -> None:
    norm = build_norm(kind, DIM).eval()
    with torch.no_grad():
        for param in norm.parameters():
            param.add_(torch.randn_like(param) * 0.3)  # leave the documented init
    x = torch.randn(4, 5, DIM, requires_grad=True)
    upstream = torch.randn(4, 5, DIM)
    grads = torch.autograd.grad(norm(x), [x, *norm.parameters()], upstream)
    norm64 = copy.deepcopy(norm).double()
    x64 = x.detach().double().requires_grad_(True)
    grads64 = torch.autograd.grad(norm64(x64), [x64, *norm64.parameters()], upstream.double())
    for got, want in zip(grads, grads64, strict=True):
        torch.testing.assert_close(got.double(), want, atol=2e-5, rtol=1e-4)

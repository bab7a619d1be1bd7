"""The gate of a frozen AutoNorm-S selector, `post_freeze_gate`: sample (Gumbel noise as before the freeze),
expected (the noise-free softmax) or hard (its argmax one-hot, in eval too); on the eager path, the fused
CPU kernel and the dispatch to the one-call kernels alike."""

from __future__ import annotations

import pytest
import torch

import models.norms.autonorm as autonorm_module
from models.norms import AutoNorm, GateFreezer
from models.norms.autonorm import POST_FREEZE_GATES, hard_gate
from models.norms.mixed import _fast_path_applies
from studies.knobs import KNOBS

DIM = 16


def frozen_layer(post_freeze_gate: str, *, frozen: bool = True) -> AutoNorm:
    """An AutoNorm with decided gates (parameters away from init), frozen as GateFreezer freezes it."""
    torch.manual_seed(0)
    norm = AutoNorm(DIM, tau=0.5, post_freeze_gate=post_freeze_gate)
    with torch.no_grad():
        for param in norm.parameters():
            param.add_(torch.randn_like(param) * 0.5)
    if frozen:
        freezer = GateFreezer(t_freeze=1, eps_h=0.1, scope="global")
        assert freezer.observe(1, [0.5], norm)  # entropy never below eps_H: frozen
        assert norm.selector_frozen
    return norm.train()


def _two_draws(norm: AutoNorm, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(1)
    first = norm(x)
    torch.manual_seed(2)
    return first, norm(x)


def test_the_knob_names_the_layers_modes_and_defaults_to_sampling():
    assert KNOBS["post_freeze_gate"].categories == POST_FREEZE_GATES
    assert KNOBS["post_freeze_gate"].methods == ("autonorm_s",)
    assert AutoNorm(DIM).post_freeze_gate == "sample"
    with pytest.raises(ValueError, match="post_freeze_gate must be one of sample, expected, hard"):
        AutoNorm(DIM, post_freeze_gate="argmax")


def test_a_frozen_expected_gate_is_deterministic_in_train_mode():
    norm = frozen_layer("expected")
    x = torch.randn(6, 5, DIM)
    first, second = _two_draws(norm, x)
    torch.testing.assert_close(first, second, rtol=0, atol=0)
    weights, probs = norm.gate(x)
    torch.testing.assert_close(weights, probs)
    assert not torch.equal(probs, torch.full_like(probs, 0.5))  # a real, non-trivial gate
    torch.testing.assert_close(norm.eval()(x), first)  # the same network as in eval


def test_a_frozen_hard_gate_is_one_hot_in_train_and_eval_mode():
    norm = frozen_layer("hard")
    x = torch.randn(32, 5, DIM)
    for training in (True, False):
        weights, probs = norm.train(training).gate(x)
        assert set(weights.unique().tolist()) <= {0.0, 1.0}
        torch.testing.assert_close(weights.sum(-1), torch.ones(32))
        torch.testing.assert_close(weights.argmax(-1), probs.argmax(-1), rtol=0, atol=0)
    norm.train()
    first, second = _two_draws(norm, x)
    torch.testing.assert_close(first, second, rtol=0, atol=0)
    torch.testing.assert_close(norm.eval()(x), first)


def test_a_frozen_sampled_gate_keeps_its_gumbel_noise():
    norm = frozen_layer("sample")
    x = torch.randn(6, 5, DIM)
    torch.manual_seed(1)
    first, probs = norm.gate(x)
    torch.manual_seed(2)
    second, _ = norm.gate(x)
    assert not torch.allclose(first, second)
    assert not torch.allclose(first, probs)
    one, two = _two_draws(norm, x)
    assert not torch.allclose(one, two)
    # Eval stays the noise-free softmax, as before the knob existed.
    weights, probs = norm.eval().gate(x)
    torch.testing.assert_close(weights, probs)


@pytest.mark.parametrize("mode", POST_FREEZE_GATES)
def test_an_unfrozen_selector_samples_whatever_its_post_freeze_gate(mode):
    norm = frozen_layer(mode, frozen=False)
    x = torch.randn(6, 5, DIM)
    torch.manual_seed(1)
    first, probs = norm.gate(x)
    torch.manual_seed(2)
    second, _ = norm.gate(x)
    assert not torch.allclose(first, second) and not torch.allclose(first, probs)


def test_hard_gate_is_the_argmax_one_hot_and_a_tie_picks_dyt():
    probs = torch.tensor([[0.2, 0.8], [0.9, 0.1], [0.5, 0.5]])
    assert hard_gate(probs).tolist() == [[0.0, 1.0], [1.0, 0.0], [1.0, 0.0]]


def test_a_per_seed_flag_picks_the_fixed_gate_for_that_seed_only():
    """The seed-batched step hands each seed's frozen flag in as `seed_frozen` (a 0-d bool)."""
    norm = frozen_layer("expected", frozen=False)
    x = torch.randn(6, 5, DIM)
    norm.seed_frozen = torch.tensor(True)
    torch.manual_seed(1)
    weights, probs = norm.gate(x)
    torch.testing.assert_close(weights, probs)
    norm.seed_frozen = torch.tensor(False)
    torch.manual_seed(1)
    sampled, probs = norm.gate(x)
    assert not torch.allclose(sampled, probs)


def test_under_vmap_each_seed_follows_its_own_flag():
    from torch.func import functional_call, stack_module_state, vmap

    layers = [frozen_layer("hard", frozen=False), frozen_layer("hard", frozen=False)]
    params, buffers = stack_module_state(layers)
    flags = {"seed_frozen": torch.tensor([True, False])}
    x = torch.randn(2, 6, 5, DIM)

    def call(p, b, xs):  # type: ignore[no-untyped-def]
        return functional_call(layers[0], (p, b), (xs,))

    torch.manual_seed(3)
    out = vmap(call, randomness="different")(params, {**buffers, **flags}, x)
    reference = frozen_layer("hard")
    torch.testing.assert_close(out[0], reference(x[0]))  # seed 0 frozen: the hard gate, noise-free
    assert layers[0].seed_frozen is None  # functional_call put the attribute back
    torch.manual_seed(3)
    again = vmap(call, randomness="different")(params, {**buffers, **flags}, x)
    torch.testing.assert_close(again[0], out[0], rtol=0, atol=0)
    torch.manual_seed(4)
    other = vmap(call, randomness="different")(params, {**buffers, **flags}, x)
    assert not torch.allclose(other[1], out[1])  # seed 1 still samples


needs_fused = pytest.mark.skipif(
    not _fast_path_applies(torch.randn(1, 1, DIM)), reason="the CPU kernel is not built here"
)


@needs_fused
@pytest.mark.parametrize("training", [True, False])
def test_the_fused_cpu_kernel_gives_a_frozen_expected_gate_as_the_eager_path(training, monkeypatch):
    norm = frozen_layer("expected").train(training)
    x = torch.randn(6, 5, DIM, requires_grad=True)
    upstream = torch.randn_like(x)
    leaves = [x, *(p for p in norm.parameters() if p.requires_grad)]
    assert len(leaves) == 1 + 5  # the selector's four parameters are frozen

    def run() -> tuple[torch.Tensor, ...]:
        y = norm(x)
        return (y, norm.last_probs, *torch.autograd.grad(y, leaves, upstream))  # type: ignore[arg-type]

    calls = []
    real = autonorm_module.autonorm_fused

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(args[2])  # the kernel's `training`: whether it draws Gumbel noise
        return real(*args, **kwargs)

    monkeypatch.setattr(autonorm_module, "autonorm_fused", spy)
    fused = run()
    assert calls == [False]  # the kernel's noise-free gate
    with monkeypatch.context() as patch:
        patch.setattr(autonorm_module, "_fast_path_applies", lambda _x: False)
        eager = run()
    for got, want in zip(fused, eager, strict=True):
        torch.testing.assert_close(got, want, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize(
    "mode, frozen, training, kernel_noise",
    [
        ("sample", True, True, True),  # the kernels' Gumbel draw, as before
        ("expected", True, True, False),  # the kernels' noise-free gate
        ("expected", False, True, True),  # not frozen yet: sampled
        ("hard", True, True, None),  # the kernels have no one-hot gate: eager
        ("hard", True, False, None),
        ("hard", False, True, True),
    ],
)
def test_the_one_call_kernels_take_a_frozen_gate_only_where_they_can_compute_it(
    mode, frozen, training, kernel_noise, monkeypatch
):
    """The dispatch the fused CPU kernel and the whole-layer Triton kernel share (`_one_call_kernel`)."""
    norm = frozen_layer(mode, frozen=frozen).train(training)
    calls = []

    def kernel(xs, params, noisy, tau, hard, eps, token_weights=None):  # type: ignore[no-untyped-def]
        calls.append(noisy)
        return torch.zeros_like(xs), torch.full((xs.shape[0], 2), 0.5)

    monkeypatch.setattr(AutoNorm, "_one_call_kernel", lambda self, xs, params: kernel)
    norm(torch.randn(4, 3, DIM))
    assert calls == ([] if kernel_noise is None else [kernel_noise])


def test_a_per_seed_flag_keeps_a_fixed_gate_off_the_one_call_kernels(monkeypatch):
    norm = frozen_layer("expected", frozen=False)
    norm.seed_frozen = torch.tensor(True)
    monkeypatch.setattr(AutoNorm, "_one_call_kernel", lambda self, xs, params: pytest.fail("kernel called"))
    norm(torch.randn(4, 3, DIM))


def test_the_layer_shows_its_post_freeze_gate():
    assert "post_freeze_gate=hard" in repr(AutoNorm(DIM, post_freeze_gate="hard"))

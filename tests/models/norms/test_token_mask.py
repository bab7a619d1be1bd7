"""Token-conditioned norms (AutoNorm, FiLM) take a token mask: their token mean skips pad positions,
on the eager path and on the fused CPU kernel alike; one-argument norms never receive the mask."""

import pytest
import torch

import models.norms.autonorm as autonorm_module
from models.blocks import ResidualUnit, TransformerBlock
from models.norms import (
    AutoNorm,
    DyT,
    FiLMNorm,
    TokenConditionedNorm,
    apply_norm,
    build_norm,
    zero_init_conditioning,
)
from models.norms.mixed import token_mean

DIM = 16
LENGTHS = (7, 3, 0, 9)  # real tokens per sample: one has none, one has no pad at all


def _mask(lengths: tuple[int, ...] = LENGTHS, tokens: int = 9) -> torch.Tensor:
    return torch.arange(tokens) < torch.tensor(lengths).unsqueeze(1)  # (B, T)


def _perturbed(kind: str, **options: object) -> torch.nn.Module:
    norm = build_norm(kind, DIM, **options)
    with torch.no_grad():
        for param in norm.parameters():
            param.add_(torch.randn_like(param) * 0.3)  # leave the documented init: gates away from 0.5
    return norm


def test_masked_token_mean_averages_real_tokens_only_and_an_all_pad_sample_pools_to_zero() -> None:
    x = torch.randn(4, 9, DIM)
    pooled = token_mean(x, _mask())
    for row, n in enumerate(LENGTHS):
        expected = x[row, :n].mean(0) if n else torch.zeros(DIM)
        torch.testing.assert_close(pooled[row], expected)


def test_a_mask_of_the_wrong_shape_is_rejected_naming_the_expected_shape() -> None:
    with pytest.raises(ValueError, match=r"\(4, 9\)"):
        AutoNorm(DIM)(torch.randn(4, 9, DIM), token_mask=torch.ones(4, 8, dtype=torch.bool))


@pytest.mark.parametrize("kind", ["autonorm", "film"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["fused_cpu", "eager"])
def test_each_sample_is_normalised_as_if_its_pads_were_not_there(kind: str, dtype: torch.dtype) -> None:
    norm = _perturbed(kind).to(dtype).eval()
    x = torch.randn(4, 9, DIM, dtype=dtype)
    x[~_mask()] = 1e3  # whatever sits at pad positions must not move the conditioning
    y = norm(x, token_mask=_mask())
    for row, n in enumerate(LENGTHS):
        if n:
            torch.testing.assert_close(y[row, :n], norm(x[row : row + 1, :n])[0], atol=1e-5, rtol=1e-5)


def test_an_all_real_mask_gives_the_same_result_as_no_mask() -> None:
    norm = _perturbed("autonorm").eval()
    x = torch.randn(3, 5, DIM)
    torch.testing.assert_close(norm(x, token_mask=torch.ones(3, 5, dtype=torch.bool)), norm(x))


def test_a_mask_follows_the_input_through_any_leading_shape() -> None:
    norm = _perturbed("autonorm").eval()
    x = torch.randn(2, 4, 9, DIM)
    mask = _mask().reshape(1, 4, 9).expand(2, 4, 9)
    y = norm(x, token_mask=mask)
    torch.testing.assert_close(y, norm(x.reshape(8, 9, DIM), token_mask=mask.reshape(8, 9)).reshape(x.shape))


def _fused_and_eager_runs(
    norm: AutoNorm, x: torch.Tensor, mask: torch.Tensor, monkeypatch: pytest.MonkeyPatch
) -> tuple[tuple[torch.Tensor | None, ...], tuple[torch.Tensor | None, ...]]:
    upstream = torch.randn_like(x)
    inputs = [x, *(p for p in norm.parameters() if p.requires_grad)]

    def run() -> tuple[torch.Tensor | None, ...]:
        torch.manual_seed(123)  # same Gumbel draw on both paths
        y = norm(x, token_mask=mask)
        return (y, norm.last_probs, *torch.autograd.grad(y, inputs, upstream))

    fused = run()
    with monkeypatch.context() as patch:
        patch.setattr(autonorm_module, "_fast_path_applies", lambda _x: False)
        eager = run()
    return fused, eager


@pytest.mark.parametrize("tau", [0.1, 2.0])
@pytest.mark.parametrize("hard", [False, True])
@pytest.mark.parametrize("training", [True, False])
def test_masked_fused_cpu_autonorm_matches_the_masked_eager_module_output_probs_and_every_gradient(
    tau: float, hard: bool, training: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    norm = _perturbed("autonorm", tau=tau, hard=hard).train(training)
    x = torch.randn(4, 9, DIM, requires_grad=True)
    fused, eager = _fused_and_eager_runs(norm, x, _mask(), monkeypatch)
    assert len(fused) == 2 + 1 + 9
    for got, want in zip(fused, eager, strict=True):
        torch.testing.assert_close(got, want, atol=2e-5, rtol=1e-4)


def test_masked_autonorm_gradient_never_reaches_the_pads_through_the_gate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # LayerNorm rows are per token, so a pad's gradient comes only from its own output row: with the
    # pad rows' upstream gradient at zero, only the gate could carry gradient there, and it must not.
    for patch_eager in (False, True):
        norm = _perturbed("autonorm").train()
        x = torch.randn(4, 9, DIM, requires_grad=True)
        mask = _mask()
        with monkeypatch.context() as patch:
            if patch_eager:
                patch.setattr(autonorm_module, "_fast_path_applies", lambda _x: False)
            (grad,) = torch.autograd.grad(
                norm(x, token_mask=mask), x, torch.randn(4, 9, DIM) * mask[..., None]
            )
        assert torch.count_nonzero(grad[~mask]) == 0
        assert torch.count_nonzero(grad[mask]) > 0


def test_apply_norm_hands_the_mask_to_token_conditioned_norms_only() -> None:
    x, mask = torch.randn(4, 9, DIM), _mask()
    film = _perturbed("film")
    torch.testing.assert_close(apply_norm(film, x, mask), film(x, token_mask=mask))
    for plain in (
        torch.nn.LayerNorm(DIM),
        DyT(DIM),
        build_norm("adanorm", DIM),
        build_norm("random", DIM).eval(),
    ):
        assert not isinstance(plain, TokenConditionedNorm)
        torch.testing.assert_close(apply_norm(plain, x, mask), plain(x))


@pytest.mark.parametrize("placement", ["pre", "post", "output"])
def test_blocks_pass_the_mask_to_every_norm_site(placement: str) -> None:
    seen: list[torch.Tensor | None] = []

    class Recording(FiLMNorm):
        def forward(self, x: torch.Tensor, token_mask: torch.Tensor | None = None) -> torch.Tensor:
            seen.append(token_mask)
            return super().forward(x, token_mask)

    block = TransformerBlock(DIM, 2, Recording, placement=placement)
    mask = _mask()
    block(torch.randn(4, 9, DIM), token_mask=mask)
    assert len(seen) == 2 and all(m is mask for m in seen)
    # One-argument norms in the same block: the mask simply is not passed.
    ResidualUnit(DIM, torch.nn.Linear(DIM, DIM), torch.nn.LayerNorm, placement)(
        torch.randn(4, 9, DIM), token_mask=mask
    )


def test_zero_init_conditioning_restores_even_gates_and_plain_film_after_any_reinit() -> None:
    model = torch.nn.Sequential(AutoNorm(DIM), FiLMNorm(DIM), torch.nn.LayerNorm(DIM))
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            torch.nn.init.normal_(module.weight)
            torch.nn.init.normal_(module.bias)
    zero_init_conditioning(model)
    assert (
        torch.count_nonzero(model[0].selector.fc2.weight)
        == torch.count_nonzero(model[0].selector.fc2.bias)
        == 0
    )
    assert torch.count_nonzero(model[1].modulator[-1].weight) == 0
    model.eval()(torch.randn(3, 5, DIM))
    assert torch.equal(model[0].last_probs, torch.full((3, 2), 0.5))

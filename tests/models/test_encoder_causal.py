"""Causality of the language-model encoder: with the lm head, token-conditioned norms (AutoNorm's selector,
FiLM's modulator) condition position t on the mean of the real tokens 0..t of its sample, so no output
position can read a later token, through attention or through a gate."""

import copy
import math

import pytest
import torch

import models.norms.autonorm as autonorm_module
from models import build_model
from models.norms import NORM_KINDS, AutoNorm, FiLMNorm, gate_summary
from models.norms._kernel_loader import load_mixed_norm_library
from models.norms.conditioning import TokenConditionedNorm
from models.norms.mixed import causal_token_mean, mixed_norm, mixed_norm_reference

VOCAB, PAD, DIM = 50, 0, 16


def _encoder(norm: str, head: str = "lm") -> torch.nn.Module:
    config = {"norm": norm, "head": head, "vocab_size": VOCAB, "pad_id": PAD, "dropout": 0.0}
    model = build_model("encoder_tiny", config)
    with torch.no_grad():  # leave the init: gates away from 0.5 and FiLM modulation away from zero
        for name, param in model.named_parameters():
            if "selector" in name or "modulator" in name:
                param.normal_(std=0.5)
    return model


def _perturbed(norm: TokenConditionedNorm, causal: bool) -> TokenConditionedNorm:
    with torch.no_grad():  # leave the init: gates away from 0.5 and FiLM modulation away from zero
        for param in norm.parameters():
            param.add_(torch.randn_like(param) * 0.3)
    norm.causal = causal
    return norm


def _causal_and_plain(norm: TokenConditionedNorm) -> tuple[TokenConditionedNorm, TokenConditionedNorm]:
    """The same perturbed norm twice: conditioning on prefix means, and on one mean per sample."""
    causal = _perturbed(norm, causal=True)
    plain = copy.deepcopy(causal)
    plain.causal = False
    return causal, plain


def _logits(model: torch.nn.Module, tokens: torch.Tensor, seed: int) -> torch.Tensor:
    torch.manual_seed(seed)  # identical Gumbel / Random Selector draws for both inputs in training mode
    with torch.no_grad():
        return model(tokens)


@pytest.mark.parametrize("training", [False, True], ids=["eval", "train"])
@pytest.mark.parametrize("norm", sorted(NORM_KINDS))
def test_changing_a_token_never_moves_the_logits_of_earlier_positions(norm: str, training: bool) -> None:
    model = _encoder(norm).train(training)
    tokens = torch.randint(1, VOCAB, (3, 12), generator=torch.Generator().manual_seed(1))
    base = _logits(model, tokens, seed=7)
    for position in (1, 6, 11):
        changed = tokens.clone()
        changed[:, position] = (changed[:, position] % (VOCAB - 1)) + 1  # another real token
        logits = _logits(model, changed, seed=7)
        torch.testing.assert_close(logits[:, :position], base[:, :position], atol=1e-5, rtol=1e-5)
        # The change does reach its own position, so the comparison above could fail.
        assert not torch.allclose(logits[:, position], base[:, position], atol=1e-4)


@pytest.mark.parametrize("norm", ["autonorm", "film"])
def test_changing_a_token_moves_earlier_positions_with_the_non_causal_token_head(
    norm: str,
) -> None:
    model = _encoder(norm, head="token").eval()
    tokens = torch.randint(1, VOCAB, (3, 12), generator=torch.Generator().manual_seed(1))
    changed = tokens.clone()
    changed[:, 6] = (changed[:, 6] % (VOCAB - 1)) + 1
    assert not torch.allclose(_logits(model, changed, 0)[:, :6], _logits(model, tokens, 0)[:, :6], atol=1e-4)


def test_only_the_lm_head_makes_the_conditioning_causal() -> None:
    for head, causal in (("lm", True), ("token", False), ("sequence", False)):
        model = _encoder("autonorm", head)
        assert model.config.causal is causal
        norms = [m for m in model.modules() if isinstance(m, TokenConditionedNorm)]
        assert len(norms) == 5 and all(m.causal is causal for m in norms)


def test_causal_token_mean_is_the_mean_of_the_real_tokens_up_to_each_position() -> None:
    x = torch.randn(3, 6, DIM, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0], [0, 1, 0, 1, 1, 0]], dtype=torch.bool)
    pooled = causal_token_mean(x, mask)
    assert pooled.shape == (3, 6, DIM)
    for b in range(3):
        for t in range(6):
            real = x[b, : t + 1][mask[b, : t + 1]]
            expected = real.mean(0) if len(real) else torch.zeros(DIM, dtype=x.dtype)
            torch.testing.assert_close(pooled[b, t], expected)
    torch.testing.assert_close(causal_token_mean(x), causal_token_mean(x, torch.ones(3, 6, dtype=torch.bool)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("kind", [AutoNorm, FiLMNorm])
def test_position_t_of_a_causal_norm_is_the_plain_norm_of_the_prefix_up_to_t(
    kind: type[TokenConditionedNorm], dtype: torch.dtype
) -> None:
    causal, plain = (norm.to(dtype).eval() for norm in _causal_and_plain(kind(DIM)))
    x = torch.randn(4, 9, DIM, dtype=dtype)
    mask = torch.arange(9) < torch.tensor([9, 5, 1, 7]).unsqueeze(1)  # (B, T)
    y = causal(x, token_mask=mask)
    for t in range(9):
        prefix = plain(x[:, : t + 1], token_mask=mask[:, : t + 1])
        torch.testing.assert_close(y[:, t], prefix[:, t], atol=1e-5, rtol=1e-5)


def test_the_causal_gate_at_the_last_position_of_an_unpadded_sequence_is_the_sequence_gate() -> None:
    causal, plain = (norm.eval() for norm in _causal_and_plain(AutoNorm(DIM)))
    x = torch.randn(5, 11, DIM)
    causal(x)
    plain(x)
    assert causal.last_probs.shape == (5, 11, 2) and plain.last_probs.shape == (5, 2)
    torch.testing.assert_close(causal.last_probs[:, -1], plain.last_probs, atol=1e-6, rtol=1e-5)
    # Earlier positions see a different prefix, so their gates really differ.
    assert not torch.allclose(causal.last_probs[:, 0], plain.last_probs, atol=1e-4)


def test_causal_training_draws_gumbel_noise_per_token_and_mixes_with_per_token_weights() -> None:
    norm = _perturbed(AutoNorm(DIM, tau=0.5), causal=True).train()
    x = torch.randn(2, 7, DIM)
    torch.manual_seed(3)
    weights, probs = norm.gate(x)
    assert weights.shape == probs.shape == (2, 7, 2)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 7))
    assert not torch.allclose(weights, probs)  # noisy in training, noise-free probs kept apart


@pytest.mark.skipif(load_mixed_norm_library() is None, reason="fused CPU kernels disabled or unavailable")
def test_a_causal_autonorm_falls_back_to_eager_and_a_sequence_autonorm_keeps_the_fused_kernel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []
    original = autonorm_module.autonorm_fused

    def spy(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(autonorm_module, "autonorm_fused", spy)
    causal, plain = _causal_and_plain(AutoNorm(DIM))
    x = torch.randn(2, 7, DIM)  # float32 on CPU: the fused kernel's input
    causal(x)
    assert calls == []
    plain(x)
    assert calls == [1]


def test_mixed_norm_takes_per_token_coefficients_on_the_eager_path() -> None:
    x = torch.randn(2, 5, DIM, requires_grad=True)
    cl, cd, c0 = (torch.randn(2, 5, DIM) for _ in range(3))
    alpha = torch.tensor(0.7)
    y = mixed_norm(x, alpha, cl, cd, c0)
    for t in range(5):
        row = mixed_norm_reference(x[:, t : t + 1], alpha, cl[:, t], cd[:, t], c0[:, t], eps=1e-5)
        torch.testing.assert_close(y[:, t : t + 1], row)
    y.sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()


def test_gate_summary_averages_per_token_gates_over_samples_and_tokens() -> None:
    model = torch.nn.Sequential(_perturbed(AutoNorm(DIM), causal=True)).eval()
    model(torch.randn(4, 6, DIM))
    probs = model[0].last_probs  # (B, T, 2)
    (row,) = gate_summary(model)
    assert row["dyt_weight"] == pytest.approx(float(probs[..., 0].mean()))
    entropy = -(probs * probs.log()).sum(-1)  # (B, T)
    assert row["entropy"] == pytest.approx(float(entropy.mean()))
    assert 0.0 <= row["entropy"] <= math.log(2.0)


@pytest.mark.parametrize("norm", ["autonorm", "film"])
def test_padding_an_lm_batch_further_changes_no_logit_or_gate_of_a_real_position(norm: str) -> None:
    # Eval only: in training each layer draws Gumbel noise per token, so a longer padded batch consumes
    # more of the generator and shifts later layers' draws (same distribution, different samples).
    model = _encoder(norm).eval()
    lengths = (5, 9, 12)

    def padded(length: int) -> torch.Tensor:
        batch = torch.full((len(lengths), length), PAD)
        for row, n in enumerate(lengths):
            batch[row, :n] = torch.randint(1, VOCAB, (n,), generator=torch.Generator().manual_seed(row))
        return batch  # (B, length)

    logits, gates = [], []
    for length in (16, 64):
        logits.append(_logits(model, padded(length), seed=7))
        gates.append([m.last_probs for m in model.modules() if isinstance(m, AutoNorm)])
    for row, n in enumerate(lengths):
        torch.testing.assert_close(logits[0][row, :n], logits[1][row, :n], atol=1e-5, rtol=1e-5)
    for short, long in zip(*gates, strict=True):
        assert short.shape == (3, 16, 2) and long.shape == (3, 64, 2)
        # Pads are excluded from every prefix mean: the first 16 positions agree, pads included.
        torch.testing.assert_close(short, long[:, :16], atol=1e-6, rtol=1e-5)

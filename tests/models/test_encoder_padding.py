"""Padding in the text encoder: token-conditioned norms (AutoNorm's selector, FiLM's modulator) pool
over real tokens only, so how far a batch is padded changes nothing."""

import pytest
import torch

import models.norms.autonorm as autonorm_module
from models import build_model
from models.norms import NORM_KINDS, AutoNorm, FiLMNorm
from models.norms._kernel_loader import load_mixed_norm_library

VOCAB, PAD = 50, 0
LENGTHS = (5, 9, 12)


def _sentences() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(3)
    return [torch.randint(1, VOCAB, (n,), generator=generator) for n in LENGTHS]


def _padded(sentences: list[torch.Tensor], length: int) -> torch.Tensor:
    batch = torch.full((len(sentences), length), PAD)
    for row, sentence in enumerate(sentences):
        batch[row, : len(sentence)] = sentence
    return batch  # (B, length)


def _encoder(norm: str, head: str, dtype: torch.dtype) -> torch.nn.Module:
    config = {"norm": norm, "head": head, "vocab_size": VOCAB, "pad_id": PAD, "dropout": 0.0}
    model = build_model("encoder_tiny", config).to(dtype)
    with torch.no_grad():  # leave the init: gates away from 0.5 and FiLM modulation away from zero
        for name, param in model.named_parameters():
            if "selector" in name or "modulator" in name:
                param.normal_(std=0.5)
    return model


def _conditioning_per_layer(model: torch.nn.Module, tokens: torch.Tensor, seed: int) -> list[torch.Tensor]:
    """Every AutoNorm's noise-free gate probabilities and every FiLM's (dgamma, beta), in module order."""
    films = [m for m in model.modules() if isinstance(m, FiLMNorm)]
    captured: dict[int, torch.Tensor] = {}
    hooks = [
        film.modulator.register_forward_hook(lambda _m, _i, out, i=i: captured.__setitem__(i, out))
        for i, film in enumerate(films)
    ]
    torch.manual_seed(seed)  # the same Gumbel draws for both paddings in training mode
    with torch.no_grad():
        model(tokens)
    for hook in hooks:
        hook.remove()
    gates = [m.last_probs for m in model.modules() if isinstance(m, AutoNorm)]
    return gates + [captured[i] for i in range(len(films))]


# Causal AutoNorm in training is left out: its gates draw Gumbel noise per token, so a longer batch
# shifts the later layers' draws (same distribution, different samples); eval covers it.
_PADDING_CASES = [
    (norm, head, training)
    for norm in ("autonorm", "film")
    for head in ("sequence", "token", "lm")
    for training in (False, True)
    if not (norm == "autonorm" and head == "lm" and training)
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["fused_cpu", "eager"])
@pytest.mark.parametrize(("norm", "head", "training"), _PADDING_CASES)
def test_padding_to_16_or_64_gives_the_same_gates_and_film_modulation_in_every_layer(
    norm: str, head: str, training: bool, dtype: torch.dtype
) -> None:
    model = _encoder(norm, head, dtype).train(training)
    sentences = _sentences()
    short = _conditioning_per_layer(model, _padded(sentences, 16), seed=11)
    long = _conditioning_per_layer(model, _padded(sentences, 64), seed=11)
    assert len(short) == 2 * 2 + 1  # two blocks with two norms each, plus the final norm
    for a, b in zip(short, long, strict=True):
        if head == "lm":  # causal: per-token (B, T, ...) conditioning; compare the 16 positions both have
            b = b[:, : a.shape[1]]
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)
    # The gates really are input-dependent here, so the comparison above could fail.
    assert any(not torch.allclose(g[0], g[1]) for g in short)


def test_padding_does_not_change_the_sequence_logits() -> None:
    model = _encoder("autonorm", "sequence", torch.float32).eval()
    sentences = _sentences()
    with torch.no_grad():
        torch.testing.assert_close(
            model(_padded(sentences, 16)), model(_padded(sentences, 64)), atol=1e-5, rtol=1e-5
        )


def test_each_sentence_gets_the_gates_it_gets_alone_without_any_padding() -> None:
    model = _encoder("autonorm", "token", torch.float32).eval()
    sentences = _sentences()
    batched = _conditioning_per_layer(model, _padded(sentences, 16), seed=0)
    for row, sentence in enumerate(sentences):
        alone = _conditioning_per_layer(model, sentence.unsqueeze(0), seed=0)
        for in_batch, single in zip(batched, alone, strict=True):
            torch.testing.assert_close(in_batch[row : row + 1], single, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("kind", sorted(NORM_KINDS))
def test_every_norm_kind_trains_on_a_padded_batch(kind: str) -> None:
    model = build_model("encoder_tiny", {"norm": kind, "vocab_size": VOCAB, "head": "token"})
    tokens = _padded(_sentences(), 16)
    loss = model(tokens).square().mean()
    loss.backward()
    assert torch.isfinite(loss)
    assert all(p.grad is not None for n, p in model.named_parameters() if "blocks.1.mlp.branch" in n)


@pytest.mark.skipif(load_mixed_norm_library() is None, reason="fused CPU kernels disabled or unavailable")
def test_a_batch_without_pads_keeps_the_unmasked_fused_path_and_a_padded_batch_the_masked_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[torch.Tensor | None] = []
    original = autonorm_module.autonorm_fused

    def spy(*args: object, **kwargs: object) -> object:
        calls.append(kwargs.get("token_weights"))
        return original(*args, **kwargs)

    monkeypatch.setattr(autonorm_module, "autonorm_fused", spy)
    model = _encoder("autonorm", "sequence", torch.float32)
    model(torch.randint(1, VOCAB, (3, 16)))
    assert len(calls) == 5 and all(weights is None for weights in calls)
    calls.clear()
    model(_padded(_sentences(), 16))
    assert len(calls) == 5 and all(weights is not None for weights in calls)

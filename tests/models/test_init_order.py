"""Initialisation order: the backbone's own init (init_scale, the branch init scale alpha) touches the
residual branches only; AutoNorm gates start at exactly (0.5, 0.5) and FiLM starts as plain LayerNorm."""

import copy
import math

import pytest
import torch

from models import build_model
from models.norms import AutoNorm, FiLMNorm

BACKBONES = {
    "vit_lite_tiny": lambda: torch.randn(3, 1, 8, 8),
    "encoder_tiny": lambda: torch.randint(1, 50, (3, 11)),
    "tabular_tiny": lambda: torch.randn(3, 8),
    "residual_mlp_rank": lambda: torch.randn(3, 7, 64),
}
TINY = {"vit_lite_tiny": {}, "encoder_tiny": {"vocab_size": 50}, "tabular_tiny": {}, "residual_mlp_rank": {}}


def _build(preset: str, **overrides: object) -> torch.nn.Module:
    return build_model(preset, {**TINY[preset], **overrides})


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("init_scale", [1.0, 3.0])
@pytest.mark.parametrize("preset", sorted(BACKBONES))
def test_every_autonorm_gate_is_exactly_one_half_at_init_on_every_backbone(
    preset: str, init_scale: float, training: bool
) -> None:
    model = _build(preset, norm="autonorm", init_scale=init_scale).train(training)
    norms = [m for m in model.modules() if isinstance(m, AutoNorm)]
    assert norms
    for norm in norms:
        assert torch.count_nonzero(norm.selector.fc2.weight) == 0
        assert torch.count_nonzero(norm.selector.fc2.bias) == 0
    with torch.no_grad():
        model(BACKBONES[preset]())
    for norm in norms:
        # last_probs are the noise-free probabilities, in training as in eval.
        assert torch.equal(norm.last_probs, torch.full_like(norm.last_probs, 0.5))
        entropy = -(norm.last_probs * norm.last_probs.log()).sum(-1)
        assert torch.equal(entropy, torch.full_like(entropy, math.log(2.0)))


def _plain_layernorm_copy(model: torch.nn.Module) -> torch.nn.Module:
    """The same model with every FiLM norm replaced by an affine-free LayerNorm."""
    plain = copy.deepcopy(model)
    for name, module in list(plain.named_modules()):
        if isinstance(module, FiLMNorm):
            parent_name, _, child = name.rpartition(".")
            parent = plain.get_submodule(parent_name) if parent_name else plain
            dim = module.modulator[0].in_features
            setattr(parent, child, torch.nn.LayerNorm(dim, eps=module.eps, elementwise_affine=False))
    return plain


@pytest.mark.parametrize("preset", sorted(BACKBONES))
def test_film_predicts_exactly_zero_modulation_and_matches_plain_layernorm_at_init(preset: str) -> None:
    # float64: the eager path, so the comparison with torch's LayerNorm is tight even 16 blocks deep.
    model = _build(preset, norm="film", init_scale=2.0).double().eval()
    films = [m for m in model.modules() if isinstance(m, FiLMNorm)]
    assert films
    modulations: list[torch.Tensor] = []
    for film in films:
        film.modulator.register_forward_hook(lambda _m, _i, out: modulations.append(out))
    x = BACKBONES[preset]()
    x = x.double() if x.is_floating_point() else x
    with torch.no_grad():
        out = model(x)
        expected = _plain_layernorm_copy(model)(x)
    assert len(modulations) == len(films)
    assert all(torch.count_nonzero(dgamma_beta) == 0 for dgamma_beta in modulations)
    torch.testing.assert_close(out, expected, atol=1e-10, rtol=1e-10)


def _is_branch_weight(name: str) -> bool:
    return ".branch." in name and name.endswith("weight")


@pytest.mark.parametrize("norm", ["autonorm", "film"])
@pytest.mark.parametrize("preset", sorted(BACKBONES))
def test_init_scale_rescales_branch_weights_and_nothing_else(preset: str, norm: str) -> None:
    torch.manual_seed(7)
    base = dict(_build(preset, norm=norm, init_scale=1.0).named_parameters())
    torch.manual_seed(7)
    scaled = dict(_build(preset, norm=norm, init_scale=0.25).named_parameters())
    assert base.keys() == scaled.keys()
    branch_weights = [name for name in base if _is_branch_weight(name)]
    assert branch_weights and any("selector" in n or "modulator" in n for n in base)
    for name, param in base.items():
        if _is_branch_weight(name):
            torch.testing.assert_close(scaled[name], 0.25 * param, msg=name)
        else:
            # Selector / FiLM MLPs, embeddings, heads, norms and LayerScale keep their own init.
            assert torch.equal(scaled[name], param), name

"""The residual-MLP classifier: a study can train it, and the rank tools measure its residual MLP itself
(not the input projection or the head)."""

import copy
import math

import pytest
import torch

from models import MODELS, PRESETS, MlpClassifier, build_model
from models.rank import init_rank_report
from models.residual_mlp import ResidualMLP

DIGITS = {"image_size": 8, "in_channels": 1, "num_classes": 10}


@pytest.fixture(autouse=True)
def _seeded() -> None:
    torch.manual_seed(0)


def test_it_is_a_model_and_has_presets_for_digits_and_cifar_sizes() -> None:
    assert "mlp_classifier" in MODELS
    assert PRESETS["mlp_classifier_tiny"]["model"] == "mlp_classifier"
    assert PRESETS["mlp_classifier_paper"]["model"] == "mlp_classifier"
    tiny = build_model("mlp_classifier_tiny", DIGITS)
    assert isinstance(tiny, MlpClassifier) and isinstance(tiny.trunk, ResidualMLP)
    assert tiny(torch.randn(5, 1, 8, 8)).shape == (5, 10)
    paper = build_model("mlp_classifier_paper", {"image_size": 32, "in_channels": 3, "num_classes": 10})
    assert paper(torch.randn(2, 3, 32, 32)).shape == (2, 10)
    assert len(paper.trunk.blocks) == 32 and paper.config.dim == 128


def test_every_rank_knob_reaches_the_trunk() -> None:
    knobs = {
        "norm_placement": "post",
        "skip_scale": 3.0,
        "init_scale": 2.0,
        "activation": "gelu",
        "branch": "one_matrix",
        "mlp_ratio": 2.5,
    }
    model = build_model("mlp_classifier_tiny", {**DIGITS, **knobs})
    trunk = model.trunk.config
    assert {k: getattr(trunk, k) for k in knobs} == knobs
    assert isinstance(model.final_norm, torch.nn.Identity)  # post-norm blocks already end in a norm
    pre = build_model("mlp_classifier_tiny", {**DIGITS, "norm_placement": "pre"})
    assert isinstance(pre.final_norm, torch.nn.LayerNorm)


def test_a_standardised_image_enters_the_stream_with_unit_rms() -> None:
    model = build_model("mlp_classifier", {**DIGITS, "dim": 256})
    tokens = model.tokens(torch.randn(64, 1, 8, 8))  # standardised pixels: unit variance
    assert tokens.pow(2).mean().sqrt().item() == pytest.approx(1.0, abs=0.1)


def test_the_rank_report_measures_the_residual_mlp_on_the_batchs_tokens() -> None:
    model = build_model("mlp_classifier_tiny", {**DIGITS, "depth": 6})
    images = torch.randn(8, 1, 8, 8)
    report = init_rank_report(model, images)
    with (
        torch.no_grad()
    ):  # the bare residual MLP on the (T, D) tokens, projected in float64 as the report does
        trunk, tokens = copy.deepcopy(model).double().rank_view(images.double())
    direct = init_rank_report(trunk, tokens)
    assert report.keys() == direct.keys()
    for key, value in report.items():
        assert value == pytest.approx(direct[key], rel=1e-9, abs=1e-12), key
    # Z_l is examples x width: 8 tokens; one ratio per block; the Jacobian at every depth.
    assert sum(k.startswith("init_branch_skip_ratio_") for k in report) == 6
    assert [f"init_erank_jacobian_{d}" in report for d in range(1, 7)] == [True] * 6
    assert all(isinstance(v, float) and math.isfinite(v) for v in report.values())


def test_gated_norms_start_at_one_half_in_the_final_norm_too() -> None:
    model = build_model("mlp_classifier_tiny", {**DIGITS, "norm": "autonorm"})
    from models.norms import gated_norms

    assert len(gated_norms(model)) == len(model.trunk.blocks) + 1
    assert model(torch.randn(3, 1, 8, 8)).shape == (3, 10)

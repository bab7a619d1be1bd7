"""check_backbone: what a plugin's backbone must do before a study may train it (build its norm layers from
config["norm"], give the family's outputs, train) and the sizes it measures for the memory estimate: the
most parameters and saved floats per sample over its presets, the task fields and the measured norms."""

from __future__ import annotations

import pytest
from torch import nn

from models.norms import build_norm
from models.plugins.backbone_check import MEASURED_NORMS, check_backbone, example_batch, expected_output_shape
from normlab import REGISTRY
from normlab.loading import keep_only_plugins
from normlab.plugin import backbone, registering_as

DIGITS = {"image_size": 8, "in_channels": 1, "num_classes": 10}
CIFAR100 = {"image_size": 32, "in_channels": 3, "num_classes": 100}


@pytest.fixture(autouse=True)
def _builtins_only_afterwards():
    yield
    keep_only_plugins(())


def _register(name: str, build) -> None:
    with registering_as(f"{name}.py@00000000"):
        backbone(name, family="image", config_fields=("dim",), presets={f"{name}_wide": {"dim": 16}})(build)


def _linear_norm_head(config: dict, *, norm: bool = True, classes: int | None = None) -> nn.Module:
    dim = config.get("dim", 4)
    pixels = config["in_channels"] * config["image_size"] ** 2
    middle = build_norm(config["norm"], dim, **config["norm_options"]) if norm else nn.LayerNorm(dim)
    return nn.Sequential(
        nn.Flatten(), nn.Linear(pixels, dim), middle, nn.Linear(dim, classes or config["num_classes"])
    )


def test_a_conforming_backbone_passes_with_its_largest_build_s_parameters():
    _register("good", _linear_norm_head)
    report = check_backbone(REGISTRY.backbones.get("good"), [DIGITS, CIFAR100, DIGITS])
    assert report.ok, report.problem
    # The wide preset (dim 16) on CIFAR-100 with FiLM, whose modulator is Linear(16, 8), Linear(8, 32).
    film = 16 * 8 + 8 + 8 * 32 + 32
    assert report.parameters == (3 * 32 * 32 * 16 + 16) + film + (16 * 100 + 100)
    assert report.activations >= 3 * 32 * 32  # the first Linear keeps its input for the backward pass
    assert MEASURED_NORMS == ("layernorm", "film")


def test_a_backbone_whose_norm_is_not_the_config_s_is_refused_naming_build_norm():
    _register("fixed_norm", lambda config: _linear_norm_head(config, norm=False))
    report = check_backbone(REGISTRY.backbones.get("fixed_norm"), [DIGITS])
    assert not report.ok
    assert "holds no layernorm layer" in report.problem and "models.norms.build_norm" in report.problem


def test_a_backbone_whose_outputs_are_not_the_family_s_is_refused_naming_both_shapes():
    _register("wrong_head", lambda config: _linear_norm_head(config, classes=3))
    report = check_backbone(REGISTRY.backbones.get("wrong_head"), [DIGITS])
    assert not report.ok and "gave outputs (2, 3); the image backbones give (2, 10)" in report.problem


def test_a_builder_that_fails_is_refused_with_its_error():
    _register("broken", lambda config: config["no_such_field"])
    report = check_backbone(REGISTRY.backbones.get("broken"), [DIGITS])
    assert not report.ok and "the build failed: KeyError" in report.problem


@pytest.mark.parametrize(
    ("family", "task", "inputs", "outputs"),
    [
        ("image", DIGITS, (2, 1, 8, 8), (2, 10)),
        ("text", {"vocab_size": 50, "max_len": 16, "head": "lm", "pad_id": 0}, (2, 16), (2, 16, 50)),
        ("text", {"vocab_size": 50, "max_len": 16, "head": "token", "num_classes": 7}, (2, 16), (2, 16, 7)),
        ("text", {"vocab_size": 50, "max_len": 16, "head": "sequence", "num_classes": 2}, (2, 16), (2, 2)),
        ("tabular", {"num_features": 8, "num_outputs": 1}, (2, 8), (2, 1)),
    ],
)
def test_the_batch_and_outputs_of_each_family_are_the_built_in_backbones(family, task, inputs, outputs):
    from models import build_model

    built_in = {"image": "vit_lite_tiny", "text": "encoder_tiny", "tabular": "tabular_tiny"}[family]
    x = example_batch(family, task)
    assert tuple(x.shape) == inputs and expected_output_shape(family, task) == outputs
    assert tuple(build_model(built_in, task).eval()(x).shape) == outputs

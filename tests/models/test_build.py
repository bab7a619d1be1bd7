import pytest
import torch

from models import METHODS, PRESETS, build_model, norm_for_method
from models.norms import NORM_KINDS, AutoNorm


def test_paper_presets_have_the_paper_sizes() -> None:
    vit = build_model("vit_lite_paper").config
    assert (vit.depth, vit.heads, vit.dim, vit.patch_size) == (8, 4, 128, 4)
    for name in ("encoder_paper", "tabular_paper"):
        config = build_model(name).config
        assert (config.depth, config.heads, config.dim) == (12, 8, 128)


def test_every_preset_builds_and_config_overrides_preset_fields() -> None:
    for name in PRESETS:
        assert isinstance(build_model(name), torch.nn.Module)
    model = build_model("vit_lite_tiny", {"depth": 3, "norm": "autonorm", "norm_options": {"tau": 0.3}})
    assert len(model.blocks) == 3
    norms = [m for m in model.modules() if isinstance(m, AutoNorm)]
    assert len(norms) == 3 * 2 + 1 and all(norm.tau == 0.3 for norm in norms)


def test_unknown_model_or_field_is_rejected_with_the_valid_names() -> None:
    with pytest.raises(ValueError, match="vit_lite"):
        build_model("resnet")
    with pytest.raises(ValueError, match="depth"):
        build_model("vit_lite_tiny", {"layers": 3})


@pytest.mark.parametrize("method", METHODS)
def test_every_method_maps_to_a_buildable_norm(method: str) -> None:
    choice = norm_for_method(method)
    assert choice.kind in NORM_KINDS
    assert choice.gate_freeze is (method == "autonorm_s")
    model = build_model("tabular_tiny", {"norm": choice.kind, "num_features": 3})
    assert model(torch.randn(2, 3)).shape == (2, 1)


def test_unknown_method_is_rejected() -> None:
    with pytest.raises(ValueError, match="autonorm_s"):
        norm_for_method("batchnorm")

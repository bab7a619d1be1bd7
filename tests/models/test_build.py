import pytest
import torch

from models import PRESETS, build_model
from models.norms import AutoNorm


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

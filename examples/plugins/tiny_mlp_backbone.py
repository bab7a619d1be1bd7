"""A tiny MLP backbone as a NormLab plugin: flatten the image, Linear, the method's norm, GELU, Linear.

Name this file in a spec's `plugins` and `model: tiny_mlp` (or its preset `tiny_mlp_wide`) trains on any
image dataset. Its norm layer is the one the study's method names (models.norms.build_norm), so every
method, a built-in's or another plugin's, is compared on it.
"""

from __future__ import annotations

from torch import nn

from models.norms import build_norm
from normlab.plugin import backbone


@backbone("tiny_mlp", family="image", config_fields=("dim",), presets={"tiny_mlp_wide": {"dim": 128}})
def build(config: dict) -> nn.Module:
    """Flattened pixels -> dim -> the method's norm -> GELU -> class logits."""
    dim = int(config.get("dim", 32))
    pixels = int(config["in_channels"]) * int(config["image_size"]) ** 2
    return nn.Sequential(
        nn.Flatten(),  # (B, C, H, W) -> (B, C*H*W)
        nn.Linear(pixels, dim),
        build_norm(config["norm"], dim, **config["norm_options"]),
        nn.GELU(),
        nn.Linear(dim, int(config["num_classes"])),  # (B, num_classes)
    )

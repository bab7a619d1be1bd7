"""Named model configurations: the papers' sizes and tiny smoke-test sizes."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

__all__ = ["PRESETS"]

_PRESETS: dict[str, dict[str, Any]] = {
    # AutoNorm paper, vision: ViT-Lite 8 layers, 4 heads, dim 128, patch 4 (CIFAR-sized inputs).
    "vit_lite_paper": {"model": "vit_lite", "depth": 8, "heads": 4, "dim": 128, "patch_size": 4},
    # Trains in seconds on 8x8 digits.
    "vit_lite_tiny": {
        "model": "vit_lite",
        "depth": 2,
        "heads": 2,
        "dim": 32,
        "patch_size": 2,
        "image_size": 8,
        "in_channels": 1,
        "drop_path": 0.0,
    },
    "encoder_paper": {"model": "encoder", "depth": 12, "heads": 8, "dim": 128},
    "encoder_tiny": {"model": "encoder", "depth": 2, "heads": 2, "dim": 32, "max_len": 64, "drop_path": 0.0},
    "tabular_paper": {"model": "tabular", "depth": 12, "heads": 8, "dim": 128},
    "tabular_tiny": {"model": "tabular", "depth": 2, "heads": 2, "dim": 32, "drop_path": 0.0},
    "residual_mlp_rank": {"model": "residual_mlp", "depth": 16, "dim": 64},
    # The residual MLP with an input projection and a head, for rank studies that train (Transforming
    # Rank states its results for residual MLP branches): 16 blocks of width 64 on 8x8 digits ...
    "mlp_classifier_tiny": {"model": "mlp_classifier", "depth": 16, "dim": 64},
    # ... and 32 blocks of width 128 on CIFAR-sized images.
    "mlp_classifier_paper": {"model": "mlp_classifier", "depth": 32, "dim": 128},
}
PRESETS = MappingProxyType({name: MappingProxyType(fields) for name, fields in _PRESETS.items()})

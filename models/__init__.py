"""NormLab models: norm layers, residual blocks, backbones and rank measurements (torch only)."""

from normlab.plugin import registering_as
from normlab.records import BUILTIN

# The built-in norm layers and backbones register as "builtin" even where a plugin's import (under
# normlab.loading's registering_as) is what first imports models: a plugin's builder calls
# models.norms.build_norm, and its records alone are dropped when the process moves on to another study.
with registering_as(BUILTIN):
    from models.build import MODELS, build_model
    from models.config import TransformerConfig
    from models.encoder import Encoder, EncoderConfig
    from models.mlp_classifier import MlpClassifier, MlpClassifierConfig
    from models.presets import PRESETS
    from models.residual_mlp import ResidualMLP, ResidualMLPConfig
    from models.tabular import TabularConfig, TabularTransformer
    from models.vit_lite import ViTLite, ViTLiteConfig

__all__ = [
    "MODELS",
    "PRESETS",
    "Encoder",
    "EncoderConfig",
    "MlpClassifier",
    "MlpClassifierConfig",
    "ResidualMLP",
    "ResidualMLPConfig",
    "TabularConfig",
    "TabularTransformer",
    "TransformerConfig",
    "ViTLite",
    "ViTLiteConfig",
    "build_model",
]

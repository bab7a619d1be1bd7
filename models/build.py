"""`build_model(name_or_preset, config)`: the one entry point that turns names into modules."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import nn

from models.config import config_field_names
from models.encoder import Encoder, EncoderConfig
from models.mlp_classifier import MlpClassifier, MlpClassifierConfig
from models.presets import PRESETS
from models.residual_mlp import ResidualMLP, ResidualMLPConfig
from models.tabular import TabularConfig, TabularTransformer
from models.vit_lite import ViTLite, ViTLiteConfig

__all__ = ["MODELS", "build_model"]

MODELS: dict[str, tuple[type, type[nn.Module]]] = {
    "vit_lite": (ViTLiteConfig, ViTLite),
    "encoder": (EncoderConfig, Encoder),
    "tabular": (TabularConfig, TabularTransformer),
    "residual_mlp": (ResidualMLPConfig, ResidualMLP),
    "mlp_classifier": (MlpClassifierConfig, MlpClassifier),
}


def build_model(name_or_preset: str, config: Mapping[str, Any] | None = None) -> nn.Module:
    """A model by name (vit_lite, encoder, tabular, residual_mlp, mlp_classifier) or preset (models.PRESETS);
    `config` overrides preset fields. Unknown fields raise ValueError naming the valid ones."""
    if name_or_preset in PRESETS:
        fields = dict(PRESETS[name_or_preset])
        model_name = fields.pop("model")
    elif name_or_preset in MODELS:
        fields, model_name = {}, name_or_preset
    else:
        raise ValueError(
            f"unknown model or preset {name_or_preset!r}; models: {sorted(MODELS)}, presets: {sorted(PRESETS)}"
        )
    overrides = dict(config or {})
    overrides.pop("model", None)
    fields.update(overrides)
    config_cls, model_cls = MODELS[model_name]
    unknown = set(fields) - config_field_names(config_cls)
    if unknown:
        raise ValueError(
            f"{model_name} has no config fields {sorted(unknown)}; valid: {sorted(config_field_names(config_cls))}"
        )
    if fields.get("norm_options") is None:
        fields.pop("norm_options", None)
    return model_cls(config_cls(**fields))

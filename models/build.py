"""`build_model(name_or_preset, config)`: the one entry point that turns names into modules.

The backbones a study trains are records of normlab.REGISTRY.backbones: studies.backbones states the
built-ins' facts without torch, and this module registers the same records with their builders (facts
first, then their code: the registry keeps the record that has it). A plugin's backbone
(normlab.plugin.backbone) builds through the same call. The bare residual MLP, which has no task head,
is built here but is no backbone a study may name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields as dataclass_fields
from typing import Any

from torch import nn

from models.config import config_field_names
from models.encoder import Encoder, EncoderConfig
from models.mlp_classifier import MlpClassifier, MlpClassifierConfig
from models.presets import PRESETS
from models.residual_mlp import ResidualMLP, ResidualMLPConfig
from models.tabular import TabularConfig, TabularTransformer
from models.vit_lite import ViTLite, ViTLiteConfig
from normlab import REGISTRY, Backbone, RegistryError
from normlab.records import BUILTIN

__all__ = ["BACKBONE_FAMILIES", "MODELS", "build_model"]

MODELS: dict[str, tuple[type, type[nn.Module]]] = {
    "vit_lite": (ViTLiteConfig, ViTLite),
    "encoder": (EncoderConfig, Encoder),
    "tabular": (TabularConfig, TabularTransformer),
    "residual_mlp": (ResidualMLPConfig, ResidualMLP),
    "mlp_classifier": (MlpClassifierConfig, MlpClassifier),
}
# The data family each backbone a study may train reads (the residual MLP reads none: no task head).
BACKBONE_FAMILIES: dict[str, str] = {
    "vit_lite": "image",
    "encoder": "text",
    "tabular": "tabular",
    "mlp_classifier": "image",
}


def _builder(config_cls: type, model_cls: type[nn.Module]) -> Callable[[Mapping[str, Any]], nn.Module]:
    def build(config: Mapping[str, Any]) -> nn.Module:
        fields = dict(config)
        if fields.get("norm_options") is None:
            fields.pop("norm_options", None)
        return model_cls(config_cls(**fields))

    return build


def _register_builtin(name: str, family: str) -> None:
    config_cls, model_cls = MODELS[name]
    presets = {
        preset: {k: v for k, v in fields.items() if k != "model"}
        for preset, fields in PRESETS.items()
        if fields["model"] == name
    }
    record = Backbone(
        name,
        family,  # type: ignore[arg-type]
        tuple(f.name for f in dataclass_fields(config_cls)),
        presets,
        source=BUILTIN,  # even where a plugin's import is what first imports models
        build=_builder(config_cls, model_cls),
    )
    try:
        REGISTRY.backbones.add(record)
    except RegistryError as error:
        raise RegistryError(
            f"models' backbone {name!r} ({record}) differs from the facts registered for it "
            f"({REGISTRY.backbones.get(name)}): keep studies/backbones.py in step with models"
        ) from error


for _name, _family in BACKBONE_FAMILIES.items():
    _register_builtin(_name, _family)


def _unknown(name: str) -> ValueError:
    models = sorted({*MODELS, *REGISTRY.backbones.names()})
    presets = sorted({*PRESETS, *(p for r in REGISTRY.backbones for p in r.presets)})
    return ValueError(f"unknown model or preset {name!r}; models: {models}, presets: {presets}")


def build_model(name_or_preset: str, config: Mapping[str, Any] | None = None) -> nn.Module:
    """A model by name (vit_lite, encoder, tabular, residual_mlp, mlp_classifier, a plugin's backbone) or
    preset (models.PRESETS, a plugin backbone's); `config` overrides preset fields. Unknown fields raise
    ValueError naming the valid ones."""
    overrides = dict(config or {})
    overrides.pop("model", None)
    record = REGISTRY.backbone_of(name_or_preset)
    if record is None:  # the residual MLP and its preset: built, but no backbone a study trains
        if name_or_preset in PRESETS:
            fields = dict(PRESETS[name_or_preset])
            model_name = fields.pop("model")
        elif name_or_preset in MODELS:
            fields, model_name = {}, name_or_preset
        else:
            raise _unknown(name_or_preset)
        config_cls, model_cls = MODELS[model_name]
        return _build(
            model_name,
            {**fields, **overrides},
            config_field_names(config_cls),
            _builder(config_cls, model_cls),
        )
    fields = {**record.presets.get(name_or_preset, {}), **overrides}
    if record.build is None:
        raise ValueError(
            f"backbone {record.name!r} is {record.source}'s, whose code this process has not imported"
        )
    if record.source != BUILTIN:  # a plugin's builder reads them from its config
        fields.setdefault("norm", "layernorm")
        if fields.get("norm_options") is None:
            fields["norm_options"] = {}
    return _build(record.name, fields, set(record.config_fields), record.build)


def _build(
    name: str, fields: dict[str, Any], valid: set[str], build: Callable[[Mapping[str, Any]], nn.Module]
) -> nn.Module:
    unknown = set(fields) - valid
    if unknown:
        raise ValueError(f"{name} has no config fields {sorted(unknown)}; valid: {sorted(valid)}")
    return build(fields)

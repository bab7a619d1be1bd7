"""The built-in backbones as registry records (normlab.REGISTRY.backbones): the data family each reads, its
config fields and its presets, stated once, with no torch. models registers the same records with their
builders (models.build); a plugin registers its own through normlab.plugin.backbone. A test checks these
facts against models (the config dataclasses' fields, models.PRESETS).

The views below read the registry at each lookup, so a plugin's backbone, or one an overlay shows for the
current context (a spec validated from its plugin's facts), is a model a spec may name as soon as it is
registered.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

from normlab import REGISTRY
from normlab.records import BUILTIN, FAMILY_TASK_FIELDS, Backbone

__all__ = [
    "BUILTIN_PRESETS",
    "PresetFields",
    "backbone_of",
    "backbone_record",
    "known_model",
    "model_names",
    "plugin_backbone",
]


# models.config.TransformerConfig's fields, in its order: the three Transformer backbones share them.
_TRANSFORMER_FIELDS: tuple[str, ...] = (
    *("dim", "depth", "heads", "mlp_ratio", "dropout", "drop_path", "layer_scale_init"),
    *("norm", "norm_options", "norm_placement", "skip_scale", "init_scale", "activation", "branch"),
)
# models.residual_mlp.ResidualMLPConfig's: no heads, dropout, drop path or LayerScale, so knobs that set
# those do not apply to it (studies.spec.rules.knobs_fit_the_model).
_RESIDUAL_MLP_FIELDS: tuple[str, ...] = (
    *("dim", "depth", "mlp_ratio", "norm", "norm_options", "norm_placement", "skip_scale", "init_scale"),
    *("activation", "branch"),
)

# models.presets.PRESETS of the models a study may train, without their `model` key (a test checks they
# are the same). The bare `residual_mlp` and its preset are left out on purpose: it has no task head, so
# every trial of a study would fail; the rank studies train it as `mlp_classifier` (an input projection,
# the residual MLP, a head).
BUILTIN_PRESETS: Mapping[str, Mapping[str, Mapping[str, Any]]] = {
    "vit_lite": {
        "vit_lite_paper": {"depth": 8, "heads": 4, "dim": 128, "patch_size": 4},
        "vit_lite_tiny": {
            **{"depth": 2, "heads": 2, "dim": 32, "patch_size": 2, "image_size": 8, "in_channels": 1},
            "drop_path": 0.0,
        },
    },
    "encoder": {
        "encoder_paper": {"depth": 12, "heads": 8, "dim": 128},
        "encoder_tiny": {"depth": 2, "heads": 2, "dim": 32, "max_len": 64, "drop_path": 0.0},
    },
    "tabular": {
        "tabular_paper": {"depth": 12, "heads": 8, "dim": 128},
        "tabular_tiny": {"depth": 2, "heads": 2, "dim": 32, "drop_path": 0.0},
    },
    "mlp_classifier": {
        "mlp_classifier_paper": {"depth": 32, "dim": 128},
        "mlp_classifier_tiny": {"depth": 16, "dim": 64},
    },
}


def _builtin(name: str, family: str, own: tuple[str, ...], extra: tuple[str, ...] = ()) -> None:
    # Its fields in its config dataclass's order: its own, the family's task fields, then any of its own
    # that come after them. The record's default source, "builtin", even where a plugin's import is what
    # first imports this module.
    fields = (*own, *FAMILY_TASK_FIELDS[family], *extra)
    presets = {preset: dict(values) for preset, values in BUILTIN_PRESETS[name].items()}
    REGISTRY.backbones.add(Backbone(name, family, fields, presets))  # type: ignore[arg-type]


# Each family's default backbone (studies.datasets.FAMILY_BACKBONE), and the residual-MLP classifier
# (flattened images).
_builtin("vit_lite", "image", _TRANSFORMER_FIELDS, ("patch_size",))
_builtin("encoder", "text", _TRANSFORMER_FIELDS)
_builtin("tabular", "tabular", _TRANSFORMER_FIELDS)
_builtin("mlp_classifier", "image", _RESIDUAL_MLP_FIELDS)


def backbone_record(model: str) -> Backbone:
    """The record of the backbone a model name (a backbone or a preset) builds; ValueError naming the known
    models if none has it."""
    record = REGISTRY.backbone_of(model)
    if record is None:
        raise ValueError(f"unknown model {model!r}; known models: {', '.join(model_names())}")
    return record


def backbone_of(model: str) -> str:
    """The backbone a model name or preset builds."""
    return backbone_record(model).name


def plugin_backbone(backbone: str) -> Backbone | None:
    """The record of `backbone` where a plugin brought it (its sizes are measured, not counted); None for
    a built-in or an unknown name."""
    record = REGISTRY.backbones.find(backbone)
    return record if record is not None and record.source != BUILTIN else None


def model_names() -> tuple[str, ...]:
    """Every model a spec may name here and now: each backbone, then its presets; the built-ins first."""
    return tuple(name for record in REGISTRY.backbones for name in record.model_names())


def known_model(name: object) -> bool:
    """Whether `name` is a registered backbone or one of its presets."""
    return isinstance(name, str) and REGISTRY.backbone_of(name) is not None


class PresetFields(Mapping[str, Mapping[str, Any]]):
    """Preset name -> the fields it sets, of every registered backbone's presets."""

    def _presets(self) -> dict[str, Mapping[str, Any]]:
        return {
            name: MappingProxyType(dict(fields))
            for record in REGISTRY.backbones
            for name, fields in record.presets.items()
        }

    def __getitem__(self, name: str) -> Mapping[str, Any]:
        return self._presets()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._presets())

    def __len__(self) -> int:
        return len(self._presets())

    def __repr__(self) -> str:
        return f"PresetFields({self._presets()!r})"

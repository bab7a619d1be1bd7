"""The backbones a spec may name are records of the one registry: the built-ins' facts are models' own
(their config dataclasses' fields, models.PRESETS, every preset builds), and KNOWN_MODELS,
MODEL_CONFIG_FIELDS and _BACKBONE_FAMILY read the registry when used, so a backbone registered later, or
shown by an overlay for one validation, is a model like the built-ins."""

from __future__ import annotations

import dataclasses

import pytest

from normlab import REGISTRY, Backbone
from normlab.loading import keep_only_plugins
from normlab.records import BUILTIN, FAMILY_TASK_FIELDS
from studies.backbones import BUILTIN_PRESETS, backbone_of, model_names
from studies.sizing import PRESET_FIELDS
from studies.sizing import backbone_of as sizing_backbone_of
from studies.spec.names import _BACKBONE_FAMILY, KNOWN_MODELS, MODEL_CONFIG_FIELDS

PLUGGED = Backbone(
    "plugged", "tabular", ("width", "norm", "norm_options"), {"plugged_xl": {"width": 9}}, source="p.py@1"
)


def _builtins() -> list[Backbone]:
    return [r for r in REGISTRY.backbones if r.source == BUILTIN]


@pytest.fixture(autouse=True)
def _builtins_only_afterwards():
    yield
    keep_only_plugins(())


def test_the_built_in_backbones_are_the_four_a_study_can_train_with_their_families():
    builtins = _builtins()
    assert {r.name: r.family for r in builtins} == {
        "vit_lite": "image",
        "encoder": "text",
        "tabular": "tabular",
        "mlp_classifier": "image",
    }
    assert list(KNOWN_MODELS) == [name for r in builtins for name in (r.name, *sorted(r.presets))]
    assert "residual_mlp" not in KNOWN_MODELS  # no task head: no study could train it


def test_each_built_in_record_states_its_config_dataclass_s_fields_and_models_presets():
    from models import PRESETS
    from models.build import MODELS

    for record in _builtins():
        config_cls, _ = MODELS[record.name]
        assert record.config_fields == tuple(f.name for f in dataclasses.fields(config_cls)), record.name
        own = {name: {k: v for k, v in fields.items() if k != "model"} for name, fields in PRESETS.items()}
        assert dict(record.presets) == {p: own[p] for p, f in PRESETS.items() if f["model"] == record.name}
        assert dict(record.presets) == BUILTIN_PRESETS[record.name]


def test_models_attaches_a_builder_to_each_built_in_record_and_every_preset_builds():
    import torch

    from models import build_model

    for record in _builtins():
        assert record.build is not None, record.name  # facts first, then models' code: one record
        for model in record.model_names():
            assert isinstance(build_model(model), torch.nn.Module), model


def test_the_family_task_fields_are_what_the_family_s_datasets_give_their_models():
    for family, fields in FAMILY_TASK_FIELDS.items():
        given = {k for d in REGISTRY.datasets if d.family == family for k in d.task_fields}
        assert given == set(fields), family
        for record in REGISTRY.backbones:
            if record.family == family:
                assert set(fields) <= set(record.config_fields), record.name


def test_a_model_name_or_preset_resolves_to_its_backbone_and_an_unknown_one_names_the_known():
    assert backbone_of("vit_lite_tiny") == sizing_backbone_of("vit_lite_tiny") == "vit_lite"
    assert backbone_of("mlp_classifier") == "mlp_classifier"
    with pytest.raises(
        ValueError, match="unknown model 'vit_lite_huge'; known models: vit_lite, vit_lite_paper"
    ):
        backbone_of("vit_lite_huge")


def test_a_backbone_registered_later_is_a_known_model_with_its_fields_family_and_presets():
    assert "plugged" not in KNOWN_MODELS
    REGISTRY.backbones.add(PLUGGED)
    assert list(KNOWN_MODELS)[-2:] == ["plugged", "plugged_xl"] == list(model_names())[-2:]
    assert "plugged_xl" in KNOWN_MODELS
    assert MODEL_CONFIG_FIELDS["plugged"] == ("width", "norm", "norm_options")
    assert _BACKBONE_FAMILY["plugged"] == "tabular"
    assert dict(PRESET_FIELDS["plugged_xl"]) == {"width": 9}
    assert backbone_of("plugged_xl") == "plugged"


def test_an_overlaid_backbone_is_known_inside_the_block_only():
    with REGISTRY.overlay([PLUGGED]):
        assert "plugged_xl" in KNOWN_MODELS and "plugged" in MODEL_CONFIG_FIELDS
    assert "plugged_xl" not in KNOWN_MODELS and "plugged" not in _BACKBONE_FAMILY

"""normlab.plugin.backbone: a plugin's builder registers as a Backbone record whose config fields are its
own, the norm's and its family's task fields; a preset sets its own fields only; a model name (a backbone
or a preset) builds one backbone, so a plugin may not take a built-in's."""

from __future__ import annotations

import pytest

import studies.backbones  # noqa: F401  (the built-in backbone records)
from normlab import REGISTRY, Backbone, RegistryError
from normlab.loading import keep_only_plugins
from normlab.plugin import backbone, registering_as
from normlab.records import FAMILY_TASK_FIELDS, from_facts, to_facts

SOURCE = "mine.py@12345678"


@pytest.fixture(autouse=True)
def _builtins_only_afterwards():
    yield
    keep_only_plugins(())


def _builder(config: dict) -> object:
    """Maps images to logits."""
    return config


def test_a_decorated_builder_registers_with_the_norm_and_task_fields_after_its_own():
    with registering_as(SOURCE):
        built = backbone(
            "mine", family="image", config_fields=("dim", "depth"), presets={"mine_big": {"dim": 9}}
        )(_builder)
    record = REGISTRY.backbones.get("mine")
    assert built is _builder and record.build is _builder
    assert record.config_fields == ("dim", "depth", "norm", "norm_options", *FAMILY_TASK_FIELDS["image"])
    assert record.presets == {"mine_big": {"dim": 9}}
    assert record.model_names() == ("mine", "mine_big")
    assert record.source == SOURCE and record.description == "Maps images to logits."
    assert REGISTRY.backbone_of("mine_big") is record
    assert record.parameters is None  # only the plugin's check measures it


def test_its_facts_travel_as_json_and_come_back_as_the_same_record_without_code():
    record = Backbone("mine", "text", ("dim", "norm"), {"mine_big": {"dim": 9}}, source=SOURCE, parameters=7)
    facts = to_facts(record)
    assert facts["config_fields"] == ["dim", "norm"] and facts["presets"] == {"mine_big": {"dim": 9}}
    assert from_facts("backbones", facts) == record


def test_a_preset_may_set_only_the_backbone_s_own_fields():
    with pytest.raises(ValueError, match=r"preset 'mine_big' sets \['heads'\]"):
        backbone("mine", family="image", config_fields=("dim",), presets={"mine_big": {"heads": 2}})


def test_an_unknown_family_is_refused():
    with pytest.raises(ValueError, match="family must be one of image, text, tabular"):
        backbone("mine", family="audio")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "presets"),
    [("vit_lite", {}), ("vit_lite_tiny", {}), ("mine", {"encoder_paper": {}})],
    ids=["a-built-in-backbone", "a-built-in-preset", "a-preset-named-as-a-built-in-preset"],
)
def test_a_model_name_a_built_in_has_is_refused(name, presets):
    with registering_as(SOURCE), pytest.raises(RegistryError, match="choose another name"):
        backbone(name, family="image", presets=presets)(_builder)
    assert {r.source for r in REGISTRY.backbones} == {"builtin"}

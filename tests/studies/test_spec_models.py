"""The spec's model names and config-field table agree with what `models` really builds.

studies.spec keeps names only (it must not import torch); these tests import models to keep them honest.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from pydantic import ValidationError

from studies.spec import (
    DATASET_TASK_FIELDS,
    KNOB_MODEL_FIELDS,
    KNOBS,
    KNOWN_MODELS,
    MODEL_CONFIG_FIELDS,
    StudySpec,
)

# Task fields of one tiny dataset per data family, as its DatasetBundle.model_fields gives them
# (digits, ptb_pos_sample, california_housing), with the example input a batch of two would have.
TINY_TASKS: dict[str, tuple[str, dict, torch.Tensor]] = {
    "vit_lite": (
        "digits",
        {"image_size": 8, "in_channels": 1, "num_classes": 10},
        torch.zeros(2, 1, 8, 8),  # (B, C, H, W)
    ),
    "encoder": (
        "ptb_pos_sample",
        {"vocab_size": 50, "max_len": 16, "num_classes": 44, "head": "token", "pad_id": 0},
        torch.ones(2, 16, dtype=torch.long),  # (B, T)
    ),
    "tabular": (
        "california_housing",
        {"num_features": 8, "num_outputs": 1},
        torch.zeros(2, 8),  # (B, F)
    ),
    "mlp_classifier": (
        "digits",
        {"image_size": 8, "in_channels": 1, "num_classes": 10},
        torch.zeros(2, 1, 8, 8),  # (B, C, H, W), flattened by the classifier's input projection
    ),
}
EXPECTED_OUTPUT = {"vit_lite": (2, 10), "encoder": (2, 16, 44), "tabular": (2, 1), "mlp_classifier": (2, 10)}


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)


def _backbone(model_name: str) -> str:
    return next(backbone for backbone in MODEL_CONFIG_FIELDS if model_name.startswith(backbone))


def test_the_config_field_table_equals_each_backbones_config_dataclass():
    from models import MODELS

    for backbone, names in MODEL_CONFIG_FIELDS.items():
        config_cls, _ = MODELS[backbone]
        assert set(names) == {f.name for f in dataclasses.fields(config_cls)}, backbone
        assert len(names) == len(set(names)), backbone


def test_every_task_field_the_datasets_decide_is_a_config_field_of_some_backbone():
    assert set(DATASET_TASK_FIELDS) <= set().union(*MODEL_CONFIG_FIELDS.values())


@pytest.mark.parametrize("model_name", KNOWN_MODELS)
def test_every_known_model_builds_and_has_a_task_head_for_a_matching_tiny_dataset(model_name):
    from models import build_model

    backbone = _backbone(model_name)
    dataset, task_fields, example = TINY_TASKS[backbone]
    # The spec accepts the model for that dataset ...
    assert StudySpec.model_validate(
        {"name": "m", "dataset": dataset, "model": model_name, "methods": ["dyt"]}
    )
    # ... and the model builds from those task fields and maps a batch to task outputs.
    model = build_model(model_name, task_fields).eval()
    with torch.no_grad():
        assert tuple(model(example).shape) == EXPECTED_OUTPUT[backbone]


def test_the_spec_refuses_every_model_that_the_study_datasets_cannot_train():
    from models import MODELS, PRESETS

    trainable_backbones = set(MODEL_CONFIG_FIELDS)
    unusable = {name for name in MODELS if name not in trainable_backbones}
    unusable |= {name for name, preset in PRESETS.items() if preset["model"] not in trainable_backbones}
    assert "residual_mlp" in unusable
    assert not unusable & set(KNOWN_MODELS)
    usable = (set(MODELS) | set(PRESETS)) - unusable
    assert usable == set(KNOWN_MODELS)


def test_a_model_override_that_a_searched_knob_also_sets_is_rejected_at_its_field_path():
    spec = {
        "name": "shadow",
        "dataset": "digits",
        "model": {"preset": "vit_lite_tiny", "overrides": {"mlp_ratio": 4.0}},
        "methods": ["frozen_ln"],
        "search": {"width_expansion": {"type": "choice", "values": [1.0, 4.0]}},
    }
    with pytest.raises(ValidationError) as raised:
        StudySpec.model_validate(spec)
    [error] = raised.value.errors()
    assert error["loc"] == ("model", "overrides", "mlp_ratio")
    assert "knob 'width_expansion'" in error["msg"]


def test_the_knob_to_model_field_table_matches_what_the_workers_apply():
    from workers.training.config import MODEL_KNOBS

    assert {k: v for k, v in MODEL_KNOBS.items() if k in KNOBS} == KNOB_MODEL_FIELDS


def test_a_knob_that_sets_a_field_the_model_lacks_is_rejected_at_its_path():
    # The residual-MLP classifier has no dropout, drop path or LayerScale: its trials would fail to build.
    spec = {
        "name": "rank",
        "dataset": "digits",
        "model": "mlp_classifier_tiny",
        "methods": ["frozen_ln"],
        "kind": "grid",
        "search": {"init_scale": {"type": "grid", "values": [1.0, 4.0]}, "dropout": 0.1},
    }
    with pytest.raises(ValidationError) as raised:
        StudySpec.model_validate(spec)
    [error] = raised.value.errors()
    assert error["loc"] == ("search", "dropout")
    assert "mlp_classifier does not have" in error["msg"]
    del spec["search"]["dropout"]
    assert StudySpec.model_validate(spec).model.backbone("digits") == "mlp_classifier"

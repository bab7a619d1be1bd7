"""A spec is validated against the dataset records the registry holds when it is validated: a dataset an
overlay shows (a plugin's, as facts) is known to every rule, by its own family, corruptions, default model
and task fields, and unknown again once the overlay ends."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from normlab import REGISTRY, Dataset
from studies.limits import StudyLimits
from studies.spec import validate_spec_data
from studies.spec.memory import worst_trial_memory

SQUARES = Dataset(
    "squares",
    "image",
    classes=4,
    corruptions=("brightness", "contrast"),
    default_model="vit_lite_tiny",
    task_fields={"image_size": 12, "in_channels": 1, "num_classes": 4},
    source="shapes_plugin.py",
)
REVIEWS = Dataset(
    "reviews",
    "text",
    task="sequence_classification",
    classes=2,
    task_fields={"vocab_size": 500, "max_len": 32, "head": "sequence", "num_classes": 2, "pad_id": 0},
    estimated="a vocabulary of at most 500 words",
    source="shapes_plugin.py",
)


def _spec(dataset: str, **changes: Any) -> dict[str, Any]:
    return {"name": "plugin data", "dataset": dataset, "methods": ["frozen_ln", "dyt"], **changes}


def _errors(data: dict[str, Any]) -> dict[tuple, dict]:
    with pytest.raises(ValidationError) as raised:
        validate_spec_data(data)
    return {tuple(e["loc"]): e for e in raised.value.errors()}


def test_a_dataset_is_known_while_the_registry_shows_it() -> None:
    assert _errors(_spec("squares"))[("dataset",)]["type"] == "unknown_dataset"
    with REGISTRY.overlay([SQUARES]):
        spec = validate_spec_data(_spec("squares"))
        assert spec.model.backbone("squares") == "vit_lite"
    assert _errors(_spec("squares"))[("dataset",)]["type"] == "unknown_dataset"


def test_the_rules_read_the_shown_datasets_family() -> None:
    with REGISTRY.overlay([SQUARES, REVIEWS]):
        mismatch = _errors(_spec("squares", model="encoder_tiny"))[("model", "preset")]
        assert mismatch["type"] == "model_dataset_mismatch" and "holds image data" in mismatch["msg"]
        image_only = _errors(_spec("reviews", search={"mixup": 0.5}))[("search", "mixup")]
        assert image_only["type"] == "image_only_knob" and "holds text data" in image_only["msg"]
        assert validate_spec_data(_spec("reviews")).model.backbone("reviews") == "encoder"


def test_the_data_options_read_the_shown_datasets_corruptions() -> None:
    with REGISTRY.overlay([SQUARES, REVIEWS]):
        spec = validate_spec_data(_spec("squares", data={"corruptions": ["contrast"]}))
        assert spec.data.corruptions == ["contrast"]
        unknown = _errors(_spec("squares", data={"corruptions": ["fog"]}))[("data", "corruptions", 0)]
        assert unknown["type"] == "unknown_corruption" and "brightness, contrast" in unknown["msg"]
        none = _errors(_spec("reviews", data={"severities": [2]}))[("data", "severities")]
        assert none["type"] == "no_corruption_sets" and none["msg"].endswith("cifar10_c_hendrycks, squares")


def test_the_memory_estimate_reads_the_shown_datasets_task_fields() -> None:
    with REGISTRY.overlay([SQUARES, REVIEWS]):
        squares = validate_spec_data(_spec("squares"), limits=StudyLimits())
        estimate = worst_trial_memory(squares, device="cpu")
        assert (estimate.backbone, estimate.fields["image_size"]) == ("vit_lite", 12)
        assert estimate.estimated is None
        reviews = validate_spec_data(_spec("reviews"), limits=StudyLimits())
        estimate = worst_trial_memory(reviews, device="cpu")
        assert estimate.fields["vocab_size"] == 500
        assert estimate.estimated == "a vocabulary of at most 500 words"

"""The spec's `data:` section (corruption eval sets) and the `augment` knob: valid forms and 422 paths."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from studies.spec import DATASET_CORRUPTIONS, KNOBS, DataOptions, StudySpec, validate_spec_data

BASE: dict[str, Any] = {
    "name": "corruptions",
    "dataset": "cifar10_c",
    "methods": ["frozen_ln", "dyt"],
    "budget": {"epochs": 12},
}


def _errors(**changes: Any) -> dict[tuple, str]:
    with pytest.raises(ValidationError) as raised:
        validate_spec_data({**BASE, **changes})
    return {tuple(error["loc"]): error["msg"] for error in raised.value.errors()}


def test_without_a_data_section_the_trials_get_the_dataset_defaults() -> None:
    spec = validate_spec_data(BASE)
    assert spec.data == DataOptions() and spec.data.trial_config() == {}


def test_chosen_corruptions_and_severities_reach_the_trial_config() -> None:
    spec = validate_spec_data(
        {
            **BASE,
            "dataset": "cifar10_c_hendrycks",
            "data": {"corruptions": ["fog", "snow"], "severities": [1, 5]},
        }
    )
    assert spec.data.trial_config() == {"corruptions": ["fog", "snow"], "severities": [1, 5]}
    only_severities = validate_spec_data({**BASE, "data": {"severities": [2]}})
    assert only_severities.data.trial_config() == {"severities": [2]}


def test_a_corruption_the_dataset_cannot_build_is_a_422_at_its_index() -> None:
    problems = _errors(data={"corruptions": ["contrast", "fog"]})  # fog: published CIFAR-10-C only
    assert list(problems) == [("data", "corruptions", 1)]
    assert "unknown corruption 'fog' for dataset 'cifar10_c'" in problems[("data", "corruptions", 1)]
    assert ", ".join(DATASET_CORRUPTIONS["cifar10_c"]) in problems[("data", "corruptions", 1)]


@pytest.mark.parametrize(
    "data, loc, message",
    [
        ({"severities": [0, 3]}, ("data", "severities", 0), "greater than or equal to 1"),
        ({"severities": [3, 6]}, ("data", "severities", 1), "less than or equal to 5"),
        ({"severities": [3, 3]}, ("data", "severities"), "unique"),
        ({"severities": []}, ("data", "severities"), "at least 1 item"),
        ({"corruptions": ["contrast", "contrast"]}, ("data", "corruptions"), "unique"),
        ({"corruptions": "contrast"}, ("data", "corruptions"), "valid array"),
        ({"corruption": ["contrast"]}, ("data", "corruption"), "Extra inputs"),
    ],
)
def test_malformed_data_options_are_422s_at_their_field(data: dict, loc: tuple, message: str) -> None:
    problems = _errors(data=data)
    assert loc in problems and message in problems[loc], problems


def test_data_options_on_a_dataset_without_corruption_sets_are_refused() -> None:
    problems = _errors(dataset="cifar10", data={"corruptions": ["contrast"], "severities": [2]})
    assert set(problems) == {("data", "corruptions"), ("data", "severities")}
    assert "dataset 'cifar10' has no corruption eval sets" in problems[("data", "corruptions")]


def test_augment_is_a_categorical_knob_of_every_method() -> None:
    knob = KNOBS["augment"]
    assert knob.kind == "categorical" and knob.methods is None
    spec = validate_spec_data(
        {**BASE, "search": {"augment": {"type": "choice", "values": ["crop_flip", "none"]}}}
    )
    assert spec.search_space_for("dyt")["augment"].values == ["crop_flip", "none"]
    problems = _errors(search={"augment": "cutout"})
    assert "one of none, crop_flip, randaugment, autoaugment" in problems[("search", "augment")]


@pytest.mark.parametrize(
    ("knob", "value"),
    [("augment", "crop_flip"), ("mixup", 0.8), ("cutmix", {"type": "uniform", "low": 0, "high": 1})],
)
def test_image_only_knobs_on_text_or_tabular_data_are_refused_at_their_field(
    knob: str, value: object
) -> None:
    for dataset in ("rotten_tomatoes_vader", "california_housing"):
        with pytest.raises(ValidationError) as caught:
            StudySpec.model_validate(
                {"name": "x", "dataset": dataset, "methods": ["frozen_ln"], "search": {knob: value}}
            )
        errors = caught.value.errors()
        assert [e["loc"] for e in errors] == [("search", knob)] and errors[0]["type"] == "image_only_knob"


def test_image_only_knobs_switched_off_are_fine_anywhere() -> None:
    spec = StudySpec.model_validate(
        {"name": "x", "dataset": "california_housing", "methods": ["frozen_ln"],
         "search": {"augment": "none", "mixup": 0.0}},
    )  # fmt: skip
    assert spec.search["augment"].value == "none"

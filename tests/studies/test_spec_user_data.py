"""A dataset from the user's files as a spec declares it (studies.spec.user_data.UserDataset): the defaults
its format and task give, each refusal at its own field, and the registry record it becomes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from normlab.records import Dataset
from normlab.registry import REGISTRY
from studies.spec.names import KNOWN_MODELS
from studies.spec.user_data import DEFAULT_COLUMNS, UserDataset


def _errors(data: dict[str, Any]) -> dict[tuple[Any, ...], str]:
    with pytest.raises(ValidationError) as caught:
        UserDataset.model_validate(data)
    return {tuple(error["loc"]): error["msg"] for error in caught.value.errors()}


IMAGES = {"name": "my_scans", "path": "/mnt/shared/scans.npz", "task": "image_classification"}
TABLE = {"name": "my_sales", "path": "/mnt/shared/sales.parquet", "task": "tabular_regression"}
TOKENS = {"name": "my_tags", "path": "/mnt/shared/tags", "format": "hf_disk", "task": "token_classification"}


@pytest.fixture
def registered() -> Iterator[Dataset]:
    record = REGISTRY.datasets.add(Dataset("taken_by_a_plugin", "image", source="test:plugin"))
    yield record
    REGISTRY.datasets.remove_source("test:plugin")


def test_the_format_and_task_fill_in_the_keys_the_metric_and_the_sequence_length():
    images = UserDataset.model_validate(IMAGES)
    assert (images.format, images.x, images.y, images.metric) == ("npz", "x", "y", "accuracy")
    assert images.max_len is None and images.splits == "carve" and images.carved_test_fraction == 0.1
    table = UserDataset.model_validate(TABLE)
    assert (table.format, table.x, table.y, table.metric, table.features) == (
        "parquet",
        None,
        "target",
        "rmse",
        None,
    )
    tokens = UserDataset.model_validate(TOKENS)
    assert (tokens.x, tokens.y, tokens.max_len) == ("tokens", "tags", 128)
    split_by_column = UserDataset.model_validate({**TABLE, "splits": "from_file"})
    assert split_by_column.split_column == "split"
    hf_images = UserDataset.model_validate({**IMAGES, "path": "/mnt/shared/scans", "format": "hf_disk"})
    assert (hf_images.x, hf_images.y) == DEFAULT_COLUMNS[("hf_disk", "image_classification")]


def test_a_stored_declaration_validates_to_itself():
    for data in (IMAGES, TABLE, TOKENS, {**TABLE, "splits": "from_file", "seed": 3}):
        declared = UserDataset.model_validate(data)
        assert UserDataset.model_validate(declared.model_dump()) == declared
        assert UserDataset.model_validate_json(declared.model_dump_json()) == declared


def test_the_name_is_an_identifier_that_no_registered_dataset_has(registered):
    assert _errors({**IMAGES, "name": "My Scans"})[("name",)].startswith(
        "name must be lowercase letters, digits and underscores"
    )
    assert _errors({**IMAGES, "name": "digits"}) == {
        ("name",): "dataset name 'digits' is taken by a registered dataset (builtin); choose another name"
    }
    assert (
        "taken by a registered dataset (test:plugin)"
        in _errors({**IMAGES, "name": registered.name})[("name",)]
    )


def test_its_own_registered_record_is_no_clash():
    declared = UserDataset.model_validate(IMAGES)
    REGISTRY.datasets.add(declared.record())
    try:
        assert UserDataset.model_validate(IMAGES) == declared
        other_file = _errors({**IMAGES, "path": "/mnt/shared/other.npz"})
        assert "taken by a registered dataset (user_files:/mnt/shared/scans.npz)" in other_file[("name",)]
    finally:
        REGISTRY.datasets.remove_source(declared.source)


def test_the_path_is_absolute_and_the_format_known():
    errors = _errors({**IMAGES, "path": "data/scans.npz"})
    assert errors[("path",)].startswith("path must be absolute: every node reads the file from the cluster's")
    assert _errors({**IMAGES, "path": "/mnt/shared/scans"}) == {
        ("format",): "format is needed: the path's suffix does not say it; set format to npz, parquet or "
        "hf_disk (a directory written by save_to_disk)"
    }
    assert ("format",) in _errors({**IMAGES, "format": "csv"})


def test_every_inconsistency_is_reported_at_its_own_field():
    errors = _errors(
        {
            **TABLE,
            "path": "/mnt/shared/pixels.parquet",
            "task": "image_classification",
            "metric": "rmse",
            "max_len": 64,
            "split_column": "part",
        }
    )
    assert set(errors) == {("format",), ("metric",), ("max_len",), ("split_column",)}
    assert errors[("format",)].startswith(
        "parquet does not hold image_classification data here: store images"
    )
    assert (
        errors[("metric",)]
        == "metric 'rmse' does not fit image_classification: use accuracy (or leave metric out)"
    )
    assert errors[("max_len",)].startswith("max_len is the padded length of token sequences")

    table = _errors(
        {**TABLE, "x": "inputs", "features": ["a", "target"], "splits": "from_file", "test_fraction": 0.2}
    )
    assert set(table) == {("x",), ("features",), ("test_fraction",)}
    assert table[("features",)] == "features lists the target column 'target'"
    assert table[("test_fraction",)] == (
        "the file's own test split is the test set: remove test_fraction, or set splits: carve"
    )
    assert (
        _errors({**IMAGES, "metric": "f1"})[("metric",)]
        == "unknown metric 'f1': use accuracy (or leave metric out)"
    )
    assert _errors({**IMAGES, "features": ["a"]})[("features",)].startswith(
        "features names the feature columns"
    )
    assert _errors({**IMAGES, "val_fraction": 0.6, "test_fraction": 0.4})[("test_fraction",)].startswith(
        "val_fraction (0.6) and test_fraction (0.4) leave nothing to train on"
    )
    assert ("val_fraction",) in _errors({**IMAGES, "val_fraction": 0})
    assert ("seed",) in _errors({**IMAGES, "seed": -1})
    assert ("extra",) in _errors({**IMAGES, "extra": 1})


def test_inside_a_spec_the_errors_keep_their_path():
    class Holder(BaseModel):
        user_datasets: list[UserDataset]

    with pytest.raises(ValidationError) as caught:
        Holder.model_validate({"user_datasets": [IMAGES, {**IMAGES, "name": "digits", "metric": "rmse"}]})
    assert {tuple(e["loc"]) for e in caught.value.errors()} == {
        ("user_datasets", 1, "name"),
        ("user_datasets", 1, "metric"),
    }


def test_the_record_without_facts_states_what_the_declaration_says():
    record = UserDataset.model_validate(TABLE).record()
    assert record == Dataset(
        "my_sales",
        "tabular",
        metric="rmse",
        higher_is_better=False,
        task="regression",
        default_model="tabular_tiny",
        description="tabular_regression data from the user's files at /mnt/shared/sales.parquet (parquet)",
        source="user_files:/mnt/shared/sales.parquet",
    )
    assert record.build is None


def test_the_record_with_facts_sizes_the_model():
    images = UserDataset.model_validate({**IMAGES, "description": "scans"}).record(
        {
            "task": "image_classification",
            "examples": {"train": 80, "val": 10, "test": 10},
            "classes": 3,
            "image_side": 16,
            "channels": 1,
        }
    )
    assert (images.family, images.metric, images.higher_is_better, images.classes) == (
        "image",
        "accuracy",
        True,
        3,
    )
    assert (images.train_examples, images.image_side, images.description) == (80, 16, "scans")
    assert images.task_fields == {"image_size": 16, "in_channels": 1, "num_classes": 3}
    table = UserDataset.model_validate(TABLE).record({"examples": {"train": 8}, "features": 5})
    assert table.task_fields == {"num_features": 5, "num_outputs": 1} and table.classes is None
    facts = {"examples": {"train": 8}, "vocab_size": 40, "tags": 7, "vocabulary_exact": False}
    tokens = UserDataset.model_validate({**TOKENS, "max_len": 32}).record(facts)
    assert (tokens.family, tokens.task, tokens.classes) == ("text", "token_classification", None)
    assert tokens.task_fields == {
        "vocab_size": 40,
        "max_len": 32,
        "num_classes": 7,
        "head": "token",
        "pad_id": 0,
    }
    assert tokens.estimated is not None and "at most 40 words" in tokens.estimated
    exact = UserDataset.model_validate(TOKENS).record({**facts, "vocabulary_exact": True})
    assert exact.estimated is None
    with pytest.raises(ValueError, match="the facts are of regression data"):
        UserDataset.model_validate(IMAGES).record({"task": "regression", "features": 3})


def test_each_family_trains_a_known_model():
    defaults = {UserDataset.model_validate(d).record().default_model for d in (IMAGES, TABLE, TOKENS)}
    assert defaults == {"vit_lite_tiny", "tabular_tiny", "encoder_tiny"}
    assert defaults <= set(KNOWN_MODELS)


def test_the_declaration_needs_no_torch():
    code = "import sys, studies.spec.user_data; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)

"""Coded dataset plugins (normlab.plugin.dataset): a builder returns a normlab.arrays.ArrayDataset and
get_dataset builds it by name, through the same code as a dataset from the user's files."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from normlab.arrays import ArrayDataset
from normlab.loading import import_plugin, read_plugin
from normlab.plugin import dataset, registering_as
from normlab.registry import REGISTRY
from studies.datasets import default_model
from workers.data import IGNORE_INDEX, get_dataset
from workers.data.arrays import UserDataError

ROOT = Path(__file__).resolve().parents[3]
SOURCE = "test:plugin_datasets"


@pytest.fixture
def toy(tmp_path: Path) -> Iterator[str]:
    """examples/plugins/toy_dataset.py, imported as a study imports a plugin; forgotten afterwards."""
    source = read_plugin(str(ROOT / "examples" / "plugins" / "toy_dataset.py"))
    import_plugin(source, root=tmp_path)
    yield source.label  # the source its records name
    REGISTRY.datasets.remove_source(source.label)
    sys.modules.pop(source.package, None)


@pytest.fixture
def registering() -> Iterator[None]:
    """Datasets registered within the test name SOURCE, and are removed after it."""
    with registering_as(SOURCE):
        yield
    REGISTRY.datasets.remove_source(SOURCE)


def test_the_example_plugin_builds_by_name(toy):
    record = REGISTRY.datasets.get("toy_stripes")
    assert record.source == toy and record.family == "image" and record.build is not None
    bundle = get_dataset("toy_stripes", split_seed=0)
    assert bundle.sizes() == {"train": 320, "val": 40, "test": 40}
    assert bundle.train.tensors[0].shape == (320, 1, 8, 8)
    assert bundle.model_fields == dict(record.task_fields)
    assert (bundle.task, bundle.metric, bundle.higher_is_better, bundle.default_model) == (
        "image_classification",
        "accuracy",
        True,
        "vit_lite_tiny",
    )
    assert bundle.source == f"plugin:{toy}" and bundle.split_seed == 0
    assert set(bundle.train.tensors[1].tolist()) == {0, 1}
    assert get_dataset("toy_stripes", split_seed=0) is bundle
    other = get_dataset("toy_stripes", split_seed=1)
    assert not np.array_equal(other.split_indices["test"], bundle.split_indices["test"])


def test_a_tabular_plugin_with_its_own_splits_is_standardised_on_train(registering):
    rng = np.random.default_rng(0)
    x = rng.normal(3.0, 2.0, size=(50, 4))
    y = x.sum(axis=1) * 10

    @dataset("plugin_table", family="tabular", task="regression", metric="rmse", higher_is_better=False)
    def build(split_seed: int) -> ArrayDataset:
        return ArrayDataset(
            "regression", train=(x[:30], y[:30]), val=(x[30:40], y[30:40]), test=(x[40:], y[40:])
        )

    bundle = get_dataset("plugin_table")
    assert bundle.sizes() == {"train": 30, "val": 10, "test": 10}
    assert bundle.pools == {"train": "train", "val": "val", "test": "test"}
    assert bundle.model_fields == {"num_features": 4, "num_outputs": 1}
    assert bundle.higher_is_better is False
    # No default model registered: its family's backbone, the model spec validation assumes too.
    assert bundle.default_model == default_model("plugin_table") == "tabular"
    assert torch.allclose(bundle.train.tensors[0].mean(dim=0), torch.zeros(4), atol=1e-5)
    assert bundle.target_std == pytest.approx(float(y[:30].std()))


def test_a_token_plugin_with_tag_ids_and_names(registering):
    sentences = [["a", "b", "c"], ["b", "c"], ["c", "a", "b", "a"]] * 10
    tags = [[i % 2 for i in range(len(s))] for s in sentences]

    @dataset("plugin_tags", family="text", task="token_classification", default_model="encoder_tiny")
    def build(split_seed: int) -> ArrayDataset:
        return ArrayDataset(
            "token_classification", train=(sentences, tags), class_names=("X", "Y"), max_len=5
        )

    bundle = get_dataset("plugin_tags")
    assert bundle.class_names == ("X", "Y")
    assert bundle.train.tensors[0].shape == (24, 5)
    assert bundle.model_fields["num_classes"] == 2 and bundle.model_fields["head"] == "token"
    assert (bundle.train.tensors[1] == IGNORE_INDEX).any()


def test_a_builder_that_disagrees_with_its_record_is_refused(registering):
    @dataset("plugin_misnamed", family="tabular")  # task and metric left at image classification's
    def build(split_seed: int) -> ArrayDataset:
        return ArrayDataset("regression", train=(np.ones((20, 2)), np.arange(20.0)))

    with pytest.raises(UserDataError) as caught:
        get_dataset("plugin_misnamed")
    assert str(caught.value) == (
        f"dataset 'plugin_misnamed' ({SOURCE}) is registered with task 'image_classification' but its data is "
        "for 'regression': register it with task='regression', metric='rmse'"
    )


def test_bad_arrays_from_a_builder_name_the_field(registering):
    @dataset("plugin_nan", family="tabular", task="regression", metric="rmse", higher_is_better=False)
    def build(split_seed: int) -> ArrayDataset:
        x = np.ones((20, 2))
        x[3, 1] = np.nan
        return ArrayDataset("regression", train=(x, np.arange(20.0)))

    with pytest.raises(UserDataError, match=r"the train inputs \(train\[0\]\) of dataset 'plugin_nan'"):
        get_dataset("plugin_nan")


def test_a_record_without_classes_gets_the_class_count_of_its_record(registering):
    @dataset("plugin_classes", family="image", classes=5)
    def build(split_seed: int) -> ArrayDataset:
        return ArrayDataset("image_classification", train=(np.zeros((30, 4, 4), np.uint8), np.arange(30) % 2))

    assert get_dataset("plugin_classes").model_fields["num_classes"] == 5


def test_a_builder_must_return_arrays(registering):
    @dataset("plugin_wrong", family="image")
    def build(split_seed: int) -> dict:
        return {"x": []}

    with pytest.raises(TypeError, match=r"must return a normlab\.arrays\.ArrayDataset"):
        get_dataset("plugin_wrong")


def test_a_record_registered_again_is_built_afresh(registering):
    def builder(offset: int):
        def build(split_seed: int) -> ArrayDataset:
            return ArrayDataset(
                "image_classification", train=(np.zeros((20, 4, 4), np.uint8), np.arange(20) % (2 + offset))
            )

        return build

    dataset("plugin_again", family="image")(builder(0))
    first = get_dataset("plugin_again")
    REGISTRY.datasets.remove_source(SOURCE)
    dataset("plugin_again", family="image")(builder(1))
    assert get_dataset("plugin_again").model_fields["num_classes"] == 3 != first.model_fields["num_classes"]


def test_unknown_names_and_corruptions_are_still_refused(registering):
    with pytest.raises(KeyError, match="unknown dataset 'no_such_dataset'; registered: "):
        get_dataset("no_such_dataset")

    @dataset("plugin_plain", family="image")
    def build(split_seed: int) -> ArrayDataset:
        return ArrayDataset("image_classification", train=(np.zeros((20, 4, 4), np.uint8), np.arange(20) % 2))

    with pytest.raises(ValueError, match="'plugin_plain' has no corruption eval sets"):
        get_dataset("plugin_plain", corruptions=["brightness"])

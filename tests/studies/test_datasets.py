"""studies.datasets: one normlab Dataset record per built-in dataset, stating each fact once and consistently;
the lookups and the tables callers import read the registry when asked, so a dataset registered later, or
shown by an overlay (a plugin's, as facts), is known everywhere the built-ins are."""

from __future__ import annotations

import pytest

from normlab import REGISTRY, Dataset, UnknownName
from studies.catalog.datasets import DATASET_CLASSES as CATALOG_CLASSES
from studies.datasets import (
    DATASET_CLASSES,
    DATASET_CORRUPTIONS,
    DATASET_METRICS,
    DATASET_NOTES,
    FAMILY_BACKBONE,
    KNOWN_DATASETS,
    LICENSED_PAPER_DATASETS,
    METRIC_HIGHER_IS_BETTER,
    OWN_CORRUPTIONS,
    PUBLISHED_CORRUPTIONS,
    STAND_IN_DESCRIPTIONS,
    STAND_IN_FOR,
    corruption_datasets,
    dataset_corruptions,
    dataset_family,
    dataset_metric,
    dataset_names,
    dataset_record,
    default_model,
    stand_in_note,
)
from studies.spec.metrics import METRIC_DIRECTIONS, UnknownMetricError, higher_is_better
from studies.spec.names import _DATASET_FAMILY

BUILTIN = REGISTRY.datasets.builtin_names()
RECORDS = [dataset_record(name) for name in BUILTIN]
TOY = Dataset(
    "toy_noise",
    "image",
    classes=3,
    corruptions=("gaussian_noise",),
    stand_in_for="cifar10_c_hendrycks",
    stand_in_description="three classes of coloured noise.",
    task_fields={"image_size": 16, "in_channels": 3, "num_classes": 3},
    source="toy_plugin.py",
)


def test_the_builtin_datasets_are_the_twenty_the_api_lists_in_order() -> None:
    assert BUILTIN[:6] == ("mnist", "fashion_mnist", "svhn", "cifar10", "cifar100", "cifar10_c")
    assert len(BUILTIN) == 20 and BUILTIN[-1] == "ptb_wsj_pos"
    assert all(record.source == "builtin" for record in RECORDS)


@pytest.mark.parametrize("record", RECORDS, ids=BUILTIN)
def test_each_record_states_its_direction_by_its_metric(record: Dataset) -> None:
    assert record.higher_is_better == METRIC_HIGHER_IS_BETTER[record.metric]
    expected = {"language_modeling": "perplexity", "regression": "rmse"}.get(record.task, "accuracy")
    assert record.metric == expected


@pytest.mark.parametrize("record", RECORDS, ids=BUILTIN)
def test_each_records_task_fields_agree_with_its_other_facts(record: Dataset) -> None:
    fields = record.task_fields
    if record.family == "image":
        assert record.task == "image_classification"
        assert fields["num_classes"] == record.classes
    if record.task == "sequence_classification":
        assert fields["num_classes"] == record.classes
    if record.image_side is not None:  # the cost model's geometry is the built images'
        assert record.image_side == fields["image_size"]
    assert (record.train_examples is None) == (record.image_side is None)
    # a fitted vocabulary is an estimate until built, and the memory figure says so
    assert (record.estimated is not None) == ("vocab_size" in fields)
    assert record.corruptions in ((), OWN_CORRUPTIONS, PUBLISHED_CORRUPTIONS)


@pytest.mark.parametrize("record", RECORDS, ids=BUILTIN)
def test_a_stand_in_names_a_paper_dataset_like_it_and_says_what_it_is(record: Dataset) -> None:
    if record.stand_in_for is None:
        assert record.stand_in_description is None and stand_in_note(record.name) is None
        return
    paper = dataset_record(record.stand_in_for)
    assert paper.stand_in_for is None
    assert (paper.family, paper.metric) == (record.family, record.metric)
    note = stand_in_note(record.name)
    assert note is not None and note.startswith(f"stand-in for {paper.name}")
    assert note.endswith(f": {record.stand_in_description}")


def test_a_licensed_paper_datasets_stand_ins_name_its_licence() -> None:
    assert "LDC99T42" in LICENSED_PAPER_DATASETS["ptb_wsj_pos"]
    note = stand_in_note("ptb_pos_sample")
    assert note is not None and f"ptb_wsj_pos ({LICENSED_PAPER_DATASETS['ptb_wsj_pos']})" in note


def test_the_default_model_is_the_records_or_its_familys_backbone() -> None:
    assert default_model("digits") == "vit_lite_tiny" and default_model("sst2") == "encoder_paper"
    with REGISTRY.overlay([TOY]):
        assert TOY.default_model is None and default_model("toy_noise") == FAMILY_BACKBONE["image"]


def test_the_lookups_read_the_registry_when_called() -> None:
    assert "toy_noise" not in dataset_names()
    with pytest.raises(UnknownName, match="unknown dataset 'toy_noise'; choose one of mnist"):
        dataset_family("toy_noise")
    with REGISTRY.overlay([TOY]):
        assert dataset_names()[-1] == "toy_noise"
        assert dataset_family("toy_noise") == "image" and dataset_metric("toy_noise") == "accuracy"
        assert dataset_corruptions("toy_noise") == ("gaussian_noise",)
        assert corruption_datasets()[-1] == "toy_noise"
    assert dataset_corruptions("cifar10") == ()
    assert corruption_datasets() == ("cifar10_c", "digits_c", "fashion_mnist_c", "cifar10_c_hendrycks")


def test_the_old_tables_are_views_of_the_records() -> None:
    assert tuple(KNOWN_DATASETS) == BUILTIN
    for record in RECORDS:
        assert DATASET_METRICS[record.name] == (record.metric, record.higher_is_better)
        assert DATASET_CLASSES.get(record.name) == CATALOG_CLASSES.get(record.name) == record.classes
        assert DATASET_CORRUPTIONS.get(record.name, ()) == record.corruptions
        assert STAND_IN_FOR.get(record.name) == record.stand_in_for
        assert STAND_IN_DESCRIPTIONS.get(record.name) == record.stand_in_description
        assert DATASET_NOTES.get(record.name) == stand_in_note(record.name)
        assert _DATASET_FAMILY[record.name] == record.family
    assert set(STAND_IN_FOR) == {r.name for r in RECORDS if r.stand_in_for is not None}


def test_a_dataset_an_overlay_shows_is_in_every_view_and_has_metric_directions() -> None:
    with REGISTRY.overlay([TOY]):
        assert "toy_noise" in KNOWN_DATASETS and KNOWN_DATASETS[-1] == "toy_noise"
        assert DATASET_METRICS["toy_noise"] == ("accuracy", True)
        assert DATASET_CLASSES["toy_noise"] == 3 and _DATASET_FAMILY["toy_noise"] == "image"
        assert DATASET_CORRUPTIONS["toy_noise"] == ("gaussian_noise",)
        assert DATASET_NOTES["toy_noise"] == f"stand-in for cifar10_c_hendrycks: {TOY.stand_in_description}"
        assert higher_is_better("toy_noise", "test_accuracy_gaussian_noise_s5")
        assert ("toy_noise", "val_accuracy") in METRIC_DIRECTIONS
    assert "toy_noise" not in KNOWN_DATASETS and "toy_noise" not in _DATASET_FAMILY
    assert ("toy_noise", "val_accuracy") not in METRIC_DIRECTIONS
    with pytest.raises(UnknownMetricError, match="unknown dataset 'toy_noise'"):
        higher_is_better("toy_noise", "accuracy")

"""The data registry builds every built-in dataset record of studies.datasets, and nothing else; each entry
reads its facts from its record; every record's default model is a model preset that reads its data; each
corruption source implements the corruption names its records give. studies.datasets owns what a dataset
is; the catalog adds how to fetch and build it."""

from __future__ import annotations

import pytest

from models import PRESETS
from normlab import REGISTRY as RECORDS
from studies.datasets import (
    METRIC_HIGHER_IS_BETTER,
    OWN_CORRUPTIONS,
    PUBLISHED_CORRUPTIONS,
    dataset_record,
    stand_in_note,
)
from studies.spec.names import _BACKBONE_FAMILY, KNOWN_MODELS
from workers.data import builders
from workers.data.catalog import CORRUPTION_SOURCES, DATASETS, REGISTRY
from workers.data.corruptions import CORRUPTIONS

BUILTIN = RECORDS.datasets.builtin_names()


def test_every_builtin_record_has_a_builder_and_every_builder_a_builtin_record() -> None:
    assert set(REGISTRY) == set(BUILTIN)


@pytest.mark.parametrize("name", BUILTIN)
def test_each_records_default_model_is_a_preset_of_its_data_family(name: str) -> None:
    record = dataset_record(name)
    assert record.default_model in PRESETS
    assert record.default_model in KNOWN_MODELS  # a spec may name it too
    backbone = PRESETS[record.default_model]["model"]
    assert _BACKBONE_FAMILY[backbone] == record.family
    assert REGISTRY[name].default_model == record.default_model  # the bundle's, so the trial's default


def test_each_registry_entry_reads_its_facts_from_its_record() -> None:
    for name, info in DATASETS.items():
        record = dataset_record(name)
        assert (info.task, info.metric, info.higher_is_better) == (
            record.task,
            record.metric,
            record.higher_is_better,
        ), name
        assert info.higher_is_better == METRIC_HIGHER_IS_BETTER[info.metric], name
        assert info.stand_in_for == record.stand_in_for, name
        assert info.stand_in_note == stand_in_note(name), name
        if record.stand_in_for is not None:
            assert info.description == record.stand_in_description, name


def test_every_builder_that_needs_a_class_count_gets_the_one_its_record_declares() -> None:
    needs_classes = {builders.build_image, builders.build_sequence_classification}
    for name, entry in REGISTRY.items():
        builder = getattr(entry.build, "func", entry.build)
        classes = dataset_record(name).classes
        assert (builder in needs_classes) == (classes is not None), name
        if classes is not None:
            assert getattr(entry.build, "keywords", {}).get("num_classes") == classes, name


def test_each_corruption_dataset_builds_from_a_source_that_implements_its_names() -> None:
    sources = {name: entry.corruption_source for name, entry in REGISTRY.items() if entry.corruption_source}
    assert set(sources) == {name for name in BUILTIN if dataset_record(name).corruptions}
    for name, source in sources.items():
        assert CORRUPTION_SOURCES[source] == dataset_record(name).corruptions, name
    # our numpy corruptions implement exactly the eight names; the published arrays are read by name
    assert tuple(CORRUPTIONS) == OWN_CORRUPTIONS
    # our eight are a subset of the published nineteen, under the same names
    assert set(OWN_CORRUPTIONS) < set(PUBLISHED_CORRUPTIONS) and len(PUBLISHED_CORRUPTIONS) == 19

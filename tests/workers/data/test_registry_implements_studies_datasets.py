"""The data registry builds every dataset studies.datasets names, and each of its corruption sources
implements the corruption names studies gives it. studies.datasets owns what a dataset is (name, metric,
class count, stand-in relation and note); the registry reads those facts and adds how to build it."""

from __future__ import annotations

from studies.datasets import (
    DATASET_CLASSES,
    DATASET_CORRUPTIONS,
    DATASET_METRICS,
    DATASET_NOTES,
    KNOWN_DATASETS,
    OWN_CORRUPTIONS,
    PUBLISHED_CORRUPTIONS,
    STAND_IN_FOR,
)
from workers.data import builders
from workers.data.catalog import CORRUPTION_SOURCES, DATASETS, REGISTRY
from workers.data.corruptions import CORRUPTIONS


def test_the_registry_builds_exactly_the_datasets_studies_knows() -> None:
    assert sorted(REGISTRY) == sorted(KNOWN_DATASETS)


def test_each_registry_entry_reads_its_facts_from_studies() -> None:
    for name, info in DATASETS.items():
        assert (info.metric, info.higher_is_better) == DATASET_METRICS[name], name
        assert info.stand_in_for == STAND_IN_FOR.get(name), name
        assert info.stand_in_note == DATASET_NOTES.get(name), name


def test_every_builder_that_needs_a_class_count_gets_the_one_studies_declares() -> None:
    needs_classes = {builders.build_image, builders.build_sequence_classification}
    for name, entry in REGISTRY.items():
        builder = getattr(entry.build, "func", entry.build)
        assert (builder in needs_classes) == (name in DATASET_CLASSES), name
        if name in DATASET_CLASSES:
            assert getattr(entry.build, "keywords", {}).get("num_classes") == DATASET_CLASSES[name], name


def test_each_corruption_dataset_builds_from_a_source_that_implements_its_names() -> None:
    sources = {name: entry.corruption_source for name, entry in REGISTRY.items() if entry.corruption_source}
    assert set(sources) == set(DATASET_CORRUPTIONS)
    for name, source in sources.items():
        assert CORRUPTION_SOURCES[source] == DATASET_CORRUPTIONS[name], name
    # our numpy corruptions implement exactly the eight names; the published arrays are read by name
    assert tuple(CORRUPTIONS) == OWN_CORRUPTIONS
    # our eight are a subset of the published nineteen, under the same names
    assert set(OWN_CORRUPTIONS) < set(PUBLISHED_CORRUPTIONS) and len(PUBLISHED_CORRUPTIONS) == 19

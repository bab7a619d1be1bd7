"""The spec's dataset names and metrics agree with the workers' dataset registry."""

from __future__ import annotations

from studies.spec import DATASET_METRICS, KNOWN_DATASETS


def test_known_datasets_are_exactly_the_registry_datasets():
    from workers.data import DATASETS

    assert set(KNOWN_DATASETS) == set(DATASETS)


def test_each_dataset_metric_and_direction_match_the_registry():
    from workers.data import DATASETS

    for name, info in DATASETS.items():
        assert DATASET_METRICS[name] == (info.metric, info.higher_is_better), name

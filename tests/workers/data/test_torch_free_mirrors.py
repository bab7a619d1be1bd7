"""The torch-free copies the service reads (studies.spec, studies.tables) say what the registry says."""

from __future__ import annotations

from studies.spec import DATASET_CORRUPTIONS as SPEC_CORRUPTIONS
from studies.tables.dataset_notes import DATASET_NOTES
from workers.data import DATASETS
from workers.data.corruptions import CORRUPTIONS
from workers.data.registry import DATASET_CORRUPTIONS
from workers.data.sources.hendrycks import HENDRYCKS_CORRUPTIONS


def test_spec_corruption_names_per_dataset_equal_the_registry() -> None:
    assert SPEC_CORRUPTIONS == DATASET_CORRUPTIONS
    assert set(DATASET_CORRUPTIONS) == {"cifar10_c", "fashion_mnist_c", "digits_c", "cifar10_c_hendrycks"}
    assert DATASET_CORRUPTIONS["cifar10_c"] == tuple(CORRUPTIONS)
    assert DATASET_CORRUPTIONS["cifar10_c_hendrycks"] == HENDRYCKS_CORRUPTIONS
    # our eight are a subset of the published nineteen, under the same names
    assert set(CORRUPTIONS) < set(HENDRYCKS_CORRUPTIONS) and len(HENDRYCKS_CORRUPTIONS) == 19


def test_results_notes_equal_the_registry_stand_in_notes() -> None:
    notes = {name: info.stand_in_note for name, info in DATASETS.items() if info.stand_in_note}
    assert notes == DATASET_NOTES

"""What a results header says about each stand-in dataset: the paper dataset it replaces and what it is.

The notes are studies.datasets' (the data registry's stand_in_note reads the same table), so the service
labels results without importing torch. Datasets that are the paper's own have no entry.
"""

from __future__ import annotations

from studies.datasets import DATASET_NOTES

__all__ = ["DATASET_NOTES", "dataset_note"]


def dataset_note(dataset: str) -> str | None:
    """`stand-in for <paper dataset>: <what it is>` for a stand-in dataset; None for the paper's own data."""
    return DATASET_NOTES.get(dataset)

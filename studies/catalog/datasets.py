"""How a study's dataset compares with the paper's: from the stand-in relation of studies.datasets, which
the data registry (workers.data) reads too, so the service needs no torch to say it."""

from __future__ import annotations

from dataclasses import dataclass

from studies.datasets import DATASET_CLASSES, STAND_IN_FOR

# The two tables are studies.datasets'; re-exported because claims and their tests have always read them here.
__all__ = [
    "DATASET_CLASSES",
    "STAND_IN_FOR",
    "DatasetComparability",
    "dataset_comparability",
    "unclaimed_comparability",
]


@dataclass(frozen=True)
class DatasetComparability:
    """How a study's dataset relates to the dataset behind the paper's numbers."""

    dataset: str  # what the study ran on
    paper_dataset: str | None  # what the paper's numbers come from (None: no dataset-specific numbers)
    stand_in_for: str | None  # what `dataset` stands in for (studies.datasets.STAND_IN_FOR), if anything
    comparable: bool  # whether the paper's numbers can be set against the measured ones
    note: str

    @property
    def is_stand_in(self) -> bool:
        return self.stand_in_for is not None


def dataset_comparability(dataset: str, paper_dataset: str | None) -> DatasetComparability:
    stand_in = STAND_IN_FOR.get(dataset)
    if paper_dataset is None:
        note = f"measured on {dataset}; the paper's claim holds at initialisation on any input"
        return DatasetComparability(dataset, None, stand_in, True, note)
    if dataset == paper_dataset:
        return DatasetComparability(
            dataset, paper_dataset, stand_in, True, f"measured on the paper's dataset ({dataset})"
        )
    if stand_in is not None:
        relation = f"a stand-in for {stand_in}" + (
            "" if stand_in == paper_dataset else f", not for {paper_dataset}"
        )
        note = f"measured on {dataset} ({relation}): the paper's {paper_dataset} numbers are not comparable"
    else:
        note = (
            f"measured on {dataset}, not the paper's {paper_dataset}: the paper's numbers are not comparable"
        )
    return DatasetComparability(dataset, paper_dataset, stand_in, False, note)


def unclaimed_comparability(dataset: str) -> DatasetComparability:
    """A study that tests no catalog claim: any paper numbers of its spec are for the dataset it names,
    unless that is a stand-in."""
    stand_in = STAND_IN_FOR.get(dataset)
    if stand_in is None:
        return DatasetComparability(dataset, dataset, None, True, f"measured on {dataset}")
    note = (
        f"measured on {dataset} (a stand-in for {stand_in}): paper numbers for {stand_in} are not comparable"
    )
    return DatasetComparability(dataset, stand_in, stand_in, False, note)

"""Which datasets are offline stand-ins for which paper datasets, without importing the data registry
(the service reads this; a test keeps it equal to workers.data.DATASETS' `stand_in_for`)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "DATASET_CLASSES",
    "STAND_IN_FOR",
    "DatasetComparability",
    "dataset_comparability",
    "unclaimed_comparability",
]

# registry name -> the paper dataset it stands in for (workers.data.DATASETS[name].stand_in_for)
STAND_IN_FOR: dict[str, str] = {
    "cifar10_c": "cifar10_c_hendrycks",
    "ptb_pos": "ptb_wsj_pos",
    "digits": "mnist",
    "mnist_5k": "mnist",
    "digits_c": "cifar10_c_hendrycks",
    "fashion_mnist_c": "cifar10_c_hendrycks",
    "ptb_pos_sample": "ptb_wsj_pos",
    "ptb_lm_sample": "ptb_lm",
    "rotten_tomatoes_vader": "sst2",
}

# Classes of each classification dataset a claim may require a number of (a CIFAR-100 claim needs 100):
# the registry's num_classes (a test keeps them equal to workers.data's bundles).
DATASET_CLASSES: dict[str, int] = {
    **dict.fromkeys(("mnist", "mnist_5k", "digits", "digits_c", "fashion_mnist", "fashion_mnist_c"), 10),
    **dict.fromkeys(("svhn", "cifar10", "cifar10_c", "cifar10_c_hendrycks"), 10),
    "cifar100": 100,
    **dict.fromkeys(("sst2", "rotten_tomatoes_vader"), 2),
}


@dataclass(frozen=True)
class DatasetComparability:
    """How a study's dataset relates to the dataset behind the paper's numbers."""

    dataset: str  # what the study ran on
    paper_dataset: str | None  # what the paper's numbers come from (None: no dataset-specific numbers)
    stand_in_for: str | None  # the registry's stand-in relation of `dataset`, if any
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

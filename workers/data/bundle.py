"""Value objects the registry hands out: what a dataset is (DatasetInfo) and its tensors (DatasetBundle)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from torch.utils.data import TensorDataset

from studies.datasets import METRIC_HIGHER_IS_BETTER

__all__ = ["IGNORE_INDEX", "DatasetBundle", "DatasetInfo", "Metric", "Task"]

Task = Literal[
    "image_classification",
    "token_classification",
    "sequence_classification",
    "language_modeling",
    "regression",
]
Metric = Literal["accuracy", "rmse", "perplexity"]

# Label of padded token positions (token classification, language modelling): torch's cross-entropy default.
IGNORE_INDEX = -100


@dataclass(frozen=True)
class DatasetInfo:
    """Registry entry: the facts about a dataset that need no data on disk."""

    name: str
    task: Task
    metric: Metric
    description: str
    # The paper dataset this one stands in for (e.g. digits -> mnist, ptb_pos_sample -> ptb_wsj_pos): a
    # registered name (licensed ones, workers.data.catalog.LICENSED_PAPER_DATASETS, read only a copy the
    # user supplies), or one of UNREGISTERED_PAPER_DATASETS; None for the paper's own data.
    stand_in_for: str | None = None
    # Human-readable list of where the data comes from, in resolution order after the cache.
    sources: tuple[str, ...] = ()
    # Whether a horizontally mirrored image keeps its class (objects, clothes: yes; digits: no); decides
    # whether training augmentation may flip (workers.training.augment).
    mirror_symmetric: bool = False
    # "stand-in for <paper dataset>: <what this is>" for stand-ins, None otherwise; results headers show it.
    stand_in_note: str | None = None

    @property
    def higher_is_better(self) -> bool:
        return METRIC_HIGHER_IS_BETTER[self.metric]  # studies.datasets': the driver ranks by it without torch


@dataclass(frozen=True)
class DatasetBundle:
    """Ready-to-train splits of one dataset plus what build_model needs to fit it.

    The tensors are shared by every caller in the process (get_dataset memoises): treat them as read-only.
    Each split is a TensorDataset, so `.tensors` gives the whole (x, y) pair for fast batching.
    """

    name: str
    task: Task
    metric: Metric
    higher_is_better: bool
    train: TensorDataset
    val: TensorDataset
    test: TensorDataset
    # Corrupted copies of the test set (cifar10_c & co): key `<corruption>` when one severity was chosen,
    # `<corruption>_s<severity>` when several were; empty for most datasets.
    eval_sets: dict[str, TensorDataset]
    # Task fields for models.build_model (image_size/in_channels/num_classes, vocab_size/max_len/..., ...).
    model_fields: dict[str, Any]
    # Preset name (vit_lite_* / encoder_* / tabular_*) sized for this dataset.
    default_model: str
    # Regression: standard deviation of the training targets; multiply a standardised RMSE by it to
    # report RMSE in the original units. 1.0 for other tasks.
    target_std: float = 1.0
    stand_in_for: str | None = None
    split_seed: int = 0
    # Where the raw arrays came from: "cache:<path>", "offline:<path>" or "download:<source>".
    source: str = ""
    # Indices of each split into its source pool; `pools[split]` names the pool ("train" or "test" when the
    # dataset ships an official test set, "all" when the three splits are carved from one pool).
    split_indices: dict[str, Any] = field(default_factory=dict)
    pools: dict[str, str] = field(default_factory=dict)
    # Class names (labels, POS tags) and the word vocabulary (index = id) where they exist.
    class_names: tuple[str, ...] | None = None
    vocab: tuple[str, ...] | None = None
    ignore_index: int = IGNORE_INDEX
    # Images: whether flips keep the class, and the per-channel mean/std of the training split in [0, 1]
    # that standardised every split (augmentation undoes it to work on pixels); None for other tasks.
    mirror_symmetric: bool = False
    pixel_mean: tuple[float, ...] | None = None
    pixel_std: tuple[float, ...] | None = None

    def sizes(self) -> dict[str, int]:
        """Number of examples per split (language modelling: number of fixed-length blocks)."""
        return {"train": len(self.train), "val": len(self.val), "test": len(self.test)}

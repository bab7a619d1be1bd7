"""Dataset registry: every paper dataset and its real offline stand-ins, as ready train/val/test tensors.

from workers.data import get_dataset, DATASETS
bundle = get_dataset("digits", split_seed=0)
model = build_model(bundle.default_model, bundle.model_fields)
"""

from workers.data.bundle import IGNORE_INDEX, DatasetBundle, DatasetInfo
from workers.data.corruptions import CORRUPTIONS, DEFAULT_CORRUPTIONS
from workers.data.errors import DataUnavailableError
from workers.data.locations import cache_dir, offline_dir
from workers.data.registry import DATASETS, clear_memory_cache, get_dataset

__all__ = [
    "CORRUPTIONS",
    "DATASETS",
    "DEFAULT_CORRUPTIONS",
    "IGNORE_INDEX",
    "DataUnavailableError",
    "DatasetBundle",
    "DatasetInfo",
    "cache_dir",
    "clear_memory_cache",
    "get_dataset",
    "offline_dir",
]

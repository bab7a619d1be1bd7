"""The dataset registry: DATASETS (what exists, from workers.data.catalog) and get_dataset (ready tensors,
memoised per process).

A name the catalog does not build is built from its normlab.REGISTRY record's `build(split_seed)`: a coded
plugin's dataset (normlab.plugin.dataset) or a dataset from the user's files
(workers.data.user_files.register_user_dataset), through workers.data.arrays."""

from __future__ import annotations

import functools
import os
from collections import OrderedDict
from collections.abc import Sequence

from normlab.arrays import ArrayDataset
from normlab.records import Dataset
from normlab.registry import REGISTRY as RECORDS
from workers.data import builders
from workers.data.arrays import CheckedArrays, bundle_from_record
from workers.data.bundle import DatasetBundle
from workers.data.catalog import (
    CORRUPTION_SOURCES,
    DATASET_CORRUPTIONS,
    DATASETS,
    LICENSED_PAPER_DATASETS,
    REGISTRY,
    UNREGISTERED_PAPER_DATASETS,
    DatasetEntry,
)
from workers.data.corruptions import (
    DEFAULT_CORRUPTIONS,
    DEFAULT_SEVERITY,
    SEVERITIES,
    CorruptionSets,
    own_corruption_sets,
)
from workers.data.locations import cache_dir, offline_dir, ptb_wsj_dir
from workers.data.resolve import resolve_raw
from workers.data.sources import hendrycks

# The catalog's tables are re-exported: callers have always found them here.
__all__ = [
    "CORRUPTION_SOURCES",
    "DATASETS",
    "DATASET_CORRUPTIONS",
    "LICENSED_PAPER_DATASETS",
    "UNREGISTERED_PAPER_DATASETS",
    "clear_memory_cache",
    "get_dataset",
]


def _lookup(name: str) -> DatasetEntry:
    try:
        return REGISTRY[name]
    except KeyError:
        built = [record.name for record in RECORDS.datasets if record.build is not None]
        raise KeyError(f"unknown dataset {name!r}; registered: {sorted({*REGISTRY, *built})}") from None


def _buildable(name: str) -> Dataset | None:
    """The registry record of a dataset the catalog does not build, where it has a builder."""
    if name in REGISTRY:
        return None
    record = RECORDS.datasets.find(name)
    return record if record is not None and record.build is not None else None


# Bundles of registered (plugin, user-file) datasets, by (name, split seed), with the record they were built
# from: a record registered again under the name (another plugin version, a test) is built afresh.
_REGISTERED_BUNDLES: OrderedDict[tuple[str, int], tuple[Dataset, DatasetBundle]] = OrderedDict()
_REGISTERED_KEPT = 4


def _registered_bundle(record: Dataset, split_seed: int) -> DatasetBundle:
    key = (record.name, split_seed)
    cached = _REGISTERED_BUNDLES.get(key)
    if cached is not None and cached[0] is record:
        _REGISTERED_BUNDLES.move_to_end(key)
        return cached[1]
    assert record.build is not None
    arrays = record.build(split_seed)
    if not isinstance(arrays, (ArrayDataset, CheckedArrays)):
        raise TypeError(
            f"dataset {record.name!r} ({record.source}): build(split_seed) returned {type(arrays).__name__}; "
            "it must return a normlab.arrays.ArrayDataset"
        )
    origin = record.source if record.source.startswith("user_files:") else f"plugin:{record.source}"
    bundle = bundle_from_record(record, arrays, split_seed=split_seed, source=origin)
    _REGISTERED_BUNDLES[key] = (record, bundle)
    while len(_REGISTERED_BUNDLES) > _REGISTERED_KEPT:
        _REGISTERED_BUNDLES.popitem(last=False)
    return bundle


@functools.lru_cache(maxsize=4)
def _build_bundle(
    name: str,
    split_seed: int,
    cache_path: str,
    offline_path: str,  # part of the key only: the offline dir is read from the environment
    user_copy_path: str,  # part of the key only: so is a licensed copy's dir (NORMLAB_PTB_WSJ_DIR)
    download: bool,
    corruptions: tuple[str, ...],
    severities: tuple[int, ...],
) -> DatasetBundle:
    entry = REGISTRY[name]
    root = os.path.dirname(cache_path)
    raw, origin = resolve_raw(entry.source, root=root, download=download)
    plan = builders.plan_splits(
        raw, split_seed=split_seed, val_fraction=entry.val_fraction, test_fraction=entry.test_fraction
    )
    sets = _corruption_sets(
        entry, corruptions, severities, split_seed=split_seed, root=root, download=download
    )
    built = entry.build(raw, plan, **({"corruption_sets": sets} if sets is not None else {}))
    info = entry.info
    return DatasetBundle(
        name=info.name,
        task=info.task,
        metric=info.metric,
        higher_is_better=info.higher_is_better,
        train=built.splits["train"],
        val=built.splits["val"],
        test=built.splits["test"],
        eval_sets=built.eval_sets,
        model_fields=built.model_fields,
        default_model=entry.default_model,
        target_std=built.target_std,
        stand_in_for=info.stand_in_for,
        split_seed=split_seed,
        source=origin,
        split_indices=plan.indices,
        pools=plan.pools,
        class_names=built.class_names,
        vocab=built.vocab,
        mirror_symmetric=info.mirror_symmetric,
        pixel_mean=built.pixel_mean,
        pixel_std=built.pixel_std,
    )


def _corruption_sets(
    entry: DatasetEntry,
    corruptions: tuple[str, ...],
    severities: tuple[int, ...],
    *,
    split_seed: int,
    root: str,
    download: bool,
) -> CorruptionSets | None:
    if entry.corruption_source is None:
        return None
    if entry.corruption_source == "hendrycks":
        return hendrycks.hendrycks_corruption_sets(corruptions, severities, root=root, download=download)
    return own_corruption_sets(corruptions, severities, seed=split_seed)


def get_dataset(
    name: str,
    *,
    split_seed: int = 0,
    root: str | os.PathLike[str] | None = None,
    download: bool = True,
    corruptions: Sequence[str] | None = None,
    severities: Sequence[int] | None = None,
    severity: int | None = None,
) -> DatasetBundle:
    """Ready train/val/test tensors of a registered dataset.

    Resolution: the cache ($NORMLAB_DATA_DIR/datasets or `root`/datasets), the dataset's offline
    locations, then its downloader (unless download=False). Raises DataUnavailableError, naming how to
    get the data, when all fail. Splits depend on `split_seed` only.

    Corruption datasets (DATASET_CORRUPTIONS: cifar10_c_hendrycks, cifar10_c and its stand-ins) build one
    eval set per chosen corruption and severity: `corruptions` (default gaussian_noise, motion_blur,
    brightness) and `severities` (each 1..5, default (3,); `severity=k` is shorthand for `severities=[k]`).
    With one severity the eval sets are named by corruption, with several `<corruption>_s<severity>`.
    Results are memoised per process: repeated calls return the same (read-only) bundle.

    A dataset the catalog does not build is built from its normlab.REGISTRY record (a plugin's builder,
    the user's files); such a dataset has no corruption eval sets and reads nothing from `root`.
    """
    record = _buildable(name)
    if record is not None:
        if corruptions or severities or severity is not None:
            raise ValueError(
                f"dataset {name!r} has no corruption eval sets (corruption datasets: {sorted(DATASET_CORRUPTIONS)})"
            )
        return _registered_bundle(record, int(split_seed))
    entry = _lookup(name)
    if severity is not None:
        if severities is not None:
            raise ValueError("pass `severities` or `severity`, not both")
        severities = (severity,)
    if entry.corruption_source is None:
        if corruptions or severities:
            raise ValueError(
                f"dataset {name!r} has no corruption eval sets (corruption datasets: {sorted(DATASET_CORRUPTIONS)})"
            )
        chosen: tuple[str, ...] = ()
        levels: tuple[int, ...] = ()
    else:
        chosen = _checked_corruptions(name, DEFAULT_CORRUPTIONS if corruptions is None else corruptions)
        levels = _checked_severities((DEFAULT_SEVERITY,) if severities is None else severities)
    return _build_bundle(
        name,
        int(split_seed),
        str(cache_dir(root).resolve()),
        str(offline_dir().resolve()),
        str(ptb_wsj_dir()),
        bool(download),
        chosen,
        levels,
    )


def _checked_corruptions(name: str, corruptions: Sequence[str]) -> tuple[str, ...]:
    chosen = tuple(corruptions)
    known = DATASET_CORRUPTIONS[name]
    unknown = [c for c in chosen if c not in known]
    if unknown:
        raise ValueError(f"unknown corruptions {unknown} for {name!r}; known: {list(known)}")
    if not chosen or len(set(chosen)) != len(chosen):
        raise ValueError(f"corruptions must be a non-empty list without repeats, got {list(chosen)}")
    return chosen


def _checked_severities(severities: Sequence[int]) -> tuple[int, ...]:
    levels = tuple(int(s) for s in severities)
    if not levels or len(set(levels)) != len(levels) or any(s not in SEVERITIES for s in levels):
        raise ValueError(f"severities must be distinct values in 1..5, got {list(levels)}")
    return levels


def clear_memory_cache() -> None:
    """Forget memoised bundles (tests that change NORMLAB_* between calls; freeing memory)."""
    _build_bundle.cache_clear()
    _REGISTERED_BUNDLES.clear()

"""Fixed train/val/test splits drawn from `split_seed`, never from the trial seed.

Every trial of a study sees the same validation and test examples whatever its training seed, so seeds
measure training noise only.
"""

from __future__ import annotations

import numpy as np

__all__ = ["RawSplits", "carve_splits"]

# Mixed into the generator seed so the split stream is unrelated to any other use of the same integer.
_SPLIT_SALT = 0x5EED_5917

RawSplits = dict[str, np.ndarray]


def _generator(split_seed: int) -> np.random.Generator:
    return np.random.default_rng([int(split_seed), _SPLIT_SALT])


def carve_splits(
    n_pool: int,
    *,
    split_seed: int,
    val_fraction: float,
    test_fraction: float = 0.0,
) -> RawSplits:
    """Partition range(n_pool) into disjoint sorted index arrays: val, test (if test_fraction > 0) and train.

    With test_fraction == 0 the dataset has an official test set and only a validation split is carved
    out of its training pool.
    """
    if not 0 < val_fraction < 1 or not 0 <= test_fraction < 1 or val_fraction + test_fraction >= 1:
        raise ValueError(f"bad split fractions: val={val_fraction}, test={test_fraction}")
    n_val = max(1, round(n_pool * val_fraction))
    n_test = max(1, round(n_pool * test_fraction)) if test_fraction > 0 else 0
    if n_val + n_test >= n_pool:
        raise ValueError(f"pool of {n_pool} examples is too small to split")
    order = _generator(split_seed).permutation(n_pool)
    splits = {"val": np.sort(order[:n_val]), "train": np.sort(order[n_val + n_test :])}
    if n_test:
        splits["test"] = np.sort(order[n_val : n_val + n_test])
    return splits

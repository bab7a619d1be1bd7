"""Minibatches straight from the split tensors: no DataLoader, no hidden RNG draws, no per-item overhead."""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch.utils.data import Dataset, TensorDataset, default_collate

__all__ = ["iterate_batches", "num_batches"]


def num_batches(num_items: int, batch_size: int) -> int:
    return -(-num_items // batch_size)


def iterate_batches(
    dataset: Dataset, batch_size: int, *, order: torch.Tensor | None = None
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Yield (x, y) batches in `order` (a permutation of indices) or in dataset order; the last may be short.

    A TensorDataset (what workers.data hands out) is sliced directly; any other dataset is read item by
    item and collated, so tests and future datasets still work.
    """
    size = len(dataset)  # type: ignore[arg-type]
    for start in range(0, size, batch_size):
        index = order[start : start + batch_size] if order is not None else None
        if isinstance(dataset, TensorDataset):
            if index is None:
                x, y = (t[start : start + batch_size] for t in dataset.tensors)
            else:
                x, y = (t[index] for t in dataset.tensors)
        else:
            items = index.tolist() if index is not None else range(start, min(start + batch_size, size))
            x, y = default_collate([dataset[i] for i in items])
        yield x, y

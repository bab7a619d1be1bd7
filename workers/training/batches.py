"""Minibatches straight from the split tensors: no DataLoader, no hidden RNG draws, no per-item overhead."""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch.utils.data import Dataset, TensorDataset, default_collate

__all__ = ["DEVICE_SPLIT_FRACTION", "device_resident", "fits_on_device", "iterate_batches", "num_batches"]

# A training split moves onto the GPU when it takes at most this share of the device's memory: the
# rest is the trial's (and its packed neighbours'; `resources.gpu: auto` measures a trial with its split).
DEVICE_SPLIT_FRACTION = 0.25


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


def fits_on_device(split_bytes: int, device_bytes: int) -> bool:
    return split_bytes <= DEVICE_SPLIT_FRACTION * device_bytes


def device_resident(dataset: Dataset, device: torch.device) -> Dataset:
    """The training split to gather batches from: on a CUDA device, a TensorDataset copied there once when
    it `fits_on_device`, so each step's gather is device work and no step copies from pageable host
    memory (a copy the host has to wait for, which keeps it from queueing the next step while the GPU
    runs this one); anything else is returned as it is. Batches are the same values either way."""
    if device.type != "cuda" or not isinstance(dataset, TensorDataset):
        return dataset
    split_bytes = sum(t.numel() * t.element_size() for t in dataset.tensors)
    if not fits_on_device(split_bytes, torch.cuda.get_device_properties(device).total_memory):
        return dataset
    return TensorDataset(*(t.to(device) for t in dataset.tensors))

"""Training batches (workers/training/batches.py): what a step gathers, and where the split lives."""

from __future__ import annotations

import torch
from torch.utils.data import TensorDataset

from workers.training.batches import DEVICE_SPLIT_FRACTION, device_resident, fits_on_device, iterate_batches


def tensor_split(items: int = 10) -> TensorDataset:
    return TensorDataset(torch.arange(items * 3, dtype=torch.float32).reshape(items, 3), torch.arange(items))


def test_batches_follow_the_order_and_the_last_one_is_short() -> None:
    split = tensor_split()
    order = torch.tensor([9, 0, 8, 1, 7, 2, 6, 3, 5, 4])
    labels = [y.tolist() for _, y in iterate_batches(split, 4, order=order)]
    assert labels == [[9, 0, 8, 1], [7, 2, 6, 3], [5, 4]]
    first_x, _ = next(iterate_batches(split, 4, order=order))
    assert torch.equal(first_x, split.tensors[0][order[:4]])


def test_a_split_stays_where_it_is_off_a_gpu() -> None:
    split = tensor_split()
    assert device_resident(split, torch.device("cpu")) is split


def test_a_split_moves_to_the_gpu_only_when_it_takes_a_small_share_of_its_memory() -> None:
    device_bytes = 80 * 2**30
    assert fits_on_device(int(DEVICE_SPLIT_FRACTION * device_bytes), device_bytes)
    assert not fits_on_device(int(DEVICE_SPLIT_FRACTION * device_bytes) + 1, device_bytes)
    assert fits_on_device(614 * 2**20, device_bytes)  # CIFAR-10's training split as float32

import os
import random

import numpy as np
import pytest
import torch

from workers.training.checkpoint import CheckpointSchedule, load_checkpoint, save_checkpoint
from workers.training.seeding import capture_rng_state, restore_rng_state, seed_everything


def test_missing_checkpoint_loads_as_none(tmp_path):
    assert load_checkpoint(tmp_path / "checkpoint.pt") is None


def test_checkpoint_round_trips_tensors_and_plain_values(tmp_path):
    path = tmp_path / "ckpt" / "checkpoint.pt"
    save_checkpoint(path, {"w": torch.arange(3.0), "epoch": 2, "history": [{"loss": 0.5}]})
    state = load_checkpoint(path)
    assert torch.equal(state["w"], torch.arange(3.0)) and state["epoch"] == 2
    assert state["history"] == [{"loss": 0.5}]
    assert os.listdir(path.parent) == ["checkpoint.pt"]  # no temporary file left behind


def test_a_failed_write_keeps_the_previous_checkpoint(tmp_path):
    path = tmp_path / "checkpoint.pt"
    save_checkpoint(path, {"epoch": 1})

    class Unpicklable:
        def __reduce__(self):
            raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        save_checkpoint(path, {"epoch": 2, "bad": Unpicklable()})
    assert load_checkpoint(path) == {"epoch": 1}
    assert os.listdir(tmp_path) == ["checkpoint.pt"]


def test_rng_state_survives_a_checkpoint_and_replays_every_generator(tmp_path):
    seed_everything(11)
    data = torch.Generator().manual_seed(4)
    torch.randn(3), np.random.rand(), random.random(), torch.randperm(5, generator=data)
    save_checkpoint(tmp_path / "rng.pt", {"rng": capture_rng_state(data)})
    expected = (torch.randn(3), np.random.rand(), random.random(), torch.randperm(5, generator=data))

    seed_everything(99)
    other = torch.Generator().manual_seed(0)
    restore_rng_state(load_checkpoint(tmp_path / "rng.pt")["rng"], other)
    replay = (torch.randn(3), np.random.rand(), random.random(), torch.randperm(5, generator=other))
    assert torch.equal(expected[0], replay[0]) and torch.equal(expected[3], replay[3])
    assert expected[1:3] == replay[1:3]


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_zero_interval_checkpoints_every_epoch():
    schedule = CheckpointSchedule(0.0, clock=_Clock())
    assert [schedule.due(epoch, 5) for epoch in range(1, 6)] == [True] * 5


def test_an_interval_checkpoints_an_epoch_once_that_long_has_passed_since_the_last_and_always_the_last():
    clock = _Clock()
    schedule = CheckpointSchedule(10.0, clock=clock)
    due = []
    for epoch in range(1, 8):
        clock.now += 4.0  # epochs of 4 s: 4, 8, 12 (due), 16, 20, 24 (due), 28 (the last)
        due.append(schedule.due(epoch, 7))
    assert due == [False, False, True, False, False, True, True]


def test_epochs_longer_than_the_interval_are_each_checkpointed():
    clock = _Clock()
    schedule = CheckpointSchedule(10.0, clock=clock)
    due = []
    for epoch in range(1, 4):
        clock.now += 30.0
        due.append(schedule.due(epoch, 3))
    assert due == [True, True, True]

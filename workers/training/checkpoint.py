"""Atomic checkpoint files: a crash mid-write leaves the previous checkpoint intact."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

__all__ = ["CHECKPOINT_FILE", "CheckpointSchedule", "load_checkpoint", "save_checkpoint"]

CHECKPOINT_FILE = "checkpoint.pt"


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Write `state` to `path` via a temporary file in the same directory and os.replace (atomic on POSIX)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            torch.save(state, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def load_checkpoint(path: Path, *, map_location: str | torch.device = "cpu") -> dict[str, Any] | None:
    """The saved state, or None when no checkpoint exists. Only tensors and plain Python types are unpickled."""
    path = Path(path)
    if not path.exists():
        return None
    return torch.load(path, map_location=map_location, weights_only=True)


class CheckpointSchedule:
    """Which epochs a run checkpoints: the last one always, the others once `every_s` seconds have passed
    since the run's previous checkpoint (or its start); `every_s` <= 0 checkpoints every epoch.

    A checkpoint costs a file write with fsync, its copy into Tune's storage and, with one checkpoint kept
    per trial, a snapshot of the whole experiment by Tune's driver: on epochs of a fraction of a second that
    is more work than the epoch. What a failed trial redoes is bounded by `every_s` of training (resumed
    runs recompute the same epochs, on CPU bit for bit)."""

    def __init__(self, every_s: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.every_s = float(every_s)
        self._clock = clock
        self._last = clock()

    def due(self, epoch: int, last_epoch: int) -> bool:
        """Whether epoch `epoch` (of 1..`last_epoch`), just trained, is checkpointed; restarts the interval."""
        now = self._clock()
        if epoch >= last_epoch or self.every_s <= 0 or now - self._last >= self.every_s:
            self._last = now
            return True
        return False

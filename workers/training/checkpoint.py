"""Atomic checkpoint files: a crash mid-write leaves the previous checkpoint intact."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import torch

__all__ = ["CHECKPOINT_FILE", "load_checkpoint", "save_checkpoint"]

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

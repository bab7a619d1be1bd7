"""Seeding and RNG state capture: the same seed gives bit-identical CPU runs, resumption included."""

from __future__ import annotations

import random
from typing import Any, cast

import numpy as np
import torch

__all__ = ["capture_rng_state", "restore_rng_state", "seed_everything"]


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (CPU and every CUDA device): init, dropout and gate noise follow."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # also seeds every CUDA device
    if torch.cuda.is_available():
        # Bit-identity is only promised on CPU; on CUDA this removes the avoidable nondeterminism.
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True


def capture_rng_state(data_generator: torch.Generator) -> dict[str, Any]:
    """Every global RNG plus the data-order generator, in types `torch.load(weights_only=True)` accepts."""
    # The legacy (default) form is this tuple; numpy's stub also admits the dict form.
    legacy = cast("tuple[str, np.ndarray, int, int, float]", np.random.get_state())
    kind, keys, pos, has_gauss, cached_gauss = legacy
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": (kind, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, cached_gauss),
        "torch": torch.get_rng_state(),
        "data": data_generator.get_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict[str, Any], data_generator: torch.Generator) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    kind, keys, pos, has_gauss, cached_gauss = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, cached_gauss))
    torch.set_rng_state(state["torch"])
    data_generator.set_state(state["data"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])

"""Per-step learning-rate schedule: linear warmup, then cosine decay (Compact-Transformers recipe)."""

from __future__ import annotations

import math

import torch
from torch.optim.lr_scheduler import LambdaLR

__all__ = ["build_warmup_cosine", "warmup_cosine_factor"]


def warmup_cosine_factor(step: int, *, warmup_steps: int, total_steps: int, min_ratio: float = 0.0) -> float:
    """Multiplier of the peak lr for optimizer step `step` (0-based).

    Warmup ramps (step + 1) / warmup_steps so the very first step already moves the weights; the cosine
    then runs from 1 at the end of warmup to `min_ratio` at the last step (total_steps - 1).
    """
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    decay_steps = total_steps - warmup_steps - 1
    if decay_steps <= 0:
        return 1.0
    progress = min(1.0, (step - warmup_steps) / decay_steps)
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


def build_warmup_cosine(
    optimizer: torch.optim.Optimizer, *, warmup_steps: int, total_steps: int, min_ratio: float = 0.0
) -> LambdaLR:
    """A LambdaLR stepped once per optimizer step; its state_dict is just the step counter."""
    if total_steps < 1:
        raise ValueError(f"total_steps must be >= 1, got {total_steps}")

    def factor(step: int) -> float:
        return warmup_cosine_factor(
            step, warmup_steps=warmup_steps, total_steps=total_steps, min_ratio=min_ratio
        )

    return LambdaLR(optimizer, factor)

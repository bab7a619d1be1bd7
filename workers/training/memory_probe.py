"""The GPU memory one trial needs, measured by running it briefly: what `resources.gpu: auto` packs by.

A few training steps and one evaluation pass reach a trial's steady-state peak (parameters, AdamW state,
activations of one batch, the eval batch); the epoch's length does not change it. The peak is what the
caching allocator reserved, not only what tensors held, because reserved memory is what a neighbouring
trial cannot use.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from workers.training.config import TrainConfig

__all__ = ["PROBE_STEPS", "TrialMemory", "measure_trial_memory"]

PROBE_STEPS = 3


@dataclass(frozen=True)
class TrialMemory:
    peak_bytes: int
    device_bytes: int


def measure_trial_memory(cfg: TrainConfig, seeds: Sequence[int], *, steps: int = PROBE_STEPS) -> TrialMemory:
    """Peak reserved CUDA memory of `steps` training steps and one validation pass of a trial of `seeds`
    (seed-batched when more than one), on the current CUDA device."""
    from workers.training.loop import TrainingRun
    from workers.training.seed_batch import SeedBatchedRun

    if not torch.cuda.is_available():
        raise RuntimeError("measuring a trial's GPU memory needs a CUDA device")
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    cfg = TrainConfig(**{**cfg.to_dict(), "device": "cuda", "progress": False})
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    run = SeedBatchedRun(cfg, seeds) if len(seeds) > 1 else TrainingRun(cfg)
    # Only this throwaway run's epoch is shortened; its schedule and metrics are never used.
    run.steps_per_epoch = min(run.steps_per_epoch, steps)
    run.train_one_epoch()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_reserved()
    device = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
    del run
    torch.cuda.empty_cache()
    return TrialMemory(peak_bytes=int(peak), device_bytes=int(device))

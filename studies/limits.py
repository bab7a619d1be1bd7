"""Limits that protect the cluster from a study that is too large.

The service builds a `StudyLimits` from its settings and passes it to `studies.spec.load_spec` (or as the
pydantic validation context `{"limits": limits}`); a spec validated without limits is not size-checked,
so the workers can re-read a stored spec even after an operator lowers the limits.

The memory a trial may use (studies.spec.memory checks the estimate of studies.sizing against it): a CPU
trial has `trial_memory_gib` of RAM, one trial slot's share of a node; a GPU trial has its `resources.gpu`
share of a GPU of `gpu_memory_gib`. `gpu_memory_gib` None means no GPU size was declared: a spec's
"auto" GPU share is then sized as a CPU trial (what it is on a cluster without GPUs), and an explicit
share against DEFAULT_GPU_MEMORY_GIB.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_GPU_MEMORY_GIB", "DEFAULT_TRIAL_MEMORY_GIB", "GIB", "StudyLimits"]

GIB = 2**30
# RAM one CPU trial may use: room for the paper-size models at their batch sizes (the largest, the
# language-model encoder at batch 128, estimates about 6 GiB) on a node that runs a few trials at once.
DEFAULT_TRIAL_MEMORY_GIB = 16.0
# An 80 GB data-centre GPU (A100 80GB, H100), for a spec that asks for a GPU share where none was declared.
DEFAULT_GPU_MEMORY_GIB = 80.0


@dataclass(frozen=True)
class StudyLimits:
    max_trials: int = 500  # trials per study, tune + final (or grid points x seeds), all methods together
    # Seeds in the final phase (each seed is a full training run per method). 100: a sequential design's
    # max_seeds is a cap its looks rarely reach, and an equivalence at a one-point margin needs 60-100
    # seeds; max_trials still bounds the study's total.
    max_seeds: int = 100
    max_epochs: int = 500  # epochs per trial
    trial_memory_gib: float = DEFAULT_TRIAL_MEMORY_GIB  # RAM per CPU trial (NORMLAB_TRIAL_MEMORY_GIB)
    gpu_memory_gib: float | None = None  # memory of one GPU (NORMLAB_GPU_MEMORY_GIB); None: none declared

    def __post_init__(self) -> None:
        for name in ("max_trials", "max_seeds", "max_epochs"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("trial_memory_gib", "gpu_memory_gib"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be positive, got {value}")

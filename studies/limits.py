"""Limits that protect the cluster from a study that is too large.

The service builds a `StudyLimits` from its settings and passes it to `studies.spec.load_spec` (or as the
pydantic validation context `{"limits": limits}`); a spec validated without limits is not size-checked,
so the workers can re-read a stored spec even after an operator lowers the limits.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["StudyLimits"]


@dataclass(frozen=True)
class StudyLimits:
    max_trials: int = 500  # trials per study, tune + final (or grid points x seeds), all methods together
    max_seeds: int = 20  # seeds in the final phase (each seed is a full training run per method)
    max_epochs: int = 500  # epochs per trial

    def __post_init__(self) -> None:
        for name in ("max_trials", "max_seeds", "max_epochs"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")

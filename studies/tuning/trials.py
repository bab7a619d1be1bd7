"""What the tuning views read of a trial: a tune-phase trial (or a grid trial of a sweep) with its knobs and
its objective, in the order the study started the trials."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from studies.numbers import is_finite_number
from studies.records import COMPLETED_STATUSES

__all__ = ["TuningTrial"]


@dataclass(frozen=True)
class TuningTrial:
    """One trial: its knobs (fixed ones included) and the objective it last reported (a tune trial's
    validation metric, a grid trial's test metric; None while it runs, or when it failed)."""

    trial_key: str
    method: str
    seed: int | None
    status: str  # succeeded | failed | running | cancelled (studies.records)
    value: float | None
    knobs: Mapping[str, Any] = field(default_factory=dict)
    epochs: int | None = None  # the last epoch it reported: fewer than the budget when ASHA stopped it

    @property
    def objective(self) -> float | None:
        """The objective of a trial that finished with a finite one (what the views read), else None."""
        if self.status.lower() in COMPLETED_STATUSES and is_finite_number(self.value):
            return float(self.value)
        return None

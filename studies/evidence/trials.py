"""The plain trial record the mechanism views are computed from (no database, MLflow or torch types)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from studies.numbers import finite_or_none
from studies.records import COMPLETED_STATUSES, row_label

__all__ = ["DEFAULT_PLACEMENT", "EvidenceTrial", "finite_or_none"]

DEFAULT_PLACEMENT = "pre"  # the backbones' default norm placement (models.config.TransformerConfig)


@dataclass(frozen=True)
class EvidenceTrial:
    """One final-phase (or grid) trial with its per-epoch history."""

    trial_key: str
    method: str
    seed: int | None
    status: str  # succeeded | failed | running | cancelled
    value: float | None  # the final metric; None when the trial produced none
    group: str | None = None  # grid point label
    placement: str = DEFAULT_PLACEMENT  # norm placement the trial's model used
    depth: int | None = None  # blocks in the model, when known: places the last representation rank
    final: Mapping[str, Any] = field(default_factory=dict)  # the last reported metrics
    history: tuple[Mapping[str, Any], ...] = ()  # one mapping per epoch, each with "epoch", in order

    @property
    def label(self) -> str:
        """Row label, as in the results table: the method, or "method [group]" for a grid point."""
        return row_label(self.method, self.group)

    @property
    def completed(self) -> bool:
        return self.status.lower() in COMPLETED_STATUSES

    def epoch(self, number: int) -> Mapping[str, Any] | None:
        """The metrics reported at epoch `number`, or None when the history lacks that epoch."""
        for row in self.history:
            if _as_int(row.get("epoch")) == number:
                return row
        return None


def _as_int(value: Any) -> int | None:
    number = finite_or_none(value)
    return int(number) if number is not None and number == int(number) else None

"""The plain trial record that results tables and mechanism evidence are built from (no database or MLflow
types), with the statuses that count as finished and the label a row goes by."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["COMPLETED_STATUSES", "FAILED_STATUSES", "TrialRecord"]

# Trial statuses as studies.store writes them (running, succeeded, failed, cancelled), plus common
# synonyms so records from notebooks or other trackers read the same. Any other status (running,
# cancelled, queued) counts as unfinished: it neither adds a value nor counts as a failure.
COMPLETED_STATUSES = frozenset({"succeeded", "completed", "success", "done"})
FAILED_STATUSES = frozenset({"failed", "error", "errored"})


@dataclass(frozen=True)
class TrialRecord:
    """One final-phase (or grid) trial: one method, one seed, one metric value."""

    study_id: str
    method: str
    seed: int
    value: float | None  # the metric on the test split; None when the trial produced none
    status: str  # succeeded | failed | running | cancelled (see COMPLETED_STATUSES, FAILED_STATUSES)
    mlflow_run_id: str | None = None
    group: str | None = None  # grid point label (e.g. "tau=0.5"); None for plain method rows

    @property
    def label(self) -> str:
        """Row label: the method, or "method [group]" for a grid point."""
        return row_label(self.method, self.group)


def row_label(method: str, group: str | None) -> str:
    return method if group is None else f"{method} [{group}]"

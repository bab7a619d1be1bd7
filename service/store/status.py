"""Study and trial statuses, and the one table of allowed study status transitions."""

from __future__ import annotations

from enum import Enum

__all__ = ["ALLOWED_TRANSITIONS", "TERMINAL_STATUSES", "Phase", "StudyStatus", "TrialStatus"]


class StudyStatus(str, Enum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class TrialStatus(str, Enum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class Phase(str, Enum):
    TUNE = "tune"  # search on the validation split
    FINAL = "final"  # best config per method, declared seeds, test split
    GRID = "grid"  # every grid point x seed (kind: grid)


TERMINAL_STATUSES = frozenset({StudyStatus.SUCCEEDED, StudyStatus.FAILED, StudyStatus.CANCELLED})

# Same-state requests are accepted as no-ops (retries are idempotent); everything else not listed is refused.
ALLOWED_TRANSITIONS: dict[StudyStatus, frozenset[StudyStatus]] = {
    StudyStatus.QUEUED: frozenset({StudyStatus.RUNNING, StudyStatus.CANCELLED, StudyStatus.FAILED}),
    StudyStatus.RUNNING: frozenset({StudyStatus.SUCCEEDED, StudyStatus.FAILED, StudyStatus.CANCELLED}),
    StudyStatus.SUCCEEDED: frozenset(),
    StudyStatus.FAILED: frozenset(),
    StudyStatus.CANCELLED: frozenset(),
}

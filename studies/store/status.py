"""Study and trial statuses, the one table of allowed study status transitions, and what a stopped
study does to its running trials."""

from __future__ import annotations

from enum import Enum

from studies.trial_config import FINAL_PHASE, GRID_PHASE, TUNE_PHASE

__all__ = [
    "ALLOWED_TRANSITIONS",
    "DRIVER_DIED",
    "TERMINAL_STATUSES",
    "Phase",
    "StudyStatus",
    "TrialStatus",
    "driver_died_error",
    "outcome_of_running_trials",
]


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
    """A stored trial's phase: its trial config's (studies.trial_config)."""

    TUNE = TUNE_PHASE  # search on the validation split
    FINAL = FINAL_PHASE  # best config per method, declared seeds, test split
    GRID = GRID_PHASE  # every grid point x seed (kind: grid)


TERMINAL_STATUSES = frozenset({StudyStatus.SUCCEEDED, StudyStatus.FAILED, StudyStatus.CANCELLED})

# Same-state requests are accepted as no-ops (retries are idempotent); everything else not listed is refused.
ALLOWED_TRANSITIONS: dict[StudyStatus, frozenset[StudyStatus]] = {
    StudyStatus.QUEUED: frozenset({StudyStatus.RUNNING, StudyStatus.CANCELLED, StudyStatus.FAILED}),
    StudyStatus.RUNNING: frozenset({StudyStatus.SUCCEEDED, StudyStatus.FAILED, StudyStatus.CANCELLED}),
    StudyStatus.SUCCEEDED: frozenset(),
    StudyStatus.FAILED: frozenset(),
    StudyStatus.CANCELLED: frozenset(),
}


def outcome_of_running_trials(
    study_status: StudyStatus | str, study_error: str | None
) -> tuple[TrialStatus, str | None] | None:
    """How a running trial of a study in `study_status` ends: (trial status, error), or None to leave it.

    A cancelled or failed study has no driver left to finish its trials, so they end with it; `error`
    None keeps the trial's own. Queued, running and succeeded studies leave their trials as recorded.
    """
    status = StudyStatus(study_status)
    if status == StudyStatus.CANCELLED:
        return TrialStatus.CANCELLED, None
    if status == StudyStatus.FAILED:
        lines = (study_error or "").strip().splitlines()
        return TrialStatus.FAILED, f"study failed: {lines[0]}" if lines else "study failed"
    return None


# How the error of a trial that ended with its dead driver begins (studies.store.end_attempt). A trial that
# keeps it was lost with that driver: the next attempt runs its work again (resumed under its own key, or,
# when it had missed Tune's last snapshot, as a new trial), so study progress counts it as lost, not done.
DRIVER_DIED = "the study's driver died"


def driver_died_error(attempt: int, death_reason: str) -> str:
    """The error of a trial still running when driver attempt `attempt` died of `death_reason`."""
    first_line = (death_reason.strip().splitlines() or ["no reason recorded"])[0]
    return f"{DRIVER_DIED} (attempt {attempt}: {first_line})"

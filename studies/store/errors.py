"""Domain errors raised by the store; service.api.errors maps them to HTTP status codes in one place."""

from __future__ import annotations

from studies.store.status import TERMINAL_STATUSES

__all__ = [
    "DeletionNotConfirmedError",
    "IdempotencyKeyReusedError",
    "InvalidLookError",
    "InvalidStatusTransitionError",
    "InvalidTagError",
    "InvalidTrialError",
    "LookConflictError",
    "StoreError",
    "StudyNotDeletableError",
    "StudyNotFoundError",
    "TrialKeyConflictError",
    "TrialNotFoundError",
]


class StoreError(Exception):
    """Base class of every error the store raises on purpose."""


class StudyNotFoundError(StoreError, LookupError):
    def __init__(self, study_id: str) -> None:
        super().__init__(f"no study with id '{study_id}'")
        self.study_id = study_id


class TrialNotFoundError(StudyNotFoundError):
    """A trial key the study does not have.

    A lookup inside a study that found nothing, hence a StudyNotFoundError: whoever maps that to
    "not found" (the API: 404) answers the same for an unknown trial, with this message.
    """

    def __init__(self, study_id: str, trial_key: str) -> None:
        LookupError.__init__(
            self,
            f"study '{study_id}' has no trial with key '{trial_key}' "
            f"(GET /studies/{study_id}/trials lists its trial keys)",
        )
        self.study_id = study_id
        self.trial_key = trial_key


class InvalidStatusTransitionError(StoreError):
    def __init__(self, study_id: str, current: str, requested: str) -> None:
        final = " (a finished study keeps its final status)" if current in TERMINAL_STATUSES else ""
        super().__init__(f"study '{study_id}' is {current}; it cannot become {requested}{final}")
        self.study_id = study_id
        self.current = current
        self.requested = requested


class TrialKeyConflictError(StoreError):
    def __init__(self, trial_key: str, owner_study_id: str, study_id: str) -> None:
        super().__init__(
            f"trial_key '{trial_key}' already belongs to study '{owner_study_id}', not '{study_id}'"
        )
        self.trial_key = trial_key


class InvalidTrialError(StoreError, ValueError):
    """A trial record with a value outside its domain (unknown phase or status)."""


class IdempotencyKeyReusedError(StoreError):
    """An idempotency key already stored with a study of a different spec."""

    def __init__(self, idempotency_key: str, study_id: str) -> None:
        super().__init__(
            f"Idempotency-Key '{idempotency_key}' was already used for study '{study_id}' with a different "
            "spec; a key names one submission: send this spec under a new key"
        )
        self.idempotency_key = idempotency_key
        self.study_id = study_id


class InvalidLookError(StoreError, ValueError):
    """A look record the study cannot have: a fixed-seed study, or a look outside its design."""


class LookConflictError(StoreError):
    """A look already stored with a different record: what a look decided stays decided."""

    def __init__(self, study_id: str, look: int, difference: str) -> None:
        super().__init__(
            f"study '{study_id}' already has look {look} stored, with a different record ({difference}); "
            "a stored look is never overwritten: the data it analysed changed since it was taken"
        )
        self.study_id = study_id
        self.look = look


class InvalidTagError(StoreError, ValueError):
    """A tag outside the rules of studies.store._tags, or one tag too many; `index` is the position of the
    offending tag in the list given (None: the list as a whole, e.g. too many tags)."""

    def __init__(self, message: str, *, index: int | None = None, tag: str | None = None) -> None:
        super().__init__(message)
        self.index = index
        self.tag = tag


class StudyNotDeletableError(StoreError):
    """A study that has not ended: its driver may still write to it, so it is not deleted."""

    def __init__(self, study_id: str, status: str) -> None:
        super().__init__(
            f"study '{study_id}' is {status}: only an ended study (succeeded, failed or cancelled) is "
            f"deleted; cancel it first (POST /studies/{study_id}/cancel) and delete it once it has ended"
        )
        self.study_id = study_id
        self.status = status


class DeletionNotConfirmedError(StoreError, ValueError):
    """A deletion whose `confirm` does not repeat the study's id."""

    def __init__(self, study_id: str, confirm: str | None) -> None:
        super().__init__(
            f"deleting study '{study_id}' removes it with all its trials for good: repeat its id as "
            f"confirm (DELETE /studies/{study_id}?confirm={study_id})"
        )
        self.study_id = study_id
        self.confirm = confirm

"""Persistence of studies and trials (SQLAlchemy 2 only: importable by the Ray driver without FastAPI).

Use one `session_scope(engine)` per unit of work (`readonly=True` when it only reads) and the
keyword-only functions below; they return frozen value objects, never ORM rows.
"""

from service.store._studies import (
    create_study,
    get_study,
    list_studies,
    set_study_runtime,
    set_study_status,
    study_progress,
)
from service.store._trials import list_trials, record_trial
from service.store.engine import make_engine, normalize_database_url, read_only, session_scope
from service.store.errors import (
    InvalidStatusTransitionError,
    InvalidTrialError,
    StoreError,
    StudyNotFoundError,
    TrialKeyConflictError,
)
from service.store.migrate import upgrade_database
from service.store.status import ALLOWED_TRANSITIONS, TERMINAL_STATUSES, Phase, StudyStatus, TrialStatus
from service.store.tables import Base, Study, Trial
from service.store.views import StudyProgress, StudyView, TrialView

__all__ = [
    "ALLOWED_TRANSITIONS",
    "TERMINAL_STATUSES",
    "Base",
    "InvalidStatusTransitionError",
    "InvalidTrialError",
    "Phase",
    "StoreError",
    "Study",
    "StudyNotFoundError",
    "StudyProgress",
    "StudyStatus",
    "StudyView",
    "Trial",
    "TrialKeyConflictError",
    "TrialStatus",
    "TrialView",
    "create_study",
    "get_study",
    "list_studies",
    "list_trials",
    "make_engine",
    "normalize_database_url",
    "read_only",
    "record_trial",
    "session_scope",
    "set_study_runtime",
    "set_study_status",
    "study_progress",
    "upgrade_database",
]

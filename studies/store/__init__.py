"""Persistence of studies (with their driver attempts and failed submissions), trials, per-epoch trial
histories (a study's trials with theirs: what its page's charts draw), the looks of sequential studies and
the tags of studies, and how each study's trials were planned (SQLAlchemy 2 only: importable by the Ray driver without FastAPI). An ended study can
be deleted with everything stored about it.

Use one `session_scope(engine)` per unit of work (`readonly=True` when it only reads) and the
keyword-only functions below; they return frozen value objects (histories: plain dicts), never ORM rows.
"""

from studies.store._attempts import end_attempt, record_attempt, record_submit_failure
from studies.store._curves import StudyCurves, TrialCurve, study_curves
from studies.store._delete import delete_study
from studies.store._epochs import record_trial_epoch, study_histories, trial_history
from studies.store._extensions import extension_records, records_of_studies
from studies.store._looks import record_look, sequential_summary, study_looks, study_sequential
from studies.store._notifications import mark_announced, studies_to_announce
from studies.store._studies import (
    create_study,
    create_study_once,
    get_study,
    list_studies,
    list_studies_with_open_mlflow_runs,
    mark_mlflow_closed,
    set_study_runtime,
    set_study_status,
    study_progress,
)
from studies.store._tags import (
    MAX_TAG_LENGTH,
    MAX_TAGS,
    TAG_PATTERN,
    add_tags,
    check_tags,
    list_tags,
    remove_tags,
    set_tags,
    tag_problem,
)
from studies.store._trial_plans import (
    StoredTrialPlan,
    set_study_trial_plan,
    spec_fields_set,
    study_trial_plan,
)
from studies.store._trials import fill_trial_mlflow_run, list_trials, record_trial
from studies.store.engine import make_engine, normalize_database_url, read_only, session_scope
from studies.store.errors import (
    DeletionNotConfirmedError,
    IdempotencyKeyReusedError,
    InvalidLookError,
    InvalidStatusTransitionError,
    InvalidTagError,
    InvalidTrialError,
    LookConflictError,
    StoreError,
    StudyNotDeletableError,
    StudyNotFoundError,
    TrialKeyConflictError,
    TrialNotFoundError,
)
from studies.store.migrate import upgrade_database
from studies.store.status import ALLOWED_TRANSITIONS, TERMINAL_STATUSES, Phase, StudyStatus, TrialStatus
from studies.store.tables import (
    Base,
    Study,
    StudyAttempt,
    StudyLook,
    StudySubmitFailure,
    StudyTag,
    StudyTrialPlan,
    Trial,
    TrialEpoch,
)
from studies.store.views import (
    AttemptView,
    DeletedStudy,
    StudyProgress,
    StudyView,
    SubmitFailureView,
    TrialView,
)

__all__ = [
    "ALLOWED_TRANSITIONS",
    "MAX_TAGS",
    "MAX_TAG_LENGTH",
    "TAG_PATTERN",
    "TERMINAL_STATUSES",
    "AttemptView",
    "Base",
    "DeletedStudy",
    "DeletionNotConfirmedError",
    "IdempotencyKeyReusedError",
    "InvalidLookError",
    "InvalidStatusTransitionError",
    "InvalidTagError",
    "InvalidTrialError",
    "LookConflictError",
    "Phase",
    "StoreError",
    "StoredTrialPlan",
    "Study",
    "StudyAttempt",
    "StudyCurves",
    "StudyLook",
    "StudyNotDeletableError",
    "StudyNotFoundError",
    "StudyProgress",
    "StudyStatus",
    "StudySubmitFailure",
    "StudyTag",
    "StudyTrialPlan",
    "StudyView",
    "SubmitFailureView",
    "Trial",
    "TrialCurve",
    "TrialEpoch",
    "TrialKeyConflictError",
    "TrialNotFoundError",
    "TrialStatus",
    "TrialView",
    "add_tags",
    "check_tags",
    "create_study",
    "create_study_once",
    "delete_study",
    "end_attempt",
    "extension_records",
    "fill_trial_mlflow_run",
    "get_study",
    "list_studies",
    "list_studies_with_open_mlflow_runs",
    "list_tags",
    "list_trials",
    "make_engine",
    "mark_announced",
    "mark_mlflow_closed",
    "normalize_database_url",
    "read_only",
    "record_attempt",
    "record_look",
    "record_submit_failure",
    "record_trial",
    "record_trial_epoch",
    "records_of_studies",
    "remove_tags",
    "sequential_summary",
    "session_scope",
    "set_study_runtime",
    "set_study_status",
    "set_study_trial_plan",
    "set_tags",
    "spec_fields_set",
    "studies_to_announce",
    "study_curves",
    "study_histories",
    "study_looks",
    "study_progress",
    "study_sequential",
    "study_trial_plan",
    "tag_problem",
    "trial_history",
    "upgrade_database",
]

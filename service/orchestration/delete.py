"""Deleting an ended study, the part after the store: marking its MLflow runs.

The rows go first, in one transaction (studies.store.delete_study), and the answer says so; the study's
MLflow parent run is then tagged `normlab.deleted=true` (service.orchestration.study_runs), best-effort:
an MLflow that is down or refuses never blocks or undoes a deletion, it is logged. Nothing in MLflow is
deleted: what the study logged stays there for whoever reads it.
"""

from __future__ import annotations

import logging

from service.orchestration.study_runs import DELETED_TAG, StudyRuns
from studies.store import DeletedStudy

__all__ = ["mark_runs_deleted"]

log = logging.getLogger(__name__)


def mark_runs_deleted(runs: StudyRuns, deleted: DeletedStudy) -> str | None:
    """Tag the deleted study's parent run; returns the run tagged, None when there was none or MLflow did
    not take the tag (logged as a warning: the deletion stands either way)."""
    try:
        return runs.mark_deleted(
            study_id=deleted.id,
            experiment_id=deleted.mlflow_experiment_id,
            parent_run_id=deleted.mlflow_parent_run_id,
        )
    except Exception as exc:  # any failure of MLflow's: the store's deletion is done and stays done
        run = deleted.mlflow_parent_run_id or f"of experiment {deleted.mlflow_experiment_id}"
        log.warning(
            "study %s was deleted, but its MLflow parent run %s could not be tagged %s=true (%s: %s); "
            "its runs stay in MLflow, unmarked",
            deleted.id,
            run,
            DELETED_TAG,
            type(exc).__name__,
            exc,
        )
        return None

"""The MLflow runs of an ended study: none may stay RUNNING, and a deleted study's are marked as such.

A driver that was killed, crashed or was cancelled cannot close its parent run, and its trials' processes
die with it, leaving their child runs RUNNING forever. The reconcile loop closes them here once the study
has ended: FAILED for a failed study, KILLED for a cancelled one; a succeeded study's driver closed its own
runs, so what is left there belongs to a driver attempt that died (KILLED; its parent run FINISHED).

A study deleted from the store keeps its runs in MLflow (what it logged stays for whoever reads it there);
its parent run is tagged `normlab.deleted=true`, so the MLflow UI tells them from a live study's.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from service.stack.probe import Answer, is_http_url, mlflow_answer
from studies.store.status import StudyStatus

if TYPE_CHECKING:  # mlflow is imported only when runs are closed: the API starts without it
    from mlflow.entities import Run
    from mlflow.tracking import MlflowClient

__all__ = ["DELETED_TAG", "MlflowUnavailableError", "StudyRuns", "closing_status"]

log = logging.getLogger(__name__)

STUDY_ID_TAG = "normlab.study_id"  # on the parent run and on every trial's child run
ROLE_TAG = "normlab.role"  # "parent" on the study's parent run
DELETED_TAG = "normlab.deleted"  # "true" on the parent run of a study deleted from the store

# Study status -> MLflow run status (MLflow's own vocabulary) of a run the study left RUNNING.
_CHILD_STATUS = {
    StudyStatus.SUCCEEDED: "KILLED",
    StudyStatus.FAILED: "FAILED",
    StudyStatus.CANCELLED: "KILLED",
}
_PARENT_STATUS = {
    StudyStatus.SUCCEEDED: "FINISHED",
    StudyStatus.FAILED: "FAILED",
    StudyStatus.CANCELLED: "KILLED",
}


class MlflowUnavailableError(RuntimeError):
    """The tracking server did not answer; the runs stay as they are until the next try."""


def closing_status(study_status: StudyStatus | str, *, parent: bool) -> str:
    """The MLflow status a RUNNING run of a study that ended `study_status` is closed with."""
    table = _PARENT_STATUS if parent else _CHILD_STATUS
    try:
        return table[StudyStatus(study_status)]
    except (KeyError, ValueError):
        raise ValueError(f"a {study_status} study has not ended: its runs are not closed") from None


@dataclass(frozen=True)
class StudyRuns:
    """Closes the RUNNING runs of ended studies on the MLflow server at `tracking_uri`."""

    tracking_uri: str

    def close(self, *, study_id: str, experiment_id: str, study_status: str) -> dict[str, str]:
        """Close every RUNNING run of the study in its experiment; returns {run id: status it got}.

        Raises MlflowUnavailableError when the server does not answer, so the reconcile loop tries again
        later without waiting out the MLflow client's own retries.
        """
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient

        if is_http_url(self.tracking_uri) and mlflow_answer(self.tracking_uri) is not Answer.UP:
            raise MlflowUnavailableError(f"no MLflow server answers at {self.tracking_uri}")
        if "'" in study_id or "\\" in study_id:
            raise ValueError(f"study id must not contain quotes or backslashes: {study_id!r}")
        client = MlflowClient(self.tracking_uri)
        try:
            running = _running_runs(client, study_id, experiment_id)
        except MlflowException as exc:
            if exc.error_code != "RESOURCE_DOES_NOT_EXIST":
                raise
            log.info("study %s: MLflow experiment %s is gone; no run to close", study_id, experiment_id)
            return {}
        closed: dict[str, str] = {}
        for run in running:  # listed first: closing while paging would shift the pages
            status = closing_status(study_status, parent=run.data.tags.get(ROLE_TAG) == "parent")
            client.set_terminated(run.info.run_id, status=status)
            closed[run.info.run_id] = status
        if closed:
            log.info(
                "study %s (%s): closed %d MLflow run(s) left RUNNING", study_id, study_status, len(closed)
            )
        return closed

    def mark_deleted(
        self, *, study_id: str, experiment_id: str | None, parent_run_id: str | None
    ) -> str | None:
        """Tag the deleted study's parent run `normlab.deleted=true`; nothing is deleted in MLflow. Returns
        the run tagged, None when the study has no parent run (its driver never made one).

        `parent_run_id` is the one the store kept; without it the parent run is looked up in the study's
        experiment by its tags (a driver that made it and died before recording it). Raises
        MlflowUnavailableError when the server does not answer, at once rather than after the client's
        retries.
        """
        from mlflow.tracking import MlflowClient

        if parent_run_id is None and experiment_id is None:
            return None
        if is_http_url(self.tracking_uri) and mlflow_answer(self.tracking_uri) is not Answer.UP:
            raise MlflowUnavailableError(f"no MLflow server answers at {self.tracking_uri}")
        client = MlflowClient(self.tracking_uri)
        if parent_run_id is None:
            parent_run_id = _parent_run_id(client, study_id, experiment_id)
            if parent_run_id is None:
                return None
        client.set_tag(parent_run_id, DELETED_TAG, "true")
        log.info(
            "study %s deleted: its MLflow parent run %s is tagged %s", study_id, parent_run_id, DELETED_TAG
        )
        return parent_run_id


def _parent_run_id(client: MlflowClient, study_id: str, experiment_id: str | None) -> str | None:
    from mlflow.entities import ViewType

    if experiment_id is None or "'" in study_id or "\\" in study_id:
        return None
    runs = client.search_runs(
        [experiment_id],
        filter_string=f"tags.`{STUDY_ID_TAG}` = '{study_id}' and tags.`{ROLE_TAG}` = 'parent'",
        run_view_type=ViewType.ALL,
        max_results=1,
    )
    return runs[0].info.run_id if runs else None


def _running_runs(client: MlflowClient, study_id: str, experiment_id: str) -> list[Run]:
    from mlflow.entities import ViewType

    runs: list[Run] = []
    page_token = None
    while True:
        page = client.search_runs(
            [experiment_id],
            filter_string=f"tags.`{STUDY_ID_TAG}` = '{study_id}' and attributes.status = 'RUNNING'",
            run_view_type=ViewType.ALL,
            max_results=1000,
            page_token=page_token,
        )
        runs.extend(page)
        page_token = page.token
        if not page_token:
            return runs

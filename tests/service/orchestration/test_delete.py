"""Marking a deleted study's MLflow runs is best-effort: whatever MLflow does, the caller gets an answer
(the run tagged, or None) and a failure is a warning in the log, never an error."""

from __future__ import annotations

import logging

import pytest

from service.orchestration.delete import mark_runs_deleted
from service.orchestration.study_runs import MlflowUnavailableError
from studies.store import DeletedStudy

DELETED = DeletedStudy(
    id="s1",
    name="n",
    dataset="digits",
    status="succeeded",
    mlflow_experiment_id="7",
    mlflow_parent_run_id="parent-1",
    rows={"studies": 1},
)


class Runs:
    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.asked: list[dict] = []

    def mark_deleted(self, **study) -> str | None:
        self.asked.append(study)
        if self.error is not None:
            raise self.error
        return study["parent_run_id"]


def test_the_parent_run_the_store_kept_is_the_one_marked():
    runs = Runs()
    assert mark_runs_deleted(runs, DELETED) == "parent-1"
    assert runs.asked == [{"study_id": "s1", "experiment_id": "7", "parent_run_id": "parent-1"}]


@pytest.mark.parametrize(
    "error",
    [
        MlflowUnavailableError("no MLflow server answers"),
        PermissionError("403 from MLflow"),
        RuntimeError("?"),
    ],
)
def test_any_mlflow_failure_is_a_warning_naming_the_study_and_its_run(caplog, error):
    with caplog.at_level(logging.WARNING, logger="service.orchestration.delete"):
        assert mark_runs_deleted(Runs(error), DELETED) is None
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert "study s1 was deleted" in record.getMessage() and "parent-1" in record.getMessage()
    assert str(error) in record.getMessage()

"""Closing an ended study's MLflow runs, and marking a deleted study's, against a real MLflow tracking store
(SQLite, no server)."""

from __future__ import annotations

import time

import pytest
from mlflow.tracking import MlflowClient

from service.orchestration.study_runs import MlflowUnavailableError, StudyRuns, closing_status
from service.stack.processes import free_port


@pytest.fixture(scope="module")
def tracking_uri(tmp_path_factory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"


@pytest.fixture
def study(tracking_uri, request):
    """An experiment like a killed driver leaves it: its parent and one trial's run still RUNNING, a trial
    that finished, and a run of another study in the same experiment."""
    client = MlflowClient(tracking_uri)
    study_id = f"s{abs(hash(request.node.name)):x}{time.monotonic_ns()}"
    experiment_id = client.create_experiment(f"normlab/test/{study_id}")

    def run(study_of: str, **tags: str) -> str:
        return client.create_run(experiment_id, tags={"normlab.study_id": study_of, **tags}).info.run_id

    runs = {
        "parent": run(study_id, **{"normlab.role": "parent"}),
        "cut": run(study_id, **{"normlab.trial_key": f"{study_id}/final/dyt/seed0"}),
        "finished": run(study_id, **{"normlab.trial_key": f"{study_id}/final/dyt/seed1"}),
        "other": run("another-study"),
    }
    client.set_terminated(runs["finished"], status="FINISHED")
    return client, study_id, experiment_id, runs


def _statuses(client, runs) -> dict[str, str]:
    return {name: client.get_run(run_id).info.status for name, run_id in runs.items()}


def test_a_cancelled_studys_running_runs_are_killed_and_nothing_else_is_touched(tracking_uri, study):
    client, study_id, experiment_id, runs = study
    closed = StudyRuns(tracking_uri).close(
        study_id=study_id, experiment_id=experiment_id, study_status="cancelled"
    )
    assert closed == {runs["parent"]: "KILLED", runs["cut"]: "KILLED"}
    assert _statuses(client, runs) == {
        "parent": "KILLED",
        "cut": "KILLED",
        "finished": "FINISHED",
        "other": "RUNNING",
    }


def test_a_failed_studys_runs_end_failed_and_closing_again_changes_nothing(tracking_uri, study):
    client, study_id, experiment_id, runs = study
    closer = StudyRuns(tracking_uri)
    closer.close(study_id=study_id, experiment_id=experiment_id, study_status="failed")
    assert closer.close(study_id=study_id, experiment_id=experiment_id, study_status="failed") == {}
    assert _statuses(client, runs)["parent"] == _statuses(client, runs)["cut"] == "FAILED"


def test_a_succeeded_studys_leftover_trial_run_is_killed_and_its_parent_finished(tracking_uri, study):
    client, study_id, experiment_id, runs = study
    StudyRuns(tracking_uri).close(study_id=study_id, experiment_id=experiment_id, study_status="succeeded")
    assert _statuses(client, runs)["parent"] == "FINISHED"
    assert _statuses(client, runs)["cut"] == "KILLED"


def test_an_experiment_that_is_gone_has_nothing_to_close(tracking_uri):
    assert StudyRuns(tracking_uri).close(study_id="x", experiment_id="987654", study_status="failed") == {}


def test_an_unreachable_server_is_reported_at_once_instead_of_retried():
    closer = StudyRuns(f"http://127.0.0.1:{free_port()}")
    started = time.monotonic()
    with pytest.raises(MlflowUnavailableError):
        closer.close(study_id="x", experiment_id="1", study_status="failed")
    assert time.monotonic() - started < 10


def test_only_ended_studies_have_a_closing_status():
    assert closing_status("cancelled", parent=False) == "KILLED"
    with pytest.raises(ValueError, match="not ended"):
        closing_status("running", parent=True)


# ------------------------------------------------------------------------------- a deleted study's runs


def test_a_deleted_studys_parent_run_is_tagged_and_every_run_is_kept(tracking_uri, study):
    client, study_id, experiment_id, runs = study
    marked = StudyRuns(tracking_uri).mark_deleted(
        study_id=study_id, experiment_id=experiment_id, parent_run_id=runs["parent"]
    )
    assert marked == runs["parent"]
    assert client.get_run(runs["parent"]).data.tags["normlab.deleted"] == "true"
    assert "normlab.deleted" not in client.get_run(runs["cut"]).data.tags  # only the parent is marked
    assert {client.get_run(r).info.lifecycle_stage for r in runs.values()} == {"active"}  # nothing deleted


def test_a_parent_run_the_store_never_recorded_is_found_by_its_tags(tracking_uri, study):
    client, study_id, experiment_id, runs = study
    marked = StudyRuns(tracking_uri).mark_deleted(
        study_id=study_id, experiment_id=experiment_id, parent_run_id=None
    )
    assert marked == runs["parent"]
    assert client.get_run(runs["parent"]).data.tags["normlab.deleted"] == "true"


def test_a_study_that_never_reached_mlflow_has_nothing_to_mark(tracking_uri):
    assert StudyRuns(tracking_uri).mark_deleted(study_id="x", experiment_id=None, parent_run_id=None) is None


def test_marking_on_an_unreachable_server_is_reported_at_once():
    runs = StudyRuns(f"http://127.0.0.1:{free_port()}")
    started = time.monotonic()
    with pytest.raises(MlflowUnavailableError):
        runs.mark_deleted(study_id="x", experiment_id="1", parent_run_id="r")
    assert time.monotonic() - started < 10

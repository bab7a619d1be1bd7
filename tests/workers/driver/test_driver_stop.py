"""A study's driver stopped at any moment (Ray's cancel: SIGTERM, raised as SystemExit by the driver's handler)
leaves no MLflow run RUNNING that its own `finally` or the reconcile loop does not close: the study's
experiment is in the database before any run exists in it, and a parent run the driver made is closed
KILLED by the driver itself. Against the real tracking server; Ray and the sweeps themselves stand aside.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from mlflow.entities import ViewType
from mlflow.tracking import MlflowClient

from service.orchestration.study_runs import StudyRuns
from studies.spec import StudySpec
from studies.store import (
    StudyStatus,
    get_study,
    list_trials,
    make_engine,
    session_scope,
    set_study_status,
    upgrade_database,
)
from tests.factories import add_study, add_trial, digits_spec
from workers.driver import study as driver_study
from workers.driver.finalize import fill_missing_run_ids
from workers.driver.parent_run import experiment_name

SPEC = digits_spec(name="stopped")
SIGTERM_EXIT = 128 + 15  # what workers.driver.__main__'s SIGTERM handler raises


class StoppingClient:
    """An MlflowClient whose `stop_at`-th request raises SystemExit, as SIGTERM does in the driver: before
    the request (`after=False`) or once MLflow has carried it out but before the driver sees the answer."""

    def __init__(self, tracking_uri: str, *, stop_at: int | None = None, after: bool = False) -> None:
        self._client = MlflowClient(tracking_uri)
        self.stop_at, self.after, self.requests = stop_at, after, 0

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if not callable(attribute):
            return attribute

        def request(*args: Any, **kwargs: Any) -> Any:
            self.requests += 1
            stop = self.requests == self.stop_at
            if stop and not self.after:
                raise SystemExit(SIGTERM_EXIT)
            answer = attribute(*args, **kwargs)
            if stop:
                raise SystemExit(SIGTERM_EXIT)
            return answer

        return request


@pytest.fixture
def ctx(tmp_path, mlflow_server) -> Iterator[driver_study.DriverContext]:
    url = f"sqlite:///{tmp_path / 'normlab.db'}"
    upgrade_database(url)
    engine = make_engine(url)
    yield driver_study.DriverContext(
        engine=engine, database_url=url, mlflow_tracking_uri=mlflow_server, results_dir=tmp_path / "ray"
    )
    engine.dispose()


@pytest.fixture
def driver(monkeypatch, ctx) -> Callable[[StoppingClient], str]:
    """Runs a new study's driver with `client` up to its sweeps (one MLflow request stands for them) and
    returns the study id; Ray is not started."""
    monkeypatch.setattr(driver_study.ray, "is_initialized", lambda: True)
    monkeypatch.setattr(driver_study, "warm_trial_hosts_for_study", lambda **kwargs: None)

    def sweeps(study_id, spec, ctx, *, client, parent) -> None:
        client.set_tag(parent.run_id, "normlab.trial_plan", "stands in for the sweeps")

    monkeypatch.setattr(driver_study, "_run_sweeps", sweeps)

    def run(client: StoppingClient) -> str:
        monkeypatch.setattr(driver_study, "MlflowClient", lambda uri: client)
        study_id = add_study(ctx.engine, SPEC).id
        try:
            driver_study.run_study(study_id, ctx)
        except SystemExit as stop:
            assert stop.code == SIGTERM_EXIT
        return study_id

    return run


def _cancel_as_the_service_does(ctx: driver_study.DriverContext, study_id: str) -> None:
    """The API marks the study cancelled; once its driver has ended, the reconcile loop closes the RUNNING
    runs of the experiment the database names (service.orchestration.reconcile, service.orchestration.study_runs)."""
    with session_scope(ctx.engine) as session:
        if get_study(session, study_id=study_id).status == StudyStatus.RUNNING:
            set_study_status(session, study_id=study_id, status=StudyStatus.CANCELLED)
        study = get_study(session, study_id=study_id)
    if study.mlflow_experiment_id is not None:
        StudyRuns(ctx.mlflow_tracking_uri).close(
            study_id=study_id, experiment_id=study.mlflow_experiment_id, study_status=study.status
        )


def _study_runs(ctx: driver_study.DriverContext, study_id: str) -> list[tuple[str, str]]:
    """(role, status) of every MLflow run of the study, found by its experiment's name, not the database."""
    client = MlflowClient(ctx.mlflow_tracking_uri)
    experiment = client.get_experiment_by_name(experiment_name(SPEC["name"], study_id))
    if experiment is None:
        return []
    runs = client.search_runs([experiment.experiment_id], run_view_type=ViewType.ALL)
    return [(r.data.tags.get("normlab.role", "trial"), r.info.status) for r in runs]


def test_a_driver_that_is_not_stopped_records_its_runs_and_closes_its_parent(driver, ctx):
    client = StoppingClient(ctx.mlflow_tracking_uri)
    study_id = driver(client)
    with session_scope(ctx.engine) as session:
        study = get_study(session, study_id=study_id)
    assert study.status == "succeeded" and study.mlflow_experiment_id and study.mlflow_parent_run_id
    assert _study_runs(ctx, study_id) == [("parent", "FINISHED")]
    assert client.requests >= 8  # the sweep below stops the driver at each of them


def test_a_study_cancelled_at_any_moment_of_its_driver_leaves_no_running_mlflow_run(driver, ctx):
    requests = StoppingClient(ctx.mlflow_tracking_uri)
    driver(requests)
    left_running = []
    for stop_at in range(1, requests.requests + 1):
        for after in (False, True):
            study_id = driver(StoppingClient(ctx.mlflow_tracking_uri, stop_at=stop_at, after=after))
            _cancel_as_the_service_does(ctx, study_id)
            runs = _study_runs(ctx, study_id)
            if ("parent", "RUNNING") in runs:
                left_running.append((stop_at, "after" if after else "before", runs))
    assert left_running == []


def test_a_driver_stopped_while_it_describes_its_new_parent_run_closes_that_run_killed(driver, ctx):
    # The 7th request is the parent run's log_batch (experiment lookup and creation, parent run search
    # and creation, two log_dict): the run exists, the driver does not hold it yet.
    study_id = driver(StoppingClient(ctx.mlflow_tracking_uri, stop_at=7))
    assert _study_runs(ctx, study_id) == [("parent", "KILLED")]
    with session_scope(ctx.engine, readonly=True) as session:
        assert get_study(session, study_id=study_id).mlflow_experiment_id is not None


def test_the_experiment_is_in_the_database_before_the_driver_creates_a_run_in_it(ctx):
    seen: list[str | None] = []

    class Watching(MlflowClient):
        def create_run(self, experiment_id, *args, **kwargs):
            with session_scope(ctx.engine, readonly=True) as session:
                seen.append(get_study(session, study_id=study_id).mlflow_experiment_id)
            assert seen[-1] == experiment_id
            return super().create_run(experiment_id, *args, **kwargs)

    study_id = add_study(ctx.engine, SPEC).id
    parent = driver_study.open_parent_run(
        Watching(ctx.mlflow_tracking_uri), study_id, StudySpec.model_validate(SPEC), ctx
    )
    assert seen == [parent.experiment_id]


# ---------------------------------------------------------------- run ids of trials lost with a driver


def _trial_row(ctx, study_id: str, key: str, run_id: str | None) -> None:
    lost = run_id is None
    add_trial(
        ctx.engine,
        study_id,
        key,
        phase="tune",
        status="cancelled" if lost else "succeeded",
        metric_value=None if lost else 0.9,
        mlflow_run_id=run_id,
        error="the study's driver died (attempt 1: killed)" if lost else None,
    )


def test_a_trial_lost_before_its_first_epoch_gets_its_run_id_when_the_next_driver_ends(ctx):
    client = MlflowClient(ctx.mlflow_tracking_uri)
    experiment_id = client.create_experiment(f"lost-{uuid.uuid4().hex[:8]}")
    study_id = add_study(ctx.engine, SPEC).id
    lost, kept = f"{study_id}/tune/dyt/t1", f"{study_id}/tune/dyt/t2"
    lost_run = client.create_run(experiment_id, tags={"normlab.trial_key": lost}).info.run_id
    client.set_terminated(lost_run, status="KILLED")  # its warm host stopped it
    _trial_row(ctx, study_id, lost, None)
    _trial_row(ctx, study_id, kept, "run-kept")
    _trial_row(ctx, study_id, f"{study_id}/tune/dyt/t3", None)  # no run in MLflow: stays without one

    assert fill_missing_run_ids(client, experiment_id, engine=ctx.engine, study_id=study_id) == 1
    with session_scope(ctx.engine, readonly=True) as session:
        ids = {t.trial_key: t.mlflow_run_id for t in list_trials(session, study_id=study_id)}
    assert ids == {lost: lost_run, kept: "run-kept", f"{study_id}/tune/dyt/t3": None}


def test_filling_run_ids_while_mlflow_is_down_is_a_warning(ctx, caplog, monkeypatch):
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # refused at once, not after minutes
    study_id = add_study(ctx.engine, SPEC).id
    _trial_row(ctx, study_id, f"{study_id}/tune/dyt/t1", None)
    down = MlflowClient("http://127.0.0.1:9")
    assert fill_missing_run_ids(down, "1", engine=ctx.engine, study_id=study_id) == 0
    assert "could not give the trials" in caplog.text

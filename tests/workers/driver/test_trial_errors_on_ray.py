"""A trial that raises, run by a real Ray Tune with the study's callbacks and a real MLflow server: its row
holds the exception's type, message and the last lines of its trace, and its MLflow run the same text as
its `normlab.error` tag (Trial.get_error, read at the callback before, found nothing: every failed trial
said "no error recorded")."""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient
from ray import tune

from studies.store import list_trials, make_engine, session_scope, upgrade_database
from tests.factories import add_study, digits_spec
from workers.driver.recorder import study_callbacks
from workers.tracking.runs import ERROR_TAG, TRIAL_KEY_TAG, get_or_create_trial_run


def _allocate(dim: int) -> None:
    raise RuntimeError(f"CUDA out of memory. Tried to allocate {dim**2 * 4 / 2**40:.2f} TiB")


def _failing_trainable(config: dict) -> None:
    tune.report({"epoch": 0, "objective": 0.0})
    _allocate(1_000_000)


@pytest.mark.slow  # a Ray cluster and an MLflow server: ~40 s on 2 cores
def test_a_failing_trial_records_its_exception_in_its_row_and_mlflow_run(
    tmp_path, ray_cluster, mlflow_server
):
    url = f"sqlite:///{tmp_path / 'normlab.db'}"
    upgrade_database(url)
    engine = make_engine(url)
    study_id = add_study(engine, digits_spec(name="failing")).id
    trial_key = f"{study_id}/final/dyt/seed0"
    client = MlflowClient(mlflow_server)
    experiment_id = client.create_experiment(f"failing-{study_id}")
    run, _ = get_or_create_trial_run(client, experiment_id, trial_key, {TRIAL_KEY_TAG: trial_key})

    tuner = tune.Tuner(
        _failing_trainable,
        param_space={
            "study_id": study_id,
            "phase": "final",
            "variant": {"method": "dyt", "seed": 0, "knobs": {}},
        },
        run_config=tune.RunConfig(
            storage_path=str(tmp_path / "ray_results"),
            callbacks=study_callbacks(
                url, metric_key="test_accuracy", tracking_uri=mlflow_server, experiment_id=experiment_id
            ),
            verbose=0,
        ),
    )
    tuner.fit()

    with session_scope(engine, readonly=True) as session:
        [row] = list_trials(session, study_id=study_id)
    assert row.status == "failed"
    headline, trace = row.error.split("\n", 1)
    assert headline == "RuntimeError: CUDA out of memory. Tried to allocate 3.64 TiB"
    assert "in _allocate" in trace and "raise RuntimeError" in trace
    assert client.get_run(run.info.run_id).data.tags[ERROR_TAG] == row.error

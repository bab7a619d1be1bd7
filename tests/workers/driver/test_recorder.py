"""The Tune callback writes each trial to the study database as it starts, finishes or fails."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pytest
import ray.cloudpickle as cloudpickle

from service.store import create_study, list_trials, make_engine, session_scope, upgrade_database
from workers.driver.recorder import TrialRecorder, numeric_metrics

SPEC = {
    "name": "recorder",
    "dataset": "digits",
    "model": "vit_lite_tiny",
    "methods": ["frozen_ln", "dyt"],
    "seeds": [0, 1],
    "budget": {"epochs": 1, "batch_size": 64},
}


@dataclass
class FakeTrial:
    """The three attributes of ray.tune.experiment.Trial the recorder reads (unit test of one module)."""

    config: dict[str, Any]
    trial_id: str = "t_00001"
    last_result: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def get_error(self):
        return self.error


@pytest.fixture
def database(tmp_path):
    url = f"sqlite:///{tmp_path / 'normlab.db'}"
    upgrade_database(url)
    engine = make_engine(url)
    with session_scope(engine) as session:
        study_id = create_study(session, spec=SPEC).id
    return url, engine, study_id


def _final_config(study_id: str, seed: int = 0) -> dict[str, Any]:
    return {
        "study_id": study_id,
        "phase": "final",
        "mlflow_tracking_uri": "http://127.0.0.1:9",
        "num_threads": 1,
        "variant": {"method": "dyt", "seed": seed, "knobs": {"lr": 0.005}},
    }


def _recorder(url: str) -> TrialRecorder:
    return TrialRecorder(url, metric_key="test_accuracy", tracking_uri=None, experiment_id="0")


def test_a_finished_trial_is_stored_with_its_metric_config_and_stable_key(database):
    url, engine, study_id = database
    trial = FakeTrial(
        _final_config(study_id, seed=1), last_result={"test_accuracy": 0.8, "epoch": 1, "config": {}}
    )
    _recorder(url).on_trial_complete(0, [], trial)
    with session_scope(engine) as session:
        [stored] = list_trials(session, study_id=study_id)
    assert stored.trial_key == f"{study_id}/final/dyt/seed1"
    assert (stored.status, stored.metric_value, stored.seed, stored.method) == ("succeeded", 0.8, 1, "dyt")
    assert stored.config["knobs"] == {"lr": 0.005}
    # Where the trial ran is not part of what it is.
    assert "mlflow_tracking_uri" not in stored.config and "num_threads" not in stored.config


def test_recording_the_same_trial_twice_keeps_one_row(database):
    url, engine, study_id = database
    recorder = _recorder(url)
    trial = FakeTrial(_final_config(study_id), last_result={"test_accuracy": 0.5})
    recorder.on_trial_start(0, [], trial)
    recorder.on_trial_complete(0, [], trial)
    recorder.on_trial_complete(0, [], trial)
    with session_scope(engine) as session:
        trials = list_trials(session, study_id=study_id)
    assert [t.status for t in trials] == ["succeeded"]


def test_a_trial_that_finishes_without_its_metric_is_recorded_as_failed_with_the_reason(database):
    url, engine, study_id = database
    _recorder(url).on_trial_complete(0, [], FakeTrial(_final_config(study_id), last_result={"epoch": 3}))
    with session_scope(engine) as session:
        [stored] = list_trials(session, study_id=study_id)
    assert stored.status == "failed" and "test_accuracy" in stored.error


def test_an_errored_trial_keeps_its_error_text(database):
    url, engine, study_id = database
    trial = FakeTrial(_final_config(study_id), error="RuntimeError: CUDA out of memory")
    _recorder(url).on_trial_error(0, [], trial)
    with session_scope(engine) as session:
        [stored] = list_trials(session, study_id=study_id)
    assert stored.status == "failed" and "out of memory" in stored.error and stored.metric_value is None


def test_the_recorder_survives_the_pickling_tune_does_with_experiment_state(database):
    url, engine, study_id = database
    recorder = _recorder(url)
    assert recorder.engine is not None  # opened once: it must not travel inside the pickle
    restored = cloudpickle.loads(cloudpickle.dumps(recorder))
    restored.on_trial_complete(0, [], FakeTrial(_final_config(study_id), last_result={"test_accuracy": 0.7}))
    with session_scope(engine) as session:
        assert len(list_trials(session, study_id=study_id)) == 1


def test_only_finite_numbers_of_a_tune_result_count_as_metrics():
    result = {
        "loss": 0.5,
        "epoch": 2,
        "done": True,
        "nan": math.nan,
        "node_ip": "127.0.0.1",
        "config": {"a": 1},
    }
    assert numeric_metrics(result) == {"loss": 0.5, "epoch": 2.0, "done": 1.0}

"""The Tune callback writes each trial to the study database as it starts, reports an epoch, finishes or fails."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
import ray.cloudpickle as cloudpickle

from studies.store import (
    list_trials,
    make_engine,
    session_scope,
    study_histories,
    trial_history,
    upgrade_database,
)
from tests.factories import add_study, digits_spec
from workers.driver import recorder as recorder_module
from workers.driver.recorder import TrialRecorder, numeric_metrics, reported_metrics, seed_results

SPEC = digits_spec(name="recorder")


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
    study_id = add_study(engine, SPEC).id
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


def _tune_result(epoch, **metrics):
    """A result as Tune hands it to callbacks: what the trial reported plus Tune's own bookkeeping."""
    return {
        "epoch": epoch,
        **metrics,
        "training_iteration": epoch + 1,
        "time_this_iter_s": 0.5,
        "timestamp": 1_700_000_000,
        "pid": 4242,
        "done": False,
        "trial_id": "t_00001",
        "node_ip": "127.0.0.1",
        "config": {"variant": {}},
    }


def test_every_reported_epoch_is_stored_with_what_the_trial_reported_and_no_tune_bookkeeping(database):
    url, engine, study_id = database
    recorder = _recorder(url)
    trial = FakeTrial(_final_config(study_id, seed=1))
    recorder.on_trial_start(0, [], trial)
    recorder.on_trial_result(0, [], trial, _tune_result(0, objective=0.1, init_erank_jacobian=0.8))
    recorder.on_trial_result(1, [], trial, _tune_result(1, objective=0.6, gate_dyt_weight_0=0.45))
    with session_scope(engine) as session:
        history = trial_history(session, study_id=study_id, trial_key=f"{study_id}/final/dyt/seed1")
    assert history == [
        {"epoch": 0, "objective": 0.1, "init_erank_jacobian": 0.8},
        {"epoch": 1, "objective": 0.6, "gate_dyt_weight_0": 0.45},
    ]


def test_an_epoch_re_reported_by_a_retried_trial_is_stored_once_with_the_new_values(database):
    url, engine, study_id = database
    recorder = _recorder(url)
    trial = FakeTrial(_final_config(study_id))
    recorder.on_trial_result(0, [], trial, _tune_result(1, objective=0.5))
    restored = cloudpickle.loads(cloudpickle.dumps(recorder))  # the driver restarted from Tune's state
    restored.on_trial_result(0, [], trial, _tune_result(1, objective=0.55))
    with session_scope(engine) as session:
        histories = study_histories(session, study_id=study_id)
    assert histories == {f"{study_id}/final/dyt/seed0": [{"epoch": 1, "objective": 0.55}]}


def test_a_result_without_an_integer_epoch_is_not_stored(database):
    url, engine, study_id = database
    recorder = _recorder(url)
    trial = FakeTrial(_final_config(study_id))
    recorder.on_trial_result(0, [], trial, {"objective": 0.5})
    recorder.on_trial_result(0, [], trial, {"epoch": 1.5, "objective": 0.5})
    recorder.on_trial_result(0, [], trial, {"epoch": math.nan, "objective": 0.5})
    recorder.on_trial_result(0, [], trial, {"epoch": True, "objective": 0.5})
    with session_scope(engine) as session:
        assert study_histories(session, study_id=study_id) == {}


def test_an_epoch_the_database_refuses_is_logged_and_the_sweep_goes_on(database, caplog):
    url, _engine, _study_id = database
    trial = FakeTrial(_final_config("f" * 32))  # a study the database does not have
    _recorder(url).on_trial_result(0, [], trial, _tune_result(1, objective=0.5))
    assert "could not record epoch 1" in caplog.text


def test_reported_metrics_drop_tune_bookkeeping_but_keep_the_epoch():
    assert reported_metrics(_tune_result(2, objective=0.7, gates_frozen=True)) == {
        "epoch": 2.0,
        "objective": 0.7,
        "gates_frozen": 1.0,
    }


def test_one_experiment_running_both_phases_records_each_trial_by_its_phases_metric(database):
    url, engine, study_id = database
    recorder = TrialRecorder(
        url, metric_key={"tune": "objective", "final": "test_accuracy"}, tracking_uri=None, experiment_id="0"
    )
    tuning = {"study_id": study_id, "phase": "tune", "method": "dyt", "seed": 3, "knobs": {"lr": 0.01}}
    result = {"objective": 0.6, "test_accuracy": 0.9, "epoch": 1}
    recorder.on_trial_complete(0, [], FakeTrial(tuning, trial_id="tune_1", last_result=result))
    recorder.on_trial_complete(0, [], FakeTrial(_final_config(study_id), last_result=result))
    with session_scope(engine) as session:
        stored = {t.phase: t.metric_value for t in list_trials(session, study_id=study_id)}
    assert stored == {"tune": 0.6, "final": 0.9}


def _seed_batch_config(study_id: str, seeds: list[int]) -> dict[str, Any]:
    config = _final_config(study_id, seed=seeds[0])
    config["variant"]["seeds"] = seeds
    return config


def test_a_seed_batched_trial_is_stored_as_one_row_per_seed_with_that_seeds_own_metric(database):
    url, engine, study_id = database
    result = {
        "epoch": 1,
        "test_accuracy": 0.75,  # the across-seed mean: never stored as a trial
        "per_seed": {"0": {"epoch": 1, "test_accuracy": 0.7}, "1": {"epoch": 1, "test_accuracy": 0.8}},
    }
    trial = FakeTrial(_seed_batch_config(study_id, [0, 1]), last_result=result)
    recorder = _recorder(url)
    recorder.on_trial_result(0, [], trial, result)
    recorder.on_trial_complete(0, [], trial)
    with session_scope(engine) as session:
        stored = {t.trial_key: t for t in list_trials(session, study_id=study_id)}
        histories = {key: trial_history(session, study_id=study_id, trial_key=key) for key in stored}
    assert set(stored) == {f"{study_id}/final/dyt/seed0", f"{study_id}/final/dyt/seed1"}
    seed0, seed1 = stored[f"{study_id}/final/dyt/seed0"], stored[f"{study_id}/final/dyt/seed1"]
    assert (seed0.seed, seed0.metric_value, seed1.seed, seed1.metric_value) == (0, 0.7, 1, 0.8)
    assert seed0.config["seed"] == 0 and seed1.config["seed"] == 1 and "seeds" not in seed1.config
    assert histories[f"{study_id}/final/dyt/seed1"] == [{"epoch": 1, "test_accuracy": 0.8}]


def test_a_seed_batch_reads_each_seeds_part_also_from_tunes_flattened_columns():
    config = {"study_id": "s", "phase": "final", "method": "dyt", "seed": 3, "seeds": [3, 4]}
    flat = {"epoch": 2, "per_seed/3/objective": 0.1, "per_seed/4/objective": 0.2, "objective": 0.15}
    parts = seed_results(config, "t1", flat)
    assert [(seed, key, dict(part)) for seed, key, part in parts] == [
        (3, "s/final/dyt/seed3", {"objective": 0.1}),
        (4, "s/final/dyt/seed4", {"objective": 0.2}),
    ]


def test_a_seed_missing_from_a_batch_result_fails_alone_naming_the_metric(database):
    url, engine, study_id = database
    result = {"epoch": 1, "per_seed": {"0": {"epoch": 1, "test_accuracy": 0.7}}}
    _recorder(url).on_trial_complete(
        0, [], FakeTrial(_seed_batch_config(study_id, [0, 1]), last_result=result)
    )
    with session_scope(engine) as session:
        stored = {t.seed: t for t in list_trials(session, study_id=study_id)}
    assert stored[0].status == "succeeded"
    assert stored[1].status == "failed" and "test_accuracy" in stored[1].error


def test_a_study_logs_through_tunes_csv_and_json_loggers_and_its_log_is_spared_the_snapshot_warning(
    database, monkeypatch
):
    from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback

    from workers.driver.recorder import study_callbacks

    for name in (
        "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS",
        "TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S",
    ):
        monkeypatch.delenv(name, raising=False)
    url, _, _ = database
    callbacks = study_callbacks(
        url, metric_key="test_accuracy", tracking_uri="http://127.0.0.1:9", experiment_id="0"
    )
    assert [type(c) for c in callbacks] == [TrialRecorder, CSVLoggerCallback, JsonLoggerCallback]
    assert os.environ["TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"] == "1"  # no TensorBoard logger added behind them
    assert os.environ["TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S"] == "0"


def test_the_train_ahead_mark_is_not_part_of_a_trials_stored_config(database):
    url, engine, study_id = database
    config = _final_config(study_id)
    config["variant"]["may_stop_early"] = False
    _recorder(url).on_trial_complete(0, [], FakeTrial(config, last_result={"epoch": 1, "test_accuracy": 0.5}))
    with session_scope(engine) as session:
        (trial,) = list_trials(session, study_id=study_id)
    assert "may_stop_early" not in trial.config and trial.config["method"] == "dyt"


# --------------------------------------------------------------------------- the trial's MLflow run id


@dataclass
class FakeRunLookup:
    """Stands in for workers.tracking.tracker.find_trial_run: every trial has a run named after its key, or MLflow
    fails while `down`."""

    down: bool = False
    asked: list[str] = field(default_factory=list)

    def __call__(self, client, experiment_id: str, trial_key: str):
        self.asked.append(trial_key)
        if self.down:
            raise TimeoutError("MLflow did not answer within 5 s")
        return SimpleNamespace(info=SimpleNamespace(run_id=f"run-of-{trial_key}"))


def _tracked_recorder(url: str, monkeypatch, lookup: FakeRunLookup) -> TrialRecorder:
    monkeypatch.setattr(recorder_module, "find_trial_run", lookup)
    return TrialRecorder(
        url, metric_key="test_accuracy", tracking_uri="http://127.0.0.1:9", experiment_id="0"
    )


def test_a_trials_run_id_is_recorded_with_its_first_epoch_so_a_trial_lost_with_its_driver_keeps_it(
    database, monkeypatch
):
    url, engine, study_id = database
    lookup = FakeRunLookup()
    recorder = _tracked_recorder(url, monkeypatch, lookup)
    trial = FakeTrial(_final_config(study_id))
    recorder.on_trial_start(0, [], trial)
    for epoch in (0, 1, 2):
        recorder.on_trial_result(0, [], trial, _tune_result(epoch, test_accuracy=0.5))
    with session_scope(engine) as session:
        [stored] = list_trials(session, study_id=study_id)
    assert (stored.status, stored.mlflow_run_id) == ("running", f"run-of-{stored.trial_key}")
    assert lookup.asked == [stored.trial_key]  # once per trial, not once per epoch
    # The driver dies here; a restored one (unpickled) resumes the trial and records its start again.
    restored = cloudpickle.loads(cloudpickle.dumps(recorder))
    lookup.down = True
    restored.on_trial_start(0, [], trial)
    with session_scope(engine) as session:
        [stored] = list_trials(session, study_id=study_id)
    assert stored.mlflow_run_id == f"run-of-{stored.trial_key}"  # a write without the id keeps it


def test_a_run_lookup_that_fails_at_the_first_epoch_leaves_the_id_to_the_trials_end(database, monkeypatch):
    url, engine, study_id = database
    lookup = FakeRunLookup(down=True)
    recorder = _tracked_recorder(url, monkeypatch, lookup)
    trial = FakeTrial(_final_config(study_id), last_result={"test_accuracy": 0.8, "epoch": 1})
    recorder.on_trial_start(0, [], trial)
    recorder.on_trial_result(0, [], trial, _tune_result(0, test_accuracy=0.5))
    recorder.on_trial_result(0, [], trial, _tune_result(1, test_accuracy=0.8))
    with session_scope(engine) as session:
        assert [t.mlflow_run_id for t in list_trials(session, study_id=study_id)] == [None]
        assert len(study_histories(session, study_id=study_id)[next(iter(lookup.asked))]) == 2
    lookup.down = False
    recorder.on_trial_complete(0, [], trial)
    with session_scope(engine) as session:
        [stored] = list_trials(session, study_id=study_id)
    assert (stored.status, stored.mlflow_run_id) == ("succeeded", f"run-of-{stored.trial_key}")
    assert len(lookup.asked) == 2  # the first epoch's (failed) and the end's

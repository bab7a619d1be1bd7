"""A trial process bounds MLflow's own request timeout and retries: its trackers retry by themselves, and
MLflow's defaults let one request to an unreachable server take many minutes (unit test of
workers.trials.entry)."""

from __future__ import annotations

import pytest
from mlflow.environment_variables import MLFLOW_HTTP_REQUEST_MAX_RETRIES, MLFLOW_HTTP_REQUEST_TIMEOUT

import workers.trials.trainable
from workers.trials import entry as trainable_entry

CONFIG = {"study_id": "s1", "phase": "final", "variant": {"method": "dyt", "seed": 1}}


@pytest.fixture
def trial_process(monkeypatch):
    """study_trial without training (the trainable is replaced: a unit test of the entry point)."""
    monkeypatch.setattr(workers.trials.trainable, "train_trial", lambda config: None)
    for name in trainable_entry.MLFLOW_REQUEST_LIMITS:
        monkeypatch.setenv(name, "0")  # so that the test's end restores the variable's absence
        monkeypatch.delenv(name)
    return monkeypatch


@pytest.mark.filterwarnings("ignore:`get_trial_id` is meant")
def test_a_trial_process_gives_mlflow_requests_a_short_timeout_and_few_retries(trial_process):
    assert MLFLOW_HTTP_REQUEST_TIMEOUT.get() == 120 and MLFLOW_HTTP_REQUEST_MAX_RETRIES.get() == 7
    trainable_entry.study_trial(dict(CONFIG))
    assert MLFLOW_HTTP_REQUEST_TIMEOUT.get() == 20 and MLFLOW_HTTP_REQUEST_MAX_RETRIES.get() == 2


@pytest.mark.filterwarnings("ignore:`get_trial_id` is meant")
def test_an_operators_own_mlflow_request_settings_win(trial_process):
    trial_process.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "45")
    trainable_entry.study_trial(dict(CONFIG))
    assert MLFLOW_HTTP_REQUEST_TIMEOUT.get() == 45 and MLFLOW_HTTP_REQUEST_MAX_RETRIES.get() == 2

"""The function Tune runs for every study trial: lift the variant, name the trial, train."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ray import tune

from studies.trial_config import DRIVER_ONLY_KEYS, Key
from workers.settings import WorkerSettings
from workers.tracking.deadline import MLFLOW_REQUEST_LIMITS
from workers.trials.keys import flatten_trial_config, seed_trial_keys, trial_key_for

__all__ = [
    "MLFLOW_REQUEST_LIMITS",
    "REUSE_WAIT_S",
    "study_trial",
    "trains_ahead",
]

# With reuse_actors, Tune hands this process the next trial only after the last one's thread has ended, and
# fails the NEXT trial when that takes longer than TUNE_FUNCTION_THREAD_TIMEOUT_S (Ray's default: 2 s).
# An early-stopped (ASHA) trial ends only then, closing its MLflow run on the way out (bounded by
# workers.tracking.tracker.CLOSE_TIMEOUT_S) and removing its checkpoint directory: a wide margin over both.
REUSE_WAIT_S = 60


def study_trial(config: dict[str, Any]) -> None:
    from workers.trials.relay import run_on_trial_host

    os.environ.setdefault("TUNE_FUNCTION_THREAD_TIMEOUT_S", str(REUSE_WAIT_S))
    for name, value in MLFLOW_REQUEST_LIMITS.items():
        os.environ.setdefault(name, value)  # an operator's own setting wins
    flat = flatten_trial_config(config)
    trial_id = tune.get_context().get_trial_id()
    flat[Key.TRIAL_KEY] = trial_key_for(flat, trial_id)
    if Key.SEEDS in flat:
        flat[Key.SEED_TRIAL_KEYS] = seed_trial_keys(flat, trial_id)
    train_ahead = trains_ahead(flat, WorkerSettings.from_env())
    for key in DRIVER_ONLY_KEYS:
        flat.pop(key, None)
    if run_on_trial_host(flat, train_ahead=train_ahead):  # a warm host of this node trained it (CPU trials)
        return
    from workers.trials.trainable import train_trial  # imported in the worker: torch stays out of the driver

    train_trial(flat)


def trains_ahead(config: Mapping[str, Any], settings: WorkerSettings) -> bool:
    """Whether a warm trial host may train this trial's next epoch while Tune takes its report: only where
    the driver said that no scheduler can stop the trial early, and NORMLAB_TRAIN_AHEAD is on."""
    return config.get(Key.MAY_STOP_EARLY, True) is False and settings.train_ahead

"""The function Tune runs for every study trial: lift the variant, name the trial, train."""

from __future__ import annotations

import os
from typing import Any

from ray import tune

from workers.driver.trial_keys import SEEDS_KEY, flatten_trial_config, seed_trial_keys, trial_key_for

__all__ = ["DRIVER_ONLY_KEYS", "MLFLOW_REQUEST_LIMITS", "REUSE_WAIT_S", "study_trial"]

# Keys the driver uses for bookkeeping that the training config does not take.
DRIVER_ONLY_KEYS = ("group",)

# With reuse_actors, Tune hands this process the next trial only after the last one's thread has ended, and
# fails the NEXT trial when that takes longer than TUNE_FUNCTION_THREAD_TIMEOUT_S (Ray's default: 2 s).
# An early-stopped (ASHA) trial ends only then, closing its MLflow run on the way out (bounded by
# workers.tracking.CLOSE_TIMEOUT_S) and removing its checkpoint directory: a wide margin over both.
REUSE_WAIT_S = 60

# MLflow's client defaults (120 s per answer, 7 retries with backoff up to 2 min) let one request to an
# unreachable server take many minutes. In a trial process only the trackers' background threads talk to
# MLflow and they retry on their own, so a request gives up sooner and the next retry sees a server that is
# back within seconds.
MLFLOW_REQUEST_LIMITS = {"MLFLOW_HTTP_REQUEST_TIMEOUT": "20", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2"}


def study_trial(config: dict[str, Any]) -> None:
    from workers.trainable import train_trial  # imported in the worker: torch stays out of the driver

    os.environ.setdefault("TUNE_FUNCTION_THREAD_TIMEOUT_S", str(REUSE_WAIT_S))
    for name, value in MLFLOW_REQUEST_LIMITS.items():
        os.environ.setdefault(name, value)  # an operator's own setting wins
    flat = flatten_trial_config(config)
    trial_id = tune.get_context().get_trial_id()
    flat["trial_key"] = trial_key_for(flat, trial_id)
    if SEEDS_KEY in flat:
        flat["seed_trial_keys"] = seed_trial_keys(flat, trial_id)
    for key in DRIVER_ONLY_KEYS:
        flat.pop(key, None)
    train_trial(flat)

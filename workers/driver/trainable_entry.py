"""The function Tune runs for every study trial: lift the variant, name the trial, train."""

from __future__ import annotations

from typing import Any

from ray import tune

from workers.driver.trial_keys import flatten_trial_config, trial_key_for

__all__ = ["study_trial"]

# Keys the driver uses for bookkeeping that the training config does not take.
_DRIVER_ONLY_KEYS = ("group",)


def study_trial(config: dict[str, Any]) -> None:
    from workers.trainable import train_trial  # imported in the worker: torch stays out of the driver

    flat = flatten_trial_config(config)
    flat["trial_key"] = trial_key_for(flat, tune.get_context().get_trial_id())
    for key in _DRIVER_ONLY_KEYS:
        flat.pop(key, None)
    train_trial(flat)

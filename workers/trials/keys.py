"""Stable trial keys: the same trial gets the same key after any restart (idempotent DB and MLflow writes)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from studies.trial_config import TUNE_PHASE, Key, one_seed_config, trial_seeds

__all__ = ["flatten_trial_config", "seed_trial_keys", "trial_key_for"]


def trial_key_for(config: Mapping[str, Any], tune_trial_id: str | None) -> str:
    """Final and grid trials are named by what they are (method, group, seed); tuning trials by Tune's id."""
    study_id, phase, method = config[Key.STUDY_ID], config[Key.PHASE], config[Key.METHOD]
    if phase == TUNE_PHASE:
        if not tune_trial_id:
            raise ValueError("a tuning trial needs Tune's trial id for its key")
        return f"{study_id}/{TUNE_PHASE}/{method}/{tune_trial_id}"
    group = config.get(Key.GROUP)
    middle = f"{method}/{group}" if group else method
    seeds = trial_seeds(config)
    if len(seeds) > 1:
        return f"{study_id}/{phase}/{middle}/seeds{'+'.join(str(s) for s in seeds)}"
    return f"{study_id}/{phase}/{middle}/seed{seeds[0]}"


def seed_trial_keys(config: Mapping[str, Any], tune_trial_id: str | None) -> dict[int, str]:
    """Seed -> the key of that seed's own trial. A single-seed Tune trial gives {seed: its key}; a
    seed-batched one gives every seed the key a single-seed trial of that seed would have had, so stored
    rows, MLflow runs and results do not depend on how seeds were batched."""
    return {seed: trial_key_for(one_seed_config(config, seed), tune_trial_id) for seed in trial_seeds(config)}


def flatten_trial_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """Final and grid phases grid-search over whole trial configs under Key.VARIANT; lift them to the top."""
    flat = {k: v for k, v in config.items() if k != Key.VARIANT}
    flat.update(config.get(Key.VARIANT) or {})
    return flat

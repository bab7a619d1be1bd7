"""Stable trial keys: the same trial gets the same key after any restart (idempotent DB and MLflow writes)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["flatten_trial_config", "trial_key_for"]

VARIANT_KEY = "variant"


def trial_key_for(config: Mapping[str, Any], tune_trial_id: str | None) -> str:
    """Final and grid trials are named by what they are (method, group, seed); tuning trials by Tune's id."""
    study_id, phase, method = config["study_id"], config["phase"], config["method"]
    if phase == "tune":
        if not tune_trial_id:
            raise ValueError("a tuning trial needs Tune's trial id for its key")
        return f"{study_id}/tune/{method}/{tune_trial_id}"
    group = config.get("group")
    middle = f"{method}/{group}" if group else method
    return f"{study_id}/{phase}/{middle}/seed{config['seed']}"


def flatten_trial_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """Final and grid phases grid-search over whole trial configs under `variant`; lift them to the top."""
    flat = {k: v for k, v in config.items() if k != VARIANT_KEY}
    flat.update(config.get(VARIANT_KEY) or {})
    return flat

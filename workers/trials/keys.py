"""Stable trial keys: the same trial gets the same key after any restart (idempotent DB and MLflow writes)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "PER_SEED_KEY",
    "SEEDS_KEY",
    "flatten_trial_config",
    "seed_trial_keys",
    "trial_key_for",
    "trial_seeds",
]

VARIANT_KEY = "variant"
# A seed-batched trial (resources.seeds_per_trial > 1) lists the seeds it trains together; `seed` is then
# the first of them. Each seed is still its own trial everywhere outside Tune (DB row, MLflow run, key).
SEEDS_KEY = "seeds"
# The key of a seed-batched trial's Tune result under which each seed's own report sits ({"3": {...}}).
PER_SEED_KEY = "per_seed"


def trial_key_for(config: Mapping[str, Any], tune_trial_id: str | None) -> str:
    """Final and grid trials are named by what they are (method, group, seed); tuning trials by Tune's id."""
    study_id, phase, method = config["study_id"], config["phase"], config["method"]
    if phase == "tune":
        if not tune_trial_id:
            raise ValueError("a tuning trial needs Tune's trial id for its key")
        return f"{study_id}/tune/{method}/{tune_trial_id}"
    group = config.get("group")
    middle = f"{method}/{group}" if group else method
    seeds = trial_seeds(config)
    if len(seeds) > 1:
        return f"{study_id}/{phase}/{middle}/seeds{'+'.join(str(s) for s in seeds)}"
    return f"{study_id}/{phase}/{middle}/seed{seeds[0]}"


def trial_seeds(config: Mapping[str, Any]) -> list[int]:
    """The seeds one Tune trial trains: its `seeds` when seed-batched, else its one `seed`."""
    seeds = config.get(SEEDS_KEY)
    return [int(s) for s in seeds] if seeds else [int(config["seed"])]


def seed_trial_keys(config: Mapping[str, Any], tune_trial_id: str | None) -> dict[int, str]:
    """Seed -> the key of that seed's own trial. A single-seed Tune trial gives {seed: its key}; a
    seed-batched one gives every seed the key a single-seed trial of that seed would have had, so stored
    rows, MLflow runs and results do not depend on how seeds were batched."""
    single = {k: v for k, v in config.items() if k != SEEDS_KEY}
    return {seed: trial_key_for({**single, "seed": seed}, tune_trial_id) for seed in trial_seeds(config)}


def flatten_trial_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """Final and grid phases grid-search over whole trial configs under `variant`; lift them to the top."""
    flat = {k: v for k, v in config.items() if k != VARIANT_KEY}
    flat.update(config.get(VARIANT_KEY) or {})
    return flat

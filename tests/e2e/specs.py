"""Study specs shared by the end-to-end tests that interrupt a study (a killed driver, a stopped stack)."""

from __future__ import annotations

from typing import Any

INTERRUPTIBLE_METHODS = ["frozen_ln", "dyt"]
INTERRUPTIBLE_SEEDS = [0, 1]


def interruptible_study(name: str) -> dict[str, Any]:
    """Eight trials of ten short epochs on real digits: long enough to be interrupted mid-study, with a
    searched lr so that each trial is a Tune trial of its own, on one CPU each. Every epoch is checkpointed
    (the default interval would checkpoint only the last of such short epochs): the tests interrupt the
    study once its trials have checkpointed, and Tune snapshots the experiment after every checkpoint."""
    return {
        "name": name,
        "dataset": "digits",
        "model": "vit_lite_tiny",
        "methods": INTERRUPTIBLE_METHODS,
        "search": {"lr": {"type": "loguniform", "low": 3.0e-3, "high": 1.5e-2}},
        "num_samples": 2,
        "seeds": INTERRUPTIBLE_SEEDS,
        "tune_seeds": [3],
        "budget": {"epochs": 10, "batch_size": 64, "checkpoint_every_s": 0},
        "resources": {"cpu": 1, "gpu": 0},
    }


GRID_METHODS = ["frozen_ln", "dyt"]
GRID_SEEDS = [0, 1]


def two_method_grid(
    name: str,
    *,
    epochs: int,
    batch_size: int = 64,
    checkpoint_every_s: float | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """Four trials (two methods x two seeds) at a fixed lr on real digits, no tuning phase: the smallest
    study whose trials spread over two slots or nodes. `checkpoint_every_s` goes into the budget where set
    (else the service's interval); `extra` adds top-level fields (resources, ...)."""
    budget: dict[str, Any] = {"epochs": epochs, "batch_size": batch_size}
    if checkpoint_every_s is not None:
        budget["checkpoint_every_s"] = checkpoint_every_s
    return {
        "name": name,
        "dataset": "digits",
        "kind": "grid",
        "model": "vit_lite_tiny",
        "methods": list(GRID_METHODS),
        "search": {"lr": 0.005},
        "seeds": list(GRID_SEEDS),
        "budget": budget,
        **extra,
    }

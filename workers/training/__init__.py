"""The training path every trial runs: config, loop, schedule, mixing, checkpoints, seeding, metrics.

Names are imported on first use (PEP 562), so `workers.training.config` (pure Python) can be imported
without torch: the study driver reads its key sets and never pays torch's import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_SOURCES = {
    "CHECKPOINT_FILE": "checkpoint",
    "load_checkpoint": "checkpoint",
    "save_checkpoint": "checkpoint",
    "TrainConfig": "config",
    "model_config": "config",
    "ReportFn": "loop",
    "TrainingRun": "loop",
    "resolve_device": "loop",
    "run_training": "loop",
    "GateStats": "metrics",
    "MetricAccumulator": "metrics",
    "TaskLoss": "metrics",
    "BatchMixer": "mixing",
    "build_optimizer": "optim",
    "parameter_groups": "optim",
    "build_warmup_cosine": "schedule",
    "warmup_cosine_factor": "schedule",
    "capture_rng_state": "seeding",
    "restore_rng_state": "seeding",
    "seed_everything": "seeding",
}

# _SOURCES's names, written out because linters and type checkers read __all__ without running code: a
# computed `list(_SOURCES)` leaves ruff calling every import below unused (F401) and pyright without an
# export list, and the runtime cannot read the TYPE_CHECKING block. Lazy loading thus needs the two forms;
# test_driver_imports checks they name the same things.
__all__ = [
    "CHECKPOINT_FILE",
    "BatchMixer",
    "GateStats",
    "MetricAccumulator",
    "ReportFn",
    "TaskLoss",
    "TrainConfig",
    "TrainingRun",
    "build_optimizer",
    "build_warmup_cosine",
    "capture_rng_state",
    "load_checkpoint",
    "model_config",
    "parameter_groups",
    "resolve_device",
    "restore_rng_state",
    "run_training",
    "save_checkpoint",
    "seed_everything",
    "warmup_cosine_factor",
]

if TYPE_CHECKING:
    from workers.training.checkpoint import CHECKPOINT_FILE, load_checkpoint, save_checkpoint
    from workers.training.config import TrainConfig, model_config
    from workers.training.loop import ReportFn, TrainingRun, resolve_device, run_training
    from workers.training.metrics import GateStats, MetricAccumulator, TaskLoss
    from workers.training.mixing import BatchMixer
    from workers.training.optim import build_optimizer, parameter_groups
    from workers.training.schedule import build_warmup_cosine, warmup_cosine_factor
    from workers.training.seeding import capture_rng_state, restore_rng_state, seed_everything


def __getattr__(name: str) -> Any:
    module = _SOURCES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value

"""The training path every trial runs: config, loop, schedule, mixing, checkpoints, seeding, metrics."""

from workers.training.checkpoint import CHECKPOINT_FILE, load_checkpoint, save_checkpoint
from workers.training.config import TrainConfig, model_config
from workers.training.loop import ReportFn, TrainingRun, resolve_device, run_training
from workers.training.metrics import GateStats, MetricAccumulator, TaskLoss
from workers.training.mixing import BatchMixer
from workers.training.optim import build_optimizer, parameter_groups
from workers.training.schedule import build_warmup_cosine, warmup_cosine_factor
from workers.training.seeding import capture_rng_state, restore_rng_state, seed_everything

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

"""The smallest real trial the worker tests train: FrozenLN, a tiny ViT-Lite on digits, two epochs of two
steps each. Tests add what makes a trial theirs (seed, study, trial key, MLflow)."""

from __future__ import annotations

TINY_TRIAL = {
    "method": "frozen_ln",
    "dataset": "digits",
    "model": "vit_lite_tiny",
    "epochs": 2,
    "batch_size": 32,
    "lr": 3e-3,
    "warmup_epochs": 1,
    "max_steps_per_epoch": 2,
}

"""Defaults of the settings both sides of the stack read: the service (service.settings.Settings) and the
worker side (workers.settings.WorkerSettings, for a driver or trial started without the variable set).

They live here because it is the one layer both may import (the service never imports workers, the
workers never the service), as studies.limits does for the study limits. Plain constants, no imports.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_CHECKPOINT_EVERY_S",
    "DEFAULT_DATA_DIR",
    "DEFAULT_TRAIN_AHEAD",
    "DEFAULT_TRIAL_HOSTS",
    "DEFAULT_WARM_IDLE_S",
]

DEFAULT_DATA_DIR = "~/.normlab"  # data root: database, API token, MLflow store, dataset cache, Tune storage
DEFAULT_TRIAL_HOSTS = True  # CPU trials train on warm trial hosts (workers.trials.host)
DEFAULT_TRAIN_AHEAD = True  # a trial no scheduler can stop trains its next epoch while Tune takes its report
DEFAULT_CHECKPOINT_EVERY_S = 10.0  # seconds of training between a trial's checkpoints (0: every epoch)
DEFAULT_WARM_IDLE_S = 600.0  # seconds a warm process waits for work before it exits (0: it stays)

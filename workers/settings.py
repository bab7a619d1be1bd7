"""What the worker side (a study's driver, its trial processes, the dataset registry) reads from the
environment, read in this one place. `normlab serve` and the compose file set these variables for the
jobs they start from the service's Settings (service/settings.py); both take their defaults from
studies.stack_defaults, for a worker started without a variable set.

    NORMLAB_DATA_DIR      data root: Tune storage, dataset cache (default ~/.normlab)
    NORMLAB_OFFLINE_DATA  offline dataset sources (default <NORMLAB_DATA_DIR default>/offline)
    NORMLAB_PTB_WSJ_DIR   a user's own LDC copy of the WSJ treebank (dataset ptb_wsj_pos; read by
                          workers.data.locations.ptb_wsj_dir, never downloaded)
    DATABASE_URL          the study database (the driver records trials there)
    MLFLOW_TRACKING_URI   the MLflow server
    NORMLAB_TRIAL_HOSTS   1 (default): CPU trials train on warm trial hosts (workers.trials.host); 0: each in
                          its own Tune trial process
    NORMLAB_TRAIN_AHEAD   1 (default): on a warm trial host, a trial that no scheduler can stop early trains
                          its next epoch while Tune takes its report; 0: it waits for Tune after every epoch
    NORMLAB_CHECKPOINT_EVERY_S  10 (default): a trial checkpoints its last epoch and, before it, an epoch
                          only once this many seconds have passed since its previous checkpoint; 0: every
                          epoch (workers.training.checkpoint.CheckpointSchedule)
    NORMLAB_WARM_IDLE_S   600 (default): a warm trial host with no trial for this many seconds exits, giving
                          its memory back (the next CPU study starts it again); 0: it stays
    NORMLAB_WARM_DRIVER_SOCKET  a warm driver server's socket (workers.driver.warm_server): a study's job
                          hands its driver to it; unset: the job's process is the driver

Plain Python: trial processes import it without pydantic.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from studies.stack_defaults import (
    DEFAULT_CHECKPOINT_EVERY_S,
    DEFAULT_DATA_DIR,
    DEFAULT_TRAIN_AHEAD,
    DEFAULT_TRIAL_HOSTS,
    DEFAULT_WARM_IDLE_S,
)

__all__ = ["DEFAULT_CHECKPOINT_EVERY_S", "DEFAULT_DATA_DIR", "DEFAULT_WARM_IDLE_S", "WorkerSettings"]


@dataclass(frozen=True)
class WorkerSettings:
    data_dir: Path
    offline_data_dir: Path
    database_url: str | None
    tracking_uri: str | None
    trial_hosts: bool = DEFAULT_TRIAL_HOSTS
    train_ahead: bool = DEFAULT_TRAIN_AHEAD
    checkpoint_every_s: float = DEFAULT_CHECKPOINT_EVERY_S
    warm_driver_socket: Path | None = None
    warm_idle_s: float = DEFAULT_WARM_IDLE_S

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> WorkerSettings:
        env = os.environ if environ is None else environ
        return cls(
            data_dir=Path(env.get("NORMLAB_DATA_DIR") or DEFAULT_DATA_DIR).expanduser(),
            offline_data_dir=Path(
                env.get("NORMLAB_OFFLINE_DATA") or f"{DEFAULT_DATA_DIR}/offline"
            ).expanduser(),
            database_url=env.get("DATABASE_URL") or None,
            tracking_uri=env.get("MLFLOW_TRACKING_URI") or None,
            trial_hosts=_flag(env.get("NORMLAB_TRIAL_HOSTS"), default=DEFAULT_TRIAL_HOSTS),
            train_ahead=_flag(env.get("NORMLAB_TRAIN_AHEAD"), default=DEFAULT_TRAIN_AHEAD),
            checkpoint_every_s=_seconds(
                env.get("NORMLAB_CHECKPOINT_EVERY_S"), default=DEFAULT_CHECKPOINT_EVERY_S
            ),
            warm_driver_socket=Path(env["NORMLAB_WARM_DRIVER_SOCKET"])
            if env.get("NORMLAB_WARM_DRIVER_SOCKET")
            else None,
            warm_idle_s=_seconds(env.get("NORMLAB_WARM_IDLE_S"), default=DEFAULT_WARM_IDLE_S),
        )


def _flag(value: str | None, *, default: bool) -> bool:
    if value is None or not value.strip():
        return default
    if value.strip().lower() in ("1", "true", "yes", "on"):
        return True
    if value.strip().lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected 1/0, true/false, yes/no or on/off, got {value!r}")


def _seconds(value: str | None, *, default: float) -> float:
    if value is None or not value.strip():
        return default
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not seconds >= 0:  # refuses nan too
        raise ValueError(f"expected a number of seconds (0 or more), got {value!r}")
    return seconds

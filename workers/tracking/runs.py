"""A trial's MLflow run, stateless: its tags and params, finding it by trial key (or creating it), and
completing it from the trial's reported history.

Shared by the live tracker (workers.tracking.tracker), the spool's later delivery (workers.tracking.delivery) and
the study driver, which finalizes runs after Tune is done with them.
"""

from __future__ import annotations

import numbers
import time
from collections.abc import Mapping, Sequence
from typing import Any

from mlflow.entities import Metric, Param, Run, ViewType
from mlflow.tracking import MlflowClient

from studies.trial_config import ORCHESTRATION_KEYS, Key
from workers.tracking.deadline import call_with_deadline
from workers.tracking.spool import TrialRunIdentity

__all__ = [
    "ERROR_TAG",
    "LOOKUP_TIMEOUT_S",
    "MAX_METRICS_PER_BATCH",
    "MAX_PARAMS_PER_BATCH",
    "MAX_PARAM_VALUE_LENGTH",
    "PARENT_RUN_TAG",
    "PROBE_METRIC",
    "TRIAL_KEY_TAG",
    "finalize_trial_run",
    "find_trial_run",
    "get_or_create_trial_run",
    "history_metrics",
    "is_number",
    "log_missing_params",
    "tag_trial_error",
    "trial_params",
    "trial_run_identity",
    "trial_tags",
]

TRIAL_KEY_TAG = "normlab.trial_key"
PARENT_RUN_TAG = "mlflow.parentRunId"
# A failed trial's error (`<Type>: <message>`, then the last lines of its trace), as its database row holds
# it: the MLflow UI shows why a run FAILED without the Ray job's log.
ERROR_TAG = "normlab.error"
MAX_TAG_VALUE_LENGTH = 8000  # MLflow refuses a longer tag value
# MLflow's per-request limits (log_batch) and the param value length limit.
MAX_METRICS_PER_BATCH = 1000
MAX_PARAMS_PER_BATCH = 100
MAX_PARAM_VALUE_LENGTH = 6000
# Keys of the trial config that are run identity (tags) or wiring, not hyperparameters.
_NOT_PARAMS = ORCHESTRATION_KEYS
# Metric history key probed to find which epochs a resumed run already holds (present in every report).
PROBE_METRIC = "objective"
# How long a run lookup may keep its caller (the driver's event loop records finished trials) waiting.
LOOKUP_TIMEOUT_S = 5.0


def trial_tags(config: Mapping[str, Any]) -> dict[str, str]:
    """The tags architecture.md fixes for a trial's child run."""
    tags = {
        "normlab.study_id": str(config.get(Key.STUDY_ID, "")),
        "normlab.method": str(config.get(Key.METHOD, "")),
        "normlab.seed": str(config.get(Key.SEED, "")),
        "normlab.phase": str(config.get(Key.PHASE, "")),
        TRIAL_KEY_TAG: str(config[Key.TRIAL_KEY]),
        "normlab.dataset": str(config.get(Key.DATASET, "")),
    }
    if config.get(Key.MLFLOW_PARENT_RUN_ID):
        tags[PARENT_RUN_TAG] = str(config[Key.MLFLOW_PARENT_RUN_ID])
    return tags


def trial_params(config: Mapping[str, Any]) -> dict[str, str]:
    """Hyperparameters of a trial flattened to MLflow params (`knobs.tau`, `model_overrides.depth`, ...)."""
    params: dict[str, str] = {}

    def visit(prefix: str, value: Any) -> None:
        if isinstance(value, Mapping):
            for key, inner in value.items():
                visit(f"{prefix}.{key}" if prefix else str(key), inner)
        else:
            params[prefix] = str(value)[:MAX_PARAM_VALUE_LENGTH]

    visit("", {k: v for k, v in config.items() if k not in _NOT_PARAMS})
    return params


def find_trial_run(
    client: MlflowClient, experiment_id: str, trial_key: str, *, timeout_s: float | None = LOOKUP_TIMEOUT_S
) -> Run | None:
    """The oldest active run of `experiment_id` tagged with `trial_key`, or None.

    Raises workers.tracking.deadline.TrackingTimeoutError when MLflow does not answer within `timeout_s`
    (None: wait as long as MLflow's client does, for callers that run in a thread of their own).
    """
    if "'" in trial_key or "\\" in trial_key:
        raise ValueError(f"trial_key must not contain quotes or backslashes: {trial_key!r}")

    def search() -> list[Run]:
        return client.search_runs(
            [experiment_id],
            filter_string=f"tags.`{TRIAL_KEY_TAG}` = '{trial_key}'",
            run_view_type=ViewType.ACTIVE_ONLY,
            max_results=10,
            order_by=["attributes.start_time ASC"],
        )

    runs = search() if timeout_s is None else call_with_deadline(client, search, timeout_s=timeout_s)
    return runs[0] if runs else None


def get_or_create_trial_run(
    client: MlflowClient,
    experiment_id: str,
    trial_key: str,
    tags: Mapping[str, str],
    *,
    lookup_timeout_s: float | None = None,
) -> tuple[Run, bool]:
    """The trial's run (found by its trial_key tag) or a new one with `tags`; True when created here.
    `lookup_timeout_s` bounds the lookup (find_trial_run), which tells whether MLflow answers at all."""
    run = find_trial_run(client, experiment_id, trial_key, timeout_s=lookup_timeout_s)
    if run is not None:
        return run, False
    return client.create_run(experiment_id, tags=dict(tags), run_name=trial_key), True


def log_missing_params(client: MlflowClient, run: Run, params: Mapping[str, str]) -> None:
    """Send the params `run` does not have yet (MLflow params are immutable: an existing key is kept)."""
    existing = run.data.params
    missing = [Param(k, v) for k, v in params.items() if k not in existing]
    for start in range(0, len(missing), MAX_PARAMS_PER_BATCH):
        client.log_batch(run.info.run_id, params=missing[start : start + MAX_PARAMS_PER_BATCH])


def history_metrics(
    history: Sequence[Mapping[str, Any]], *, step_key: str = "epoch", timestamp_ms: int | None = None
) -> list[Metric]:
    """The numeric entries of per-epoch reports as metrics, each at its report's `step_key`."""
    timestamp = timestamp_ms if timestamp_ms is not None else int(time.time() * 1000)
    return [
        Metric(key=k, value=float(v), timestamp=timestamp, step=int(metrics[step_key]))
        for metrics in history
        if step_key in metrics
        for k, v in metrics.items()
        if is_number(v)
    ]


def trial_run_identity(config: Mapping[str, Any]) -> TrialRunIdentity | None:
    """The trial's run as its config names it, or None when the config names no MLflow server/experiment."""
    if not config.get(Key.MLFLOW_TRACKING_URI) or config.get(Key.MLFLOW_EXPERIMENT_ID) in (None, ""):
        return None
    return TrialRunIdentity(
        tracking_uri=str(config[Key.MLFLOW_TRACKING_URI]),
        experiment_id=str(config[Key.MLFLOW_EXPERIMENT_ID]),
        trial_key=str(config[Key.TRIAL_KEY]),
        tags=trial_tags(config),
        params=trial_params(config),
    )


def finalize_trial_run(
    client: MlflowClient,
    experiment_id: str,
    trial_key: str,
    *,
    history: Sequence[Mapping[str, Any]],
    status: str = "FINISHED",
    step_key: str = "epoch",
) -> str | None:
    """Complete a trial's run after Tune is done with it; idempotent. Returns the run id (None: no run).

    Tune stops a trial (ASHA) by ending its actor without waiting for the training thread, so the
    tracker's last queued epoch and its FINISHED status can be lost. The driver calls this with the
    trial's reported results (one dict per epoch) to log the epochs the run lacks and set the status of
    a run still marked RUNNING.
    """
    run = find_trial_run(client, experiment_id, trial_key)
    if run is None:
        return None
    run_id = run.info.run_id
    held = {m.step for m in client.get_metric_history(run_id, PROBE_METRIC)}
    missing = [m for m in history_metrics(history, step_key=step_key) if m.step not in held]
    for start in range(0, len(missing), MAX_METRICS_PER_BATCH):
        client.log_batch(run_id, metrics=missing[start : start + MAX_METRICS_PER_BATCH])
    if run.info.status == "RUNNING":
        client.set_terminated(run_id, status=status)
    return run_id


def tag_trial_error(client: MlflowClient, run_id: str, error: str) -> None:
    """Tag a failed trial's run with its error, the end cut where MLflow's limit would refuse it whole (the
    headline comes first, so it stays)."""
    client.set_tag(run_id, ERROR_TAG, error[:MAX_TAG_VALUE_LENGTH])


def is_number(value: Any) -> bool:
    """Numbers (bools and numpy scalars included) are metrics; strings and None are not. NaN is kept."""
    return isinstance(value, numbers.Real)

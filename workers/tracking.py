"""MLflow tracking for trials: one child run per trial, params once, metrics batched from a background thread.

A synchronous `log_metrics` costs ~85 ms against a local SQLite-backed server, which would dominate short
epochs; here the training thread only enqueues, and a background thread sends `MlflowClient.log_batch`
calls. Tracking must never kill training: failed deliveries are kept and retried at the next flush, and
the run is resolved lazily, so a server that is down at trial start only delays logging.
"""

from __future__ import annotations

import contextlib
import logging
import numbers
import queue
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mlflow.entities import Metric, Param, ViewType
from mlflow.tracking import MlflowClient

from workers.training.config import ORCHESTRATION_KEYS

__all__ = [
    "TRIAL_KEY_TAG",
    "TrialTracker",
    "finalize_trial_run",
    "find_trial_run",
    "tracker_from_trial_config",
    "trial_params",
    "trial_tags",
]

logger = logging.getLogger(__name__)

TRIAL_KEY_TAG = "normlab.trial_key"
PARENT_RUN_TAG = "mlflow.parentRunId"
# MLflow's per-request limits (log_batch) and the param value length limit.
MAX_METRICS_PER_BATCH = 1000
MAX_PARAMS_PER_BATCH = 100
MAX_PARAM_VALUE_LENGTH = 6000
# Keys of the trial config that are run identity (tags) or wiring, not hyperparameters.
_NOT_PARAMS = ORCHESTRATION_KEYS
# Metric history key probed to find which epochs a resumed run already holds (present in every report).
_PROBE_METRIC = "objective"


def trial_tags(config: Mapping[str, Any]) -> dict[str, str]:
    """The tags architecture.md fixes for a trial's child run."""
    tags = {
        "normlab.study_id": str(config.get("study_id", "")),
        "normlab.method": str(config.get("method", "")),
        "normlab.seed": str(config.get("seed", "")),
        "normlab.phase": str(config.get("phase", "")),
        TRIAL_KEY_TAG: str(config["trial_key"]),
        "normlab.dataset": str(config.get("dataset", "")),
    }
    if config.get("mlflow_parent_run_id"):
        tags[PARENT_RUN_TAG] = str(config["mlflow_parent_run_id"])
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


def find_trial_run(client: MlflowClient, experiment_id: str, trial_key: str) -> Any | None:
    """The oldest active run of `experiment_id` tagged with `trial_key`, or None."""
    if "'" in trial_key or "\\" in trial_key:
        raise ValueError(f"trial_key must not contain quotes or backslashes: {trial_key!r}")
    runs = client.search_runs(
        [experiment_id],
        filter_string=f"tags.`{TRIAL_KEY_TAG}` = '{trial_key}'",
        run_view_type=ViewType.ACTIVE_ONLY,
        max_results=10,
        order_by=["attributes.start_time ASC"],
    )
    return runs[0] if runs else None


@dataclass
class _Flush:
    done: threading.Event
    ok: bool = False


@dataclass
class _Stop:
    status: str


class TrialTracker:
    """The MLflow child run of one trial, fed asynchronously.

    Usage: `start()`, then `log_metrics(...)` per epoch (non-blocking), `close("FINISHED" | "FAILED")`.
    Get-or-create by the trial_key tag makes a restarted trial continue its run; epochs the run already
    holds are not logged again, and `backfill(history)` re-sends the epochs it is missing (those queued
    when the previous process died).
    """

    def __init__(
        self,
        *,
        tracking_uri: str | None,
        experiment_id: str,
        trial_key: str,
        tags: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
        flush_interval_s: float = 2.0,
        max_queue: int = 10_000,
        max_pending: int = 100_000,
        client: MlflowClient | None = None,
    ) -> None:
        self.experiment_id = str(experiment_id)
        self.trial_key = trial_key
        self.tags = dict(tags or {})
        self.tags.setdefault(TRIAL_KEY_TAG, trial_key)
        self.params = dict(params or {})
        self.flush_interval_s = flush_interval_s
        self.max_pending = max_pending
        self._client = client or MlflowClient(tracking_uri=tracking_uri)
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max_queue)
        self._incoming: list[Metric] = []  # received from the training thread, not yet checked for repeats
        self._pending: list[Metric] = []  # checked, waiting for delivery
        self._backfill: list[Mapping[str, Any]] | None = None
        self._backfill_step_key = "epoch"
        self._held_steps: set[int] = set()
        self._run_id: str | None = None
        self._created = False
        self._thread: threading.Thread | None = None
        self._failing = False
        self._dropped = 0

    # ----- public API (training thread) ---------------------------------------------------------------

    @property
    def run_id(self) -> str | None:
        """The MLflow run id once resolved (None while the server has not been reached yet)."""
        return self._run_id

    @property
    def created_run(self) -> bool:
        """True when this tracker created the run, False when it continued an existing one."""
        return self._created

    def start(self, *, resolve_timeout_s: float = 10.0) -> TrialTracker:
        """Start the background thread and wait up to `resolve_timeout_s` for the run to be resolved (0: return
        at once and let the thread create the run meanwhile). Never raises on outage."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name=f"mlflow-{self.trial_key}", daemon=True)
            self._thread.start()
        if resolve_timeout_s > 0:
            self.flush(timeout_s=resolve_timeout_s)
        else:
            self._queue.put(_Flush(threading.Event()))  # resolve now, in the thread; nobody waits for it
        return self

    def log_metrics(self, metrics: Mapping[str, Any], *, step: int, timestamp_ms: int | None = None) -> None:
        """Queue the numeric entries of `metrics` at `step`; returns at once (drops with a warning when full)."""
        timestamp = timestamp_ms if timestamp_ms is not None else int(time.time() * 1000)
        batch = [
            Metric(key=key, value=float(value), timestamp=timestamp, step=int(step))
            for key, value in metrics.items()
            if _is_number(value)
        ]
        try:
            self._queue.put_nowait(batch)
        except queue.Full:
            self._dropped += len(batch)
            logger.warning("MLflow queue full: dropped %d metrics of step %d", len(batch), step)

    def backfill(self, history: Sequence[Mapping[str, Any]], *, step_key: str = "epoch") -> None:
        """Send the epochs of `history` that the run does not hold yet (checked against the server)."""
        self._queue.put([_BackfillRequest(list(history), step_key)])

    def flush(self, *, timeout_s: float = 30.0) -> bool:
        """Deliver everything queued so far; True when it all reached the server within the timeout."""
        if self._thread is None or not self._thread.is_alive():
            return False
        request = _Flush(threading.Event())
        try:
            self._queue.put(request, timeout=timeout_s)
        except queue.Full:
            return False
        return request.done.wait(timeout_s) and request.ok

    def close(self, status: str = "FINISHED", *, timeout_s: float = 30.0) -> bool:
        """Flush, mark the run `status` (FINISHED, FAILED, KILLED) and stop the thread; True on success."""
        if self._thread is None:
            return False
        with contextlib.suppress(queue.Full):  # a wedged thread is reported below, not raised
            self._queue.put(_Stop(status), timeout=timeout_s)
        self._thread.join(timeout_s)
        undelivered = len(self._pending) + len(self._incoming)
        delivered = not self._thread.is_alive() and not undelivered and not self._failing
        if not delivered:
            logger.warning(
                "MLflow run of trial %s closed with %d metrics undelivered", self.trial_key, undelivered
            )
        self._thread = None
        return delivered

    def __enter__(self) -> TrialTracker:
        return self.start()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.close("FAILED" if exc_type is not None else "FINISHED")

    # ----- background thread --------------------------------------------------------------------------

    def _work(self) -> None:
        last_delivery = time.monotonic()
        while True:
            try:
                item = self._queue.get(timeout=self.flush_interval_s)
            except queue.Empty:
                item = None
            if isinstance(item, _Stop):
                self._deliver()
                self._terminate(item.status)
                return
            if isinstance(item, _Flush):
                item.ok = self._deliver()
                item.done.set()
                last_delivery = time.monotonic()
                continue
            if item:
                for entry in item:
                    if isinstance(entry, _BackfillRequest):
                        self._backfill = (
                            entry.history if self._backfill is None else self._backfill + entry.history
                        )
                        self._backfill_step_key = entry.step_key
                    else:
                        self._incoming.append(entry)
                self._bound_queued()
            due = time.monotonic() - last_delivery >= self.flush_interval_s
            if due or len(self._incoming) >= MAX_METRICS_PER_BATCH:
                self._deliver()
                last_delivery = time.monotonic()

    def _deliver(self) -> bool:
        """Resolve the run if needed, then send pending metrics; on failure keep them for the next try."""
        try:
            if self._run_id is None:
                self._resolve_run()
            if self._backfill is not None:
                self._queue_backfill()
            self._pending.extend(m for m in self._incoming if m.step not in self._held_steps)
            self._incoming.clear()
            while self._pending:
                chunk = self._pending[:MAX_METRICS_PER_BATCH]
                self._client.log_batch(self._run_id, metrics=chunk, synchronous=True)
                del self._pending[: len(chunk)]
        except Exception as error:  # any client/transport error: tracking must not stop training
            if not self._failing:
                logger.warning(
                    "MLflow unreachable for trial %s (%s: %s); keeping %d metrics and retrying",
                    self.trial_key,
                    type(error).__name__,
                    error,
                    len(self._pending),
                )
            self._failing = True
            return False
        if self._failing:
            logger.warning("MLflow reachable again for trial %s", self.trial_key)
        self._failing = False
        return True

    def _resolve_run(self) -> None:
        run = find_trial_run(self._client, self.experiment_id, self.trial_key)
        if run is None:
            run = self._client.create_run(self.experiment_id, tags=self.tags, run_name=self.trial_key)
            self._created = True
        else:
            if run.info.status != "RUNNING":
                self._client.update_run(run.info.run_id, status="RUNNING")
            # A restarted trial recomputes epochs after its last Tune checkpoint; epochs the run already
            # holds are not logged twice (on CPU the recomputed values are identical anyway).
            history = self._client.get_metric_history(run.info.run_id, _PROBE_METRIC)
            self._held_steps = {m.step for m in history}
        existing = run.data.params
        # Params are immutable in MLflow: only send the ones this run does not have yet.
        missing = [Param(k, v) for k, v in self.params.items() if k not in existing]
        for start in range(0, len(missing), MAX_PARAMS_PER_BATCH):
            self._client.log_batch(run.info.run_id, params=missing[start : start + MAX_PARAMS_PER_BATCH])
        self._run_id = run.info.run_id

    def _queue_backfill(self) -> None:
        assert self._backfill is not None
        timestamp = int(time.time() * 1000)
        missing: list[Metric] = []
        for metrics in self._backfill:
            step = int(metrics[self._backfill_step_key])
            if step in self._held_steps:
                continue
            missing.extend(
                Metric(key=k, value=float(v), timestamp=timestamp, step=step)
                for k, v in metrics.items()
                if _is_number(v)
            )
        self._held_steps.update(m.step for m in missing)
        self._pending[:0] = missing
        self._backfill = None

    def _terminate(self, status: str) -> None:
        if self._run_id is None:
            return
        try:
            self._client.set_terminated(self._run_id, status=status)
        except Exception as error:
            logger.warning("could not mark MLflow run %s %s: %s", self._run_id, status, error)
            self._failing = True

    def _bound_queued(self) -> None:
        excess = len(self._pending) + len(self._incoming) - self.max_pending
        if excess > 0:
            # A long outage must not grow memory without limit: the oldest values go first.
            dropped_pending = min(excess, len(self._pending))
            del self._pending[:dropped_pending]
            del self._incoming[: excess - dropped_pending]
            self._dropped += excess
            logger.warning("MLflow outage: dropped the %d oldest queued metrics", excess)


@dataclass
class _BackfillRequest:
    history: list[Mapping[str, Any]]
    step_key: str


def _is_number(value: Any) -> bool:
    """Numbers (bools and numpy scalars included) are metrics; strings and None are not. NaN is kept."""
    return isinstance(value, numbers.Real)


def tracker_from_trial_config(config: Mapping[str, Any], **options: Any) -> TrialTracker | None:
    """A tracker for the trial, or None when the config names no MLflow server/experiment."""
    if not config.get("mlflow_tracking_uri") or config.get("mlflow_experiment_id") in (None, ""):
        return None
    return TrialTracker(
        tracking_uri=str(config["mlflow_tracking_uri"]),
        experiment_id=str(config["mlflow_experiment_id"]),
        trial_key=str(config["trial_key"]),
        tags=trial_tags(config),
        params=trial_params(config),
        **options,
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
    held = {m.step for m in client.get_metric_history(run_id, _PROBE_METRIC)}
    timestamp = int(time.time() * 1000)
    missing = [
        Metric(key=k, value=float(v), timestamp=timestamp, step=int(metrics[step_key]))
        for metrics in history
        if step_key in metrics and int(metrics[step_key]) not in held
        for k, v in metrics.items()
        if _is_number(v)
    ]
    for start in range(0, len(missing), MAX_METRICS_PER_BATCH):
        client.log_batch(run_id, metrics=missing[start : start + MAX_METRICS_PER_BATCH])
    if run.info.status == "RUNNING":
        client.set_terminated(run_id, status=status)
    return run_id

"""MLflow tracking for trials: one child run per trial, params once, metrics batched from a background thread.

A synchronous `log_metrics` costs ~85 ms against a local SQLite-backed server, which would dominate short
epochs; here the training thread only enqueues, and a background thread sends `MlflowClient.log_batch`
calls. Tracking is best-effort and must never hold training up: failed deliveries are kept and retried at
the next flush, the run is resolved lazily (a server that is down at trial start only delays logging),
and closing waits for MLflow at most CLOSE_TIMEOUT_S. With a spool directory every metric and the closing
status are also journaled on the node's disk (workers.tracking.spool), so what MLflow has not taken when
the trial ends is delivered later: by the tracker's thread while the process lives, else by
workers.tracking.delivery. Finding, creating and completing the run itself: workers.tracking.runs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlflow.entities import Metric
from mlflow.tracking import MlflowClient

from studies.trial_config import Key

# The run-level functions live in workers.tracking.runs; they are re-exported here for the callers that
# know them as workers.tracking.tracker.*.
from workers.tracking.runs import (
    LOOKUP_TIMEOUT_S,
    MAX_METRICS_PER_BATCH,
    PROBE_METRIC,
    TRIAL_KEY_TAG,
    finalize_trial_run,
    find_trial_run,
    get_or_create_trial_run,
    history_metrics,
    is_number,
    log_missing_params,
    trial_params,
    trial_run_identity,
    trial_tags,
)
from workers.tracking.spool import RunJournal, TrialRunIdentity

__all__ = [
    "CLOSE_TIMEOUT_S",
    "LOOKUP_TIMEOUT_S",
    "TRIAL_KEY_TAG",
    "TrialTracker",
    "close_trackers",
    "finalize_trial_run",
    "find_trial_run",
    "get_or_create_trial_run",
    "history_metrics",
    "log_missing_params",
    "tracker_from_trial_config",
    "trial_params",
    "trial_run_identity",
    "trial_tags",
]

logger = logging.getLogger(__name__)

# How long a trial's end may wait for MLflow to take its last metrics and status; the rest is delivered in
# the background (and is on disk when a spool directory is set).
CLOSE_TIMEOUT_S = 5.0
# After its trial closed, a tracker retries an unreachable MLflow with this backoff for at most
# `background_delivery_s`, then leaves its journal to workers.tracking.delivery.
_RETRY_FIRST_S = 2.0
_RETRY_MAX_S = 60.0


@dataclass
class _Flush:
    done: threading.Event
    ok: bool = False


_WAKE = object()  # queued by begin_close so the sender thread notices the close at once


class TrialTracker:
    """The MLflow child run of one trial, fed asynchronously.

    Usage: `start()`, then `log_metrics(...)` per epoch (non-blocking), `close("FINISHED" | "FAILED")`.
    Get-or-create by the trial_key tag makes a restarted trial continue its run; epochs the run already
    holds are not logged again, and `backfill(history)` re-sends the epochs it is missing (those queued
    when the previous process died).

    `close` waits for MLflow at most its timeout. What MLflow has not taken by then stays with the sender
    thread, which keeps retrying in the background for up to `background_delivery_s` while the process
    lives; with a `spool_dir` it is also in the tracker's journal there, which the thread removes once
    the run holds everything and its status, and which workers.tracking.delivery delivers otherwise.
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
        spool_dir: str | os.PathLike[str] | None = None,
        background_delivery_s: float = 600.0,
        client: MlflowClient | None = None,
    ) -> None:
        self.tracking_uri = tracking_uri
        self.experiment_id = str(experiment_id)
        self.trial_key = trial_key
        self.tags = dict(tags or {})
        self.tags.setdefault(TRIAL_KEY_TAG, trial_key)
        self.params = dict(params or {})
        self.flush_interval_s = flush_interval_s
        self.max_pending = max_pending
        self.spool_dir = spool_dir
        self.background_delivery_s = background_delivery_s
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
        self._journal: RunJournal | None = None
        self._close_status: str | None = None
        self._closed = threading.Event()  # set once the run holds everything and its status

    # ----- public API (training thread) ---------------------------------------------------------------

    @property
    def run_id(self) -> str | None:
        """The MLflow run id once resolved (None while the server has not been reached yet)."""
        return self._run_id

    @property
    def created_run(self) -> bool:
        """True when this tracker created the run, False when it continued an existing one."""
        return self._created

    @property
    def journal_path(self) -> Path | None:
        """This tracker's journal in the spool directory (None without a spool directory)."""
        return self._journal.path if self._journal is not None else None

    def start(self, *, resolve_timeout_s: float = 10.0) -> TrialTracker:
        """Start the background thread and wait up to `resolve_timeout_s` for the run to be resolved (0: return
        at once and let the thread create the run meanwhile). Never raises on outage."""
        if self._thread is None:
            self._open_journal()
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
            if is_number(value)
        ]
        self._write_journal(lambda journal: journal.append_metrics(batch))
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

    def close(self, status: str = "FINISHED", *, timeout_s: float = CLOSE_TIMEOUT_S) -> bool:
        """Deliver what is queued and mark the run `status` (FINISHED, FAILED, KILLED), waiting at most
        `timeout_s`; True when MLflow took it all in time (else the thread goes on in the background)."""
        self.begin_close(status)
        return self.wait_closed(timeout_s)

    def begin_close(self, status: str) -> None:
        """Record `status` (in the journal, synced) and tell the thread to finish; returns at once."""
        if self._thread is None or self._close_status is not None:
            return
        self._close_status = status
        self._write_journal(lambda journal: journal.record_status(status))
        with contextlib.suppress(queue.Full):  # a full queue wakes the thread anyway
            self._queue.put_nowait(_WAKE)

    def wait_closed(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` for the run to hold everything and its status; True when it does."""
        if self._thread is None:
            return False
        if self._closed.wait(max(0.0, timeout_s)):
            return True
        undelivered = len(self._pending) + len(self._incoming)
        kept = f"journaled in {self._journal.path}" if self._journal is not None else "kept in memory"
        logger.warning(
            "MLflow has not taken the run of trial %s in time (%d metrics and the status pending): %s, "
            "delivered in the background",
            self.trial_key,
            undelivered,
            kept,
        )
        return False

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
            if isinstance(item, _Flush):
                item.ok = self._deliver()
                item.done.set()
                last_delivery = time.monotonic()
                continue
            if isinstance(item, list) and item:
                for entry in item:
                    if isinstance(entry, _BackfillRequest):
                        self._backfill = (
                            entry.history if self._backfill is None else self._backfill + entry.history
                        )
                        self._backfill_step_key = entry.step_key
                    else:
                        self._incoming.append(entry)
                self._bound_queued()
            if self._close_status is not None and self._queue.empty():
                self._finish(self._close_status)
                return
            due = time.monotonic() - last_delivery >= self.flush_interval_s
            if due or len(self._incoming) >= MAX_METRICS_PER_BATCH:
                self._deliver()
                last_delivery = time.monotonic()

    def _deliver(self) -> bool:
        """Resolve the run if needed, then send pending metrics; on failure keep them for the next try."""
        try:
            resolved_before = self._run_id is not None
            run_id = self._run_id if self._run_id is not None else self._resolve_run()
            if (
                resolved_before
                and not self._created
                and any(m.step not in self._held_steps for m in self._incoming)
            ):
                # A continued run: the attempt before this one may still be delivering epochs it logged (its
                # journal, or its tracker finishing in the background), so ask again which ones it holds.
                self._held_steps |= self._steps_held(run_id)
            if self._backfill is not None:
                self._queue_backfill()
            self._pending.extend(m for m in self._incoming if m.step not in self._held_steps)
            self._incoming.clear()
            while self._pending:
                chunk = self._pending[:MAX_METRICS_PER_BATCH]
                self._client.log_batch(run_id, metrics=chunk, synchronous=True)
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

    def _finish(self, status: str) -> None:
        """After close: deliver and terminate, retrying with backoff while MLflow is unreachable."""
        give_up_at = time.monotonic() + self.background_delivery_s
        delay = _RETRY_FIRST_S
        while not (self._deliver() and self._terminate(status)):
            if time.monotonic() + delay > give_up_at:
                where = f"left in {self._journal.path}" if self._journal is not None else "lost"
                logger.warning(
                    "MLflow run of trial %s not completed: its metrics are %s", self.trial_key, where
                )
                self._end_journal(discard=False)
                return
            time.sleep(delay)
            delay = min(2 * delay, _RETRY_MAX_S)
        # Metrics dropped from memory (a queue overflow) are still in the journal: leave it to a delivery.
        self._end_journal(discard=not self._dropped)
        self._closed.set()

    def _resolve_run(self) -> str:
        run, self._created = get_or_create_trial_run(
            self._client, self.experiment_id, self.trial_key, self.tags
        )
        if not self._created:
            if run.info.status != "RUNNING":
                self._client.update_run(run.info.run_id, status="RUNNING")
            # A restarted trial recomputes epochs after its last Tune checkpoint; epochs the run already
            # holds are not logged twice (on CPU the recomputed values are identical anyway).
            self._held_steps = self._steps_held(run.info.run_id)
        log_missing_params(self._client, run, self.params)
        self._run_id = run.info.run_id
        return self._run_id

    def _steps_held(self, run_id: str) -> set[int]:
        return {m.step for m in self._client.get_metric_history(run_id, PROBE_METRIC)}

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
                if is_number(v)
            )
        self._held_steps.update(m.step for m in missing)
        self._pending[:0] = missing
        self._backfill = None
        self._write_journal(lambda journal: journal.append_metrics(missing))

    def _terminate(self, status: str) -> bool:
        if self._run_id is None:
            return False
        try:
            self._client.set_terminated(self._run_id, status=status)
        except Exception as error:
            if not self._failing:
                logger.warning("could not mark MLflow run %s %s: %s", self._run_id, status, error)
            self._failing = True
            return False
        return True

    # ----- journal ------------------------------------------------------------------------------------

    def _open_journal(self) -> None:
        if self.spool_dir is None:
            return
        identity = TrialRunIdentity(
            tracking_uri=str(self.tracking_uri or ""),
            experiment_id=self.experiment_id,
            trial_key=self.trial_key,
            tags=self.tags,
            params=self.params,
        )
        try:
            self._journal = RunJournal.create(self.spool_dir, identity)
        except OSError as error:
            logger.warning(
                "no MLflow spool for trial %s (%s): tracking stays in memory", self.trial_key, error
            )

    def _write_journal(self, write: Callable[[RunJournal], None]) -> None:
        journal = self._journal
        if journal is None:
            return
        try:
            write(journal)
        except OSError as error:  # a full or failing disk must not stop training: go on in memory
            logger.warning(
                "MLflow spool of trial %s failed (%s): tracking stays in memory", self.trial_key, error
            )
            self._journal = None
            with contextlib.suppress(OSError):
                journal.release()

    def _end_journal(self, *, discard: bool) -> None:
        journal, self._journal = self._journal, None
        if journal is None:
            return
        with contextlib.suppress(OSError):
            journal.discard() if discard else journal.release()

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


def close_trackers(
    trackers: Iterable[TrialTracker], status: str, *, timeout_s: float = CLOSE_TIMEOUT_S
) -> bool:
    """Close several trackers (the seeds of one trial) within ONE bound; True when MLflow took them all."""
    trackers = list(trackers)
    for tracker in trackers:
        tracker.begin_close(status)
    deadline = time.monotonic() + timeout_s
    return all([tracker.wait_closed(deadline - time.monotonic()) for tracker in trackers])


def tracker_from_trial_config(config: Mapping[str, Any], **options: Any) -> TrialTracker | None:
    """A tracker for the trial (journaling to the config's spool directory, if any), or None when the config
    names no MLflow server/experiment."""
    identity = trial_run_identity(config)
    if identity is None:
        return None
    options.setdefault("spool_dir", config.get(Key.MLFLOW_SPOOL_DIR) or None)  # absent: no journal
    return TrialTracker(
        tracking_uri=identity.tracking_uri,
        experiment_id=identity.experiment_id,
        trial_key=identity.trial_key,
        tags=identity.tags,
        params=identity.params,
        **options,
    )

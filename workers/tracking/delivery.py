"""Deliver the tracking spool (workers.tracking.spool) to MLflow once it answers again.

Journals are left by trackers whose process ended before MLflow took everything (an outage at the trial's
end, a killed process), and by the driver when it could not complete a run from Tune's records. Who
delivers them: each trial process when it starts (`start_spool_delivery`, in the background), and the
driver when its Tune experiment ends (`deliver_spool`).

Delivery is idempotent: the run is found by its trial key (created only when missing), only params the
run lacks are sent, a metric is sent only for the steps the run does not hold for that key (so a journal
delivered twice, or after the driver completed the run from Tune's records, leaves each step once), and
the journal's status is applied only to a run still RUNNING (a run a later attempt or the driver already
closed keeps its status). A journal is removed once delivered; one MLflow refuses (its experiment was
deleted) is set aside as `.refused`, so it blocks nothing.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlflow.entities import Metric
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from studies.trial_config import Key
from workers.tracking.runs import (
    MAX_METRICS_PER_BATCH,
    get_or_create_trial_run,
    history_metrics,
    log_missing_params,
    trial_run_identity,
)
from workers.tracking.spool import RunJournal, SpooledRun, journal_paths

__all__ = [
    "SpoolDelivery",
    "deliver_spool",
    "deliver_spooled_run",
    "spool_trial_history",
    "start_spool_delivery",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SpoolDelivery:
    delivered: int  # journals MLflow now holds (removed from the spool)
    left: int  # journals still in the spool (held by a live tracker, another server's, or not tried)
    failed: bool  # MLflow failed during this delivery (the journals after it were not tried)


def deliver_spooled_run(
    client: MlflowClient, spooled: SpooledRun, *, lookup_timeout_s: float | None = None
) -> str:
    """Bring the run `spooled` describes up to date (see the module docstring); returns its run id.
    `lookup_timeout_s` bounds the first request (the run lookup) for callers that must not wait long."""
    identity = spooled.identity
    run, created = get_or_create_trial_run(
        client, identity.experiment_id, identity.trial_key, identity.tags, lookup_timeout_s=lookup_timeout_s
    )
    run_id = run.info.run_id
    log_missing_params(client, run, identity.params)
    # The first value a journal holds for a (key, step) is the one its tracker sent; a later one for the
    # same step is an epoch recomputed after a restart, which the tracker did not send again either.
    first: dict[str, dict[int, Metric]] = {}
    for metric in spooled.metrics:
        first.setdefault(metric.key, {}).setdefault(metric.step, metric)
    missing: list[Metric] = []
    for key, by_step in first.items():
        held = set() if created else {m.step for m in client.get_metric_history(run_id, key)}
        missing.extend(m for step, m in by_step.items() if step not in held)
    for start in range(0, len(missing), MAX_METRICS_PER_BATCH):
        client.log_batch(run_id, metrics=missing[start : start + MAX_METRICS_PER_BATCH])
    if spooled.status is not None and run.info.status == "RUNNING":
        client.set_terminated(run_id, status=spooled.status)
    return run_id


def deliver_spool(
    client: MlflowClient,
    spool_dir: str | os.PathLike[str],
    *,
    lock_wait_s: float = 0.0,
    lookup_timeout_s: float | None = None,
) -> SpoolDelivery:
    """Deliver every journal in `spool_dir` that names `client`'s tracking server, oldest first, until
    MLflow fails. A journal still locked by its tracker is waited for up to `lock_wait_s` (all together:
    the trial processes of a Tune experiment that just ended may still be exiting); `lookup_timeout_s`
    bounds each run lookup (see deliver_spooled_run)."""
    tracking_uri = _normalized(str(client.tracking_uri))
    deadline = time.monotonic() + lock_wait_s
    delivered = 0
    failed = False
    for path in journal_paths(spool_dir):
        journal = _claim(path, deadline)
        if journal is None:
            continue
        spooled = journal.read()
        if spooled is None or _normalized(spooled.identity.tracking_uri) != tracking_uri:
            if spooled is None:
                logger.warning("unreadable MLflow spool journal %s: left in place", path)
            journal.release()  # another server's (or unreadable): not ours to deliver
            continue
        try:
            deliver_spooled_run(client, spooled, lookup_timeout_s=lookup_timeout_s)
        except Exception as error:
            if _refused(error):
                logger.warning(
                    "MLflow refused the spooled run in %s (%s): set aside as %s",
                    path,
                    error,
                    journal.set_aside(),
                )
                continue
            journal.release()  # MLflow down again: keep this journal and the rest for the next delivery
            logger.warning(
                "MLflow spool delivery to %s stopped (%s: %s); journals stay in %s",
                tracking_uri,
                type(error).__name__,
                error,
                spool_dir,
            )
            failed = True
            break
        journal.discard()
        delivered += 1
    if delivered:
        logger.info("delivered %d spooled MLflow runs from %s", delivered, spool_dir)
    return SpoolDelivery(delivered=delivered, left=len(journal_paths(spool_dir)), failed=failed)


def spool_trial_history(
    config: Mapping[str, Any],
    history: Sequence[Mapping[str, Any]],
    *,
    status: str,
    step_key: str = "epoch",
) -> Path | None:
    """Journal a trial's reported epochs and final status for a later delivery (the driver could not
    complete its run); None when the config names no spool directory or no MLflow run."""
    identity = trial_run_identity(config)
    spool_dir = config.get(Key.MLFLOW_SPOOL_DIR)
    if identity is None or not spool_dir:
        return None
    journal = RunJournal.create(spool_dir, identity)
    try:
        journal.append_metrics(history_metrics(history, step_key=step_key))
        journal.record_status(status)
    finally:
        journal.release()
    return journal.path


_courier: threading.Thread | None = None
_courier_lock = threading.Lock()


def start_spool_delivery(spool_dir: str | os.PathLike[str], tracking_uri: str) -> threading.Thread | None:
    """Deliver the spool in a background thread (one per process at a time; None when one is running)."""
    global _courier
    with _courier_lock:
        if _courier is not None and _courier.is_alive():
            return None
        _courier = threading.Thread(
            target=_deliver_quietly,
            args=(Path(spool_dir), tracking_uri),
            name="mlflow-spool-delivery",
            daemon=True,
        )
        _courier.start()
        return _courier


def _deliver_quietly(spool_dir: Path, tracking_uri: str) -> None:
    try:
        deliver_spool(MlflowClient(tracking_uri), spool_dir)
    except Exception:  # best-effort: a spool that cannot be read now is tried again by the next trial
        logger.exception("MLflow spool delivery from %s failed", spool_dir)


def _claim(path: Path, deadline: float) -> RunJournal | None:
    while True:
        journal = RunJournal.claim(path)
        if journal is not None or not path.exists() or time.monotonic() >= deadline:
            return journal
        time.sleep(0.2)


def _refused(error: Exception) -> bool:
    """MLflow answered and refused (a deleted experiment, an invalid value): retrying cannot help. Rate
    limiting (429) and server errors (5xx) are an outage, not a refusal."""
    if not isinstance(error, MlflowException):
        return False
    status = error.get_http_status_code()
    return 400 <= status < 500 and status != 429


def _normalized(uri: str) -> str:
    return uri.rstrip("/")

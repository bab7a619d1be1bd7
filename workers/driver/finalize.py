"""After a Tune experiment: close every trial's MLflow run from Tune's own record of its epochs."""

from __future__ import annotations

import logging
from typing import Any

from mlflow.tracking import MlflowClient
from sqlalchemy.engine import Engine

from studies.numbers import is_finite_number
from studies.store import fill_trial_mlflow_run, list_trials, session_scope
from studies.trial_config import DRIVER_ONLY_KEYS, Key, one_seed_config
from workers.driver.recorder import seed_results, tune_bookkeeping_keys
from workers.tracking.delivery import deliver_spool, spool_trial_history
from workers.tracking.tracker import LOOKUP_TIMEOUT_S, finalize_trial_run, find_trial_run
from workers.trials.keys import flatten_trial_config

__all__ = ["fill_missing_run_ids", "finalize_mlflow_runs", "reported_history"]

log = logging.getLogger(__name__)


def finalize_mlflow_runs(results, client: MlflowClient, experiment_id: str, *, engine: Engine) -> None:
    """Close every trial's MLflow run from Tune's own record of its epochs, and give its database row the
    run's id where it has none (the trial ended while MLflow was down, so the recorder found no run).

    Tune ends an early-stopped (ASHA) trial's actor without waiting for its logging thread, so the last
    epoch and the FINISHED status could otherwise be lost. First the spool is delivered (what trackers could
    not send: their exact metrics, params and statuses, and runs never created during an outage), then each
    run gets the epochs it still lacks; both are idempotent. While MLflow does not answer, each run is
    journaled in the spool instead, for the next delivery.
    """
    results = list(results)
    spool_dirs = {
        config[Key.MLFLOW_SPOOL_DIR]
        for config in (r.config or {} for r in results)
        if config.get(Key.MLFLOW_SPOOL_DIR)
    }
    reachable = True
    for spool_dir in sorted(spool_dirs):
        if not reachable:
            break
        # The trial processes that just ended may still hold their journals for a moment.
        delivery = deliver_spool(client, spool_dir, lock_wait_s=10.0, lookup_timeout_s=LOOKUP_TIMEOUT_S)
        reachable = not delivery.failed
    for result in results:
        trial_id = (result.metrics or {}).get("trial_id")
        if not trial_id or result.config is None:
            continue
        config = flatten_trial_config(result.config)
        rows = reported_history(result.metrics_dataframe)
        # A seed batch closes one run per seed, each from its own columns (per_seed/<seed>/<metric>).
        per_row = [seed_results(config, trial_id, row) for row in rows]
        status = "FAILED" if result.error else "FINISHED"
        for index, (seed, key, _) in enumerate(seed_results(config, trial_id, {})):
            history = [dict(parts[index][2]) for parts in per_row]
            if reachable:
                try:
                    run_id = finalize_trial_run(client, experiment_id, key, history=history, status=status)
                    if run_id is not None:
                        with session_scope(engine) as session:
                            fill_trial_mlflow_run(
                                session, study_id=config[Key.STUDY_ID], trial_key=key, mlflow_run_id=run_id
                            )
                    continue
                except Exception as exc:  # an outage must not fail a study whose results are in the DB
                    log.warning("could not finalize the MLflow run of %s (seed %s): %s", key, seed, exc)
                    reachable = False  # the rest go straight to the spool instead of waiting on MLflow
            try:
                spool_trial_history(_seed_run_config(config, seed, key), history, status=status)
            except OSError as exc:
                log.warning("could not spool the MLflow run of %s (seed %s): %s", key, seed, exc)


def fill_missing_run_ids(client: MlflowClient, experiment_id: str, *, engine: Engine, study_id: str) -> int:
    """Give each trial row of the study without an MLflow run id its run's id, where MLflow holds one; returns
    how many rows got one. These are trials lost with a killed driver before their first epoch (the recorder
    writes the id then): their rows ended with that driver and no experiment result names them.

    Best-effort, like all tracking: stops at the first MLflow failure, and never raises.
    """
    try:
        with session_scope(engine, readonly=True) as session:
            keys = [t.trial_key for t in list_trials(session, study_id=study_id) if t.mlflow_run_id is None]
        filled = 0
        for key in keys:
            run = find_trial_run(client, experiment_id, key)
            if run is not None:
                with session_scope(engine) as session:
                    filled += fill_trial_mlflow_run(
                        session, study_id=study_id, trial_key=key, mlflow_run_id=run.info.run_id
                    )
        return filled
    except Exception as exc:
        log.warning("could not give the trials of study %s their MLflow run ids: %s", study_id, exc)
        return 0


def _seed_run_config(config: dict[str, Any], seed: int, trial_key: str) -> dict[str, Any]:
    """The config one seed's tracker was built from (workers.trials.trainable), for its run's tags and params."""
    return one_seed_config({k: v for k, v in config.items() if k not in DRIVER_ONLY_KEYS}, seed, trial_key)


def reported_history(frame) -> list[dict[str, float]]:
    """Per-epoch rows of what the trial itself reported: Tune's bookkeeping columns and NaN padding dropped,
    one row per epoch. A retried trial reports again the epochs after its last checkpoint, and Tune appends
    them to the trial's history: the last report of an epoch is kept, as the study database keeps it."""
    if frame is None:
        return []
    from ray.tune.result import CONFIG_PREFIX

    bookkeeping = tune_bookkeeping_keys()
    rows: dict[Any, dict[str, float]] = {}
    for index, record in enumerate(frame.to_dict("records")):
        row = {
            k: v
            for k, v in record.items()
            if k not in bookkeeping and not k.startswith(CONFIG_PREFIX + "/") and is_finite_number(v)
        }
        rows[row.get("epoch", ("row", index))] = row  # a repeated epoch replaces its earlier report
    return list(rows.values())

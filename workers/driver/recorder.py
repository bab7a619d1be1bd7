"""A Ray Tune callback that writes every trial to the study database: its start, each epoch it reports
(the per-epoch history) and its end."""

from __future__ import annotations

import logging
import math
import numbers
import os
from collections.abc import Mapping
from typing import Any

from mlflow.tracking import MlflowClient
from ray.tune import Callback
from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback
from sqlalchemy.engine import Engine

from studies.store import (
    TrialStatus,
    fill_trial_mlflow_run,
    make_engine,
    record_trial,
    record_trial_epoch,
    session_scope,
)
from studies.trial_config import ORCHESTRATION_KEYS, PER_SEED, Key
from workers.driver.trial_errors import describe_trial_error, trial_error_text
from workers.tracking.runs import tag_trial_error
from workers.tracking.tracker import find_trial_run
from workers.training.config import RESUME_INSENSITIVE_FIELDS
from workers.trials.keys import flatten_trial_config, seed_trial_keys

__all__ = [
    "TrialRecorder",
    "numeric_metrics",
    "reported_metrics",
    "seed_results",
    "study_callbacks",
    "tune_bookkeeping_keys",
]

log = logging.getLogger(__name__)

# Keys of the trial config that say where and how a trial ran, not what it is: they stay out of the
# stored config (study, phase and key have their own columns).
_NOT_SCIENTIFIC = ORCHESTRATION_KEYS | RESUME_INSENSITIVE_FIELDS | {Key.MAY_STOP_EARLY}


def numeric_metrics(result: Mapping[str, Any] | None) -> dict[str, float]:
    """The finite numbers of a Tune result (Tune adds bookkeeping such as `config`, timestamps, ids)."""
    out: dict[str, float] = {}
    for key, value in (result or {}).items():
        if isinstance(value, bool) or (isinstance(value, (int, float)) and math.isfinite(float(value))):
            out[key] = float(value)
    return out


def tune_bookkeeping_keys() -> frozenset[str]:
    """Result keys Tune adds to what a trial reports (timestamps, pid, iteration, done, ...)."""
    from ray.tune.result import AUTO_RESULT_KEYS

    return frozenset(AUTO_RESULT_KEYS) | {"done", "trial_id", "should_checkpoint"}


def seed_results(
    config: Mapping[str, Any], tune_trial_id: str, result: Mapping[str, Any] | None
) -> list[tuple[int, str, Mapping[str, Any]]]:
    """(seed, that seed's trial key, that seed's part of `result`) for every seed of a Tune trial: the
    whole result for a single-seed trial; a seed batch's `per_seed` entry (nested, or flattened by Tune
    as `per_seed/<seed>/<metric>`) for each of its seeds."""
    keys = seed_trial_keys(config, tune_trial_id)
    if len(keys) == 1:
        ((seed, key),) = keys.items()
        return [(seed, key, result or {})]
    result = result or {}
    nested = result.get(PER_SEED)
    out = []
    for seed, key in keys.items():
        if isinstance(nested, Mapping):
            part = nested.get(str(seed)) or {}
        else:
            prefix = f"{PER_SEED}/{seed}/"
            part = {k[len(prefix) :]: v for k, v in result.items() if k.startswith(prefix)}
        out.append((seed, key, part))
    return out


def reported_metrics(result: Mapping[str, Any] | None) -> dict[str, float]:
    """The finite numbers the trial itself reported: Tune's bookkeeping (timestamps, pid, iteration) left out."""
    bookkeeping = tune_bookkeeping_keys()
    return {k: v for k, v in numeric_metrics(result).items() if k not in bookkeeping}


class TrialRecorder(Callback):
    """Records each trial as it starts, every epoch it reports, and once it completes or errors.

    record_trial upserts by key and record_trial_epoch by (key, epoch), so repeats (a retried trial
    re-reporting epochs after its checkpoint) are harmless.

    A trial's MLflow run id is written with its first epoch, not only at its end: a trial lost with a
    killed driver never ends here, and its row keeps the id of its run all the same.

    Tune pickles its callbacks with the experiment state (so a restored sweep keeps recording), hence
    the recorder holds URLs and opens its engine and MLflow client lazily.
    """

    def __init__(
        self,
        database_url: str,
        *,
        metric_key: str | Mapping[str, str],
        tracking_uri: str | None,
        experiment_id: str,
    ):
        self.database_url = database_url
        # The phase's primary metric, e.g. test_accuracy (final/grid) or objective (tune); one experiment
        # that runs several phases passes it per phase ({"tune": "objective", "final": "test_accuracy"}).
        self.metric_key = metric_key
        self.tracking_uri = tracking_uri
        self.experiment_id = experiment_id
        self._engine: Engine | None = None
        self._mlflow: MlflowClient | None = None
        self._run_looked_up: set[str] = set()  # trial keys whose run this driver has looked for once

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_run_looked_up"} | {
            "_engine": None,
            "_mlflow": None,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._run_looked_up = set()  # a restored driver looks each trial's run up once again

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            self._engine = make_engine(self.database_url)
        return self._engine

    @property
    def mlflow(self) -> MlflowClient | None:
        if self._mlflow is None and self.tracking_uri:
            self._mlflow = MlflowClient(self.tracking_uri)
        return self._mlflow

    def on_trial_start(self, iteration, trials, trial, **info):
        self._record(trial, status=TrialStatus.RUNNING, error=None)

    def on_trial_result(self, iteration, trials, trial, result, **info):
        epoch = result.get("epoch") if isinstance(result, Mapping) else None
        if isinstance(epoch, bool) or not isinstance(epoch, numbers.Real) or not float(epoch).is_integer():
            return  # not an epoch report of the training loop (nothing else reports, but stay safe)
        config = flatten_trial_config(trial.config)
        for _, key, seed_result in seed_results(config, trial.trial_id, result):
            try:
                with session_scope(self.engine) as session:
                    record_trial_epoch(
                        session,
                        study_id=config[Key.STUDY_ID],
                        trial_key=key,
                        epoch=int(float(epoch)),  # a whole number (checked above)
                        metrics=reported_metrics(seed_result),
                    )
            except Exception:  # a locked DB loses one epoch row, never the sweep
                log.exception("could not record epoch %s of trial %s", epoch, key)
            self._fill_run_id(config[Key.STUDY_ID], key)

    def on_trial_complete(self, iteration, trials, trial, **info):
        self._record(trial, status=TrialStatus.SUCCEEDED, error=None)

    def on_trial_error(self, iteration, trials, trial, **info):
        # Type, message and the trace's last lines, from the error file Tune has just written.
        self._record(trial, status=TrialStatus.FAILED, error=describe_trial_error(trial_error_text(trial)))

    def _record(self, trial, *, status: TrialStatus, error: str | None) -> None:
        config = flatten_trial_config(trial.config)
        metric_key = self._metric_key(config[Key.PHASE])
        # A seed-batched trial is one row per seed, each keyed and valued as its single-seed trial would be.
        for seed, key, seed_result in seed_results(config, trial.trial_id, trial.last_result):
            metrics = numeric_metrics(seed_result)
            value = metrics.get(metric_key) if status == TrialStatus.SUCCEEDED else None
            seed_status, seed_error = status, error
            if status == TrialStatus.SUCCEEDED and value is None:
                seed_status, seed_error = TrialStatus.FAILED, f"trial finished without reporting {metric_key}"
            scientific = {k: v for k, v in config.items() if k not in _NOT_SCIENTIFIC}
            scientific[Key.SEED] = seed
            run_id = self._mlflow_run_id(key) if seed_status != TrialStatus.RUNNING else None
            try:
                with session_scope(self.engine) as session:
                    record_trial(
                        session,
                        study_id=config[Key.STUDY_ID],
                        trial_key=key,
                        phase=config[Key.PHASE],
                        method=config[Key.METHOD],
                        config=scientific,
                        seed=seed,
                        status=seed_status,
                        metrics=metrics,
                        metric_value=value,
                        mlflow_run_id=run_id,
                        error=seed_error,
                        group=config.get(Key.GROUP),
                    )
            except Exception:  # the DB being briefly locked must not kill the sweep; Tune carries on
                log.exception("could not record trial %s", key)
            if seed_status == TrialStatus.FAILED and seed_error and run_id is not None:
                self._tag_error(run_id, key, seed_error)

    def _fill_run_id(self, study_id: str, trial_key: str) -> None:
        """Give the trial's row its MLflow run id at its first epoch (once per trial and driver: one lookup,
        bounded like the one at its end); its tracker creates the run while the trial loads its data."""
        if trial_key in self._run_looked_up:
            return
        self._run_looked_up.add(trial_key)
        run_id = self._mlflow_run_id(trial_key)
        if run_id is None:
            return  # not found (MLflow down, run not created yet): the trial's end records it
        try:
            with session_scope(self.engine) as session:
                fill_trial_mlflow_run(session, study_id=study_id, trial_key=trial_key, mlflow_run_id=run_id)
        except Exception:
            log.exception("could not record the MLflow run of trial %s", trial_key)

    def _tag_error(self, run_id: str, trial_key: str, error: str) -> None:
        """The trial's error on its MLflow run too (best-effort: the row is what the API serves)."""
        if self.mlflow is None:
            return
        try:
            tag_trial_error(self.mlflow, run_id, error)
        except Exception as exc:
            log.warning("could not tag the MLflow run of %s with its error: %s", trial_key, exc)

    def _metric_key(self, phase: str) -> str:
        return self.metric_key if isinstance(self.metric_key, str) else self.metric_key[phase]

    def _mlflow_run_id(self, trial_key: str) -> str | None:
        if self.mlflow is None:
            return None
        try:
            run = find_trial_run(self.mlflow, self.experiment_id, trial_key)
        except Exception as exc:  # a tracking outage must not stop the sweep: the DB row comes first
            log.warning("MLflow lookup for %s failed: %s", trial_key, exc)
            return None
        return run.info.run_id if run is not None else None


def study_callbacks(
    database_url: str, *, metric_key: str | dict[str, str], tracking_uri: str, experiment_id: str
) -> list[Callback]:
    """The callbacks of a study's Tune runs: the recorder, and Tune's CSV and JSON loggers, which hold each
    trial's history (Result.metrics_dataframe reads them). Tune's TensorBoard logger, which nothing here
    reads, is left out: about 7 % of a driver's CPU.

    Also quiets Tune's warning about frequent experiment snapshots: a study keeps one checkpoint per trial
    (num_to_keep=1), so Tune snapshots the experiment after every checkpoint, on purpose (a restarted driver
    resumes from the snapshot), and would say so in the study's log several times a second."""
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")  # else Tune adds the loggers it misses
    os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
    recorder = TrialRecorder(
        database_url, metric_key=metric_key, tracking_uri=tracking_uri, experiment_id=experiment_id
    )
    return [recorder, CSVLoggerCallback(), JsonLoggerCallback()]

"""Before a study is marked succeeded: the store holds every trial the study planned, or the study fails
saying which are missing.

The store can lack a trial that ran: its row was written to a database that was then restored from an older
copy, the write failed while the database was locked or full, or the driver that would have recorded its
end was killed. What ran is still known elsewhere: Tune's results of the study's experiment (every trial,
with its last report, config and error; kept across restored drivers) and MLflow (each trial's run in the
study's experiment, tagged with its trial key, holding its metrics). `ensure_complete` runs once the Tune
experiment has ended:

1. every trial of Tune's results whose row is missing or has no outcome is recorded from Tune's record
   (its outcome, metrics and per-epoch history), as the recorder would have recorded it;
2. where the store still lacks planned trials, every run of the study's MLflow experiment with a trial
   key and its phase's final metric whose row has no outcome is recorded from MLflow (its metrics, and its
   config from its params); a complete store asks MLflow nothing;
3. what the study planned (studies.store.completeness: each tuned method's samples, each final or grid
   trial; a sequential design's looks, replayed over the stored results as workers.driver.looks does,
   decide how many finals) is compared with the store; a trial still without an outcome makes the study
   fail with IncompleteStudyError, naming every one, instead of succeeding without it;
4. a sequential study's looks are then stored (workers.driver.looks.reconcile_looks), over complete results.

Recovery is best-effort where MLflow does not answer (the missing trials are then named); it never
replaces a stored outcome.
"""

from __future__ import annotations

import ast
import json
import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mlflow.entities import Run, ViewType
from mlflow.tracking import MlflowClient
from sqlalchemy.engine import Engine

from studies.sequential import monitor_for
from studies.spec import DATASET_METRICS, StudySpec
from studies.store import (
    TrialStatus,
    TrialView,
    list_trials,
    record_trial,
    record_trial_epoch,
    session_scope,
)
from studies.store.completeness import (
    OUTCOMES,
    PlannedTrial,
    describe_missing,
    planned_result_trials,
    planned_tune_trials,
)
from studies.trial_config import FINAL_PHASE, GRID_PHASE, ORCHESTRATION_KEYS, TUNE_PHASE, Key
from workers.driver.finalize import fill_missing_run_ids, reported_history
from workers.driver.looks import reconcile_looks
from workers.driver.recorder import numeric_metrics, reported_metrics, seed_results
from workers.tracking.runs import TRIAL_KEY_TAG
from workers.training.config import RESUME_INSENSITIVE_FIELDS
from workers.trials.keys import flatten_trial_config, trial_key_for

__all__ = [
    "Completeness",
    "IncompleteStudyError",
    "ensure_complete",
    "recover_from_mlflow",
    "recover_from_tune",
]

log = logging.getLogger(__name__)

# Keys of a trial config that say where and how a trial ran, not what it is: left out of the stored config,
# as the recorder leaves them out (workers.driver.recorder).
_NOT_SCIENTIFIC = ORCHESTRATION_KEYS | RESUME_INSENSITIVE_FIELDS | {Key.MAY_STOP_EARLY}
_STUDY_TAG = "normlab.study_id"
_MLFLOW_PAGE = 1000


class IncompleteStudyError(RuntimeError):
    """The study's experiment ended but the store, Tune and MLflow together lack trials it planned."""


@dataclass
class Completeness:
    """What `ensure_complete` found: trials recovered from each source, and what is still missing."""

    from_tune: list[str] = field(default_factory=list)  # trial keys recorded from Tune's results
    from_mlflow: list[str] = field(default_factory=list)  # trial keys recorded from MLflow runs
    missing: list[PlannedTrial] = field(default_factory=list)  # planned final/grid trials without an outcome
    tune_short: dict[str, int] = field(default_factory=dict)  # tuned method -> tuning trials without one
    planned: int = 0  # final/grid trials planned

    @property
    def complete(self) -> bool:
        return not self.missing and not self.tune_short


def ensure_complete(
    study_id: str,
    spec: StudySpec,
    engine: Engine,
    *,
    results: Iterable[Any],
    client: MlflowClient | None,
    experiment_id: str,
) -> Completeness:
    """Recover what Tune and MLflow hold into the store, check it holds every planned trial, and store a
    sequential study's looks (the module docstring); raises IncompleteStudyError naming what is missing."""
    metric, higher_is_better = DATASET_METRICS[spec.dataset]
    metric_keys = {TUNE_PHASE: "objective", FINAL_PHASE: f"test_{metric}", GRID_PHASE: f"test_{metric}"}
    found = Completeness()
    found.from_tune = recover_from_tune(engine, study_id, results, metric_keys=metric_keys)
    if (
        client is not None and found.from_tune
    ):  # their runs exist in MLflow: give the recovered rows their ids
        fill_missing_run_ids(client, experiment_id, engine=engine, study_id=study_id)
    _count_shortfall(found, spec, engine, study_id, higher_is_better=higher_is_better)
    if client is not None and not found.complete:  # MLflow is asked only for what the store still lacks
        found.from_mlflow = recover_from_mlflow(
            client, experiment_id, engine, study_id, metric_keys=metric_keys
        )
        if found.from_mlflow:
            _count_shortfall(found, spec, engine, study_id, higher_is_better=higher_is_better)
    if found.from_tune or found.from_mlflow:
        log.warning(
            "study %s: recovered %d trial(s) missing from the store from Tune's results and %d from MLflow: %s",
            study_id,
            len(found.from_tune),
            len(found.from_mlflow),
            ", ".join([*found.from_tune, *found.from_mlflow]),
        )
    if not found.complete:
        keys = [_planned_key(study_id, p) for p in found.missing]
        tuning = [f"{n} of {m}" for m, n in found.tune_short.items()]
        missing = describe_missing(found.missing, found.tune_short)
        raise IncompleteStudyError(
            f"study {study_id} is incomplete: its experiment ended but {missing} have no outcome in the "
            "store, in Tune's results or in MLflow"
            + (f"; missing trial keys: {', '.join(keys)}" if keys else "")
            + (f"; tuning trials missing: {', '.join(tuning)}" if tuning else "")
        )
    if spec.sequential is not None:
        monitor = reconcile_looks(engine, study_id, spec, higher_is_better=higher_is_better)
        decisions = ", ".join(f"{m}: {c.decision}" for m, c in monitor.comparisons.items())
        log.info("study %s: %d look(s) stored; %s", study_id, monitor.looks_taken, decisions)
    return found


def _count_shortfall(
    found: Completeness, spec: StudySpec, engine: Engine, study_id: str, *, higher_is_better: bool
) -> None:
    """Set what the study planned and which of it the store still lacks on `found`."""
    with session_scope(engine, readonly=True) as session:
        stored = list_trials(session, study_id=study_id)
    planned = planned_result_trials(spec, _replayed_looks(spec, stored, higher_is_better=higher_is_better))
    ended = {(t.phase, t.method, t.group, t.seed) for t in stored if t.status in OUTCOMES}
    found.planned = len(planned)
    found.missing = [p for p in planned if (p.phase, p.method, p.group, p.seed) not in ended]
    tune_counts: dict[str, int] = {}
    for trial in stored:
        if trial.phase == TUNE_PHASE and trial.status in OUTCOMES:
            tune_counts[trial.method] = tune_counts.get(trial.method, 0) + 1
    found.tune_short = {
        m: n - tune_counts.get(m, 0)
        for m, n in planned_tune_trials(spec).items()
        if tune_counts.get(m, 0) < n
    }


def _planned_key(study_id: str, trial: PlannedTrial) -> str:
    """The trial key the planned trial's row would have (workers.trials.keys)."""
    config: dict[str, Any] = {
        Key.STUDY_ID: study_id,
        Key.PHASE: trial.phase,
        Key.METHOD: trial.method,
        Key.SEED: trial.seed,
    }
    if trial.group:
        config[Key.GROUP] = trial.group
    return trial_key_for(config, None)


def _replayed_looks(spec: StudySpec, stored: Sequence[TrialView], *, higher_is_better: bool) -> list[Any]:
    """A sequential design's looks over the stored final results, as far as they are known: what decides
    how many finals the study planned. A look whose seeds are not all in the store is not taken (what it
    would decide is not known), so its seeds are the last planned, and named if missing."""
    design = spec.sequential
    if design is None:
        return []
    ended: dict[str, set[int]] = {arm: set() for arm in spec.sequential_arms}
    values: dict[str, dict[int, float]] = {arm: {} for arm in spec.sequential_arms}
    for trial in stored:
        if trial.phase != spec.seed_phase or trial.status not in OUTCOMES or trial.seed is None:
            continue
        arm = spec.arm_of(trial.method, trial.group)
        ended.setdefault(arm, set()).add(int(trial.seed))
        value = trial.metric_value
        if trial.status == TrialStatus.SUCCEEDED.value and value is not None and math.isfinite(value):
            values.setdefault(arm, {})[int(trial.seed)] = float(value)
    monitor = monitor_for(spec, higher_is_better=higher_is_better)
    arms = spec.sequential_arms
    for look, count in enumerate(design.looks()):
        if any(seed not in ended.get(m, set()) for m in arms for seed in design.seeds_added_at(look)):
            break
        # As workers.driver.looks.replay_from_values: look k sees every seed below its count.
        monitor.look({m: {s: v for s, v in seeds.items() if s < count} for m, seeds in values.items()})
        arms = monitor.open_arms()
        if not arms:
            break
    return list(monitor.records)


def _outcomes(engine: Engine, study_id: str) -> set[str]:
    """Trial keys of the study whose rows have an outcome."""
    with session_scope(engine, readonly=True) as session:
        return {t.trial_key for t in list_trials(session, study_id=study_id) if t.status in OUTCOMES}


def recover_from_tune(
    engine: Engine, study_id: str, results: Iterable[Any], *, metric_keys: Mapping[str, str]
) -> list[str]:
    """Record every trial of Tune's `results` (ray.tune.Result) whose row has no outcome, from Tune's own
    record: failed with its error, or succeeded with its phase's metric; returns the keys recorded."""
    ended = _outcomes(engine, study_id)
    recovered: list[str] = []
    for result in results:
        if result.config is None:
            continue
        config = flatten_trial_config(result.config)
        if config.get(Key.STUDY_ID) != study_id:
            continue
        metrics = dict(result.metrics or {})
        trial_id = metrics.get("trial_id")
        if config.get(Key.PHASE) == TUNE_PHASE and not trial_id:
            continue  # a tuning trial is named by Tune's id, which a trial that never reported lacks
        history = reported_history(getattr(result, "metrics_dataframe", None))
        history_parts = [seed_results(config, str(trial_id or ""), row) for row in history]
        for index, (seed, key, part) in enumerate(seed_results(config, str(trial_id or ""), metrics)):
            if key in ended:
                continue
            metric_key = metric_keys[config[Key.PHASE]]
            values = numeric_metrics(part)
            value = values.get(metric_key)
            if result.error is not None:
                status, error, value = (
                    TrialStatus.FAILED,
                    f"{type(result.error).__name__}: {result.error}",
                    None,
                )
            elif value is None:
                status, error = TrialStatus.FAILED, f"trial finished without reporting {metric_key}"
            else:
                status, error = TrialStatus.SUCCEEDED, None
            scientific = {k: v for k, v in config.items() if k not in _NOT_SCIENTIFIC}
            scientific[Key.SEED] = seed
            with session_scope(engine) as session:
                record_trial(
                    session,
                    study_id=study_id,
                    trial_key=key,
                    phase=config[Key.PHASE],
                    method=config[Key.METHOD],
                    config=scientific,
                    seed=seed,
                    status=status,
                    metrics=values,
                    metric_value=value,
                    mlflow_run_id=None,
                    error=error[:4000] if error else None,
                    group=config.get(Key.GROUP),
                )
                for parts in history_parts:
                    epoch = parts[index][2].get("epoch")
                    if isinstance(epoch, (int, float)) and float(epoch).is_integer():
                        record_trial_epoch(
                            session,
                            study_id=study_id,
                            trial_key=key,
                            epoch=int(epoch),
                            metrics=reported_metrics(parts[index][2]),
                        )
            recovered.append(key)
            ended.add(key)
    return recovered


def recover_from_mlflow(
    client: MlflowClient,
    experiment_id: str,
    engine: Engine,
    study_id: str,
    *,
    metric_keys: Mapping[str, str],
) -> list[str]:
    """Record every trial run of the study's experiment that holds its phase's final metric and whose row has
    no outcome, as succeeded with the run's metrics; returns the keys recorded. Best-effort: an MLflow that
    does not answer recovers nothing (and what is then missing is named by the caller)."""
    try:
        runs = _study_runs(client, experiment_id, study_id)
    except Exception as exc:
        log.warning("could not read the MLflow runs of study %s to recover its trials: %s", study_id, exc)
        return []
    ended = _outcomes(engine, study_id)
    recovered: list[str] = []
    for run in runs:
        tags = run.data.tags
        key, phase, method = tags.get(TRIAL_KEY_TAG), tags.get("normlab.phase"), tags.get("normlab.method")
        if not key or key in ended or phase is None or phase not in metric_keys or not method:
            continue
        value = run.data.metrics.get(metric_keys[phase])
        if value is None or not math.isfinite(value):
            continue  # no final result: the trial did not end here, whatever its run says
        seed = _int(tags.get("normlab.seed"))
        config = _params_config(run.data.params)
        config.update({Key.METHOD: method, Key.SEED: seed})
        with session_scope(engine) as session:
            record_trial(
                session,
                study_id=study_id,
                trial_key=key,
                phase=phase,
                method=method,
                config=config,
                seed=seed,
                status=TrialStatus.SUCCEEDED,
                metrics=dict(run.data.metrics),
                metric_value=float(value),
                mlflow_run_id=run.info.run_id,
                group=_group_of(key, study_id=study_id, phase=phase, method=method),
            )
        recovered.append(key)
        ended.add(key)
    return recovered


def _study_runs(client: MlflowClient, experiment_id: str, study_id: str) -> list[Run]:
    """Every active trial run of the study in its experiment, oldest first (so a duplicate's first run wins)."""
    if "'" in study_id or "\\" in study_id:
        raise ValueError(f"study id must not contain quotes or backslashes: {study_id!r}")
    runs: list[Run] = []
    token: str | None = None
    while True:
        page = client.search_runs(
            [experiment_id],
            filter_string=f"tags.`{_STUDY_TAG}` = '{study_id}'",
            run_view_type=ViewType.ACTIVE_ONLY,
            max_results=_MLFLOW_PAGE,
            order_by=["attributes.start_time ASC"],
            page_token=token,
        )
        runs.extend(run for run in page if run.data.tags.get(TRIAL_KEY_TAG))
        token = page.token
        if not token:
            return runs


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value not in (None, "", "None") else None
    except ValueError:
        return None


def _group_of(key: str, *, study_id: str, phase: str, method: str) -> str | None:
    """A grid trial's point label, from its key `<study>/<phase>/<method>/<group>/seed<n>`."""
    prefix = f"{study_id}/{phase}/{method}/"
    if phase == TUNE_PHASE or not key.startswith(prefix):
        return None
    middle = key[len(prefix) :].rsplit("/", 1)
    return middle[0] if len(middle) == 2 else None


def _params_config(params: Mapping[str, str]) -> dict[str, Any]:
    """The trial's config from its MLflow params (workers.tracking.runs.trial_params flattened it with dots
    and turned each value into text): nested again, each value read back as the literal it was."""
    config: dict[str, Any] = {}
    for name, text in params.items():
        target = config
        *parents, leaf = name.split(".")
        for part in parents:
            nested = target.setdefault(part, {})
            if not isinstance(nested, dict):
                break
            target = nested
        else:
            target[leaf] = _literal(text)
    return {k: v for k, v in config.items() if k not in _NOT_SCIENTIFIC}


def _literal(text: str) -> Any:
    for parse in (json.loads, ast.literal_eval):
        try:
            return parse(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    return text

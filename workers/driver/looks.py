"""A sequential study's looks, kept: stored as they are taken, logged on the study's MLflow parent run, and
checked against the stored trials once the study's experiment has ended.

`StoredLooks` is the `LookSink` of `workers.driver.final_schedule.SequentialFinals`. It holds URLs, not
connections: Tune pickles it with the search. `reconcile_looks` replays the design over the final trials
in the store after the experiment (the looks are a function of the seeds' results, so the replay gives the
records the live driver took) and records every look: a look whose write failed, or that an earlier,
killed driver took without saving, is stored now; a stored look that disagrees with the trials fails the
study loudly instead of being overwritten.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

from mlflow.tracking import MlflowClient
from sqlalchemy.engine import Engine

from studies.numbers import json_safe
from studies.sequential import DECISIONS, LookRecord, SequentialMonitor, monitor_for
from studies.spec import StudySpec
from studies.store import TrialStatus, list_trials, make_engine, record_look, session_scope

__all__ = ["StoredLooks", "describe_look", "reconcile_looks", "replay_from_values"]

log = logging.getLogger(__name__)

_STORE_ATTEMPTS = 5


def describe_look(record: LookRecord, *, two_sided: bool) -> str:
    """One line per comparison, as the driver log and the MLflow tags show a look; `two_sided`: a
    superiority design, whose bounds apply to |z|."""
    lines = [f"look {record.look}: seeds per arm {record.seeds_per_arm}"]
    for method, point in record.comparisons.items():
        # A two-sided (superiority) test compares |z| with its bounds; its efficacy bound is never negative.
        z = "|z|" if two_sided else "z"
        futility = "" if point.futility is None else f", futility {z} <= {point.futility:.2f}"
        lines.append(
            f"  {method}: {point.seeds} paired seeds, difference {point.estimate:+.4g}, z {point.z:.2f} "
            f"(efficacy {z} >= {point.efficacy:.2f}{futility}, level {point.level:.4g}): "
            f"{DECISIONS.get(point.decision, point.decision)}"
        )
    lines.append(
        f"  next: {', '.join(record.open_arms)}" if record.open_arms else "  every comparison is decided"
    )
    return "\n".join(lines)


def _two_sided(monitor: SequentialMonitor) -> bool:
    return monitor.design.test == "superiority"


class StoredLooks:
    """Stores each look and logs it on the MLflow parent run (best-effort for MLflow, retried for the store)."""

    def __init__(
        self, *, database_url: str, study_id: str, tracking_uri: str | None, parent_run_id: str
    ) -> None:
        self.database_url = database_url
        self.study_id = study_id
        self.tracking_uri = tracking_uri
        self.parent_run_id = parent_run_id
        self._engine: Engine | None = None
        self._mlflow: MlflowClient | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_engine": None, "_mlflow": None}

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            self._engine = make_engine(self.database_url)
        return self._engine

    def __call__(self, record: LookRecord, monitor: SequentialMonitor) -> None:
        log.info("study %s: %s", self.study_id, describe_look(record, two_sided=_two_sided(monitor)))
        self._store(record)
        self._log_to_mlflow(record, monitor)

    def _store(self, record: LookRecord) -> None:
        # A briefly locked database must not lose a look; reconcile_looks stores it at the end otherwise.
        delay = 0.5
        for attempt in range(1, _STORE_ATTEMPTS + 1):
            try:
                with session_scope(self.engine) as session:
                    record_look(session, study_id=self.study_id, record=record)
                return
            except Exception as exc:
                if attempt == _STORE_ATTEMPTS:
                    log.error("could not store look %d (kept for the end of the study): %s", record.look, exc)
                    return
                time.sleep(delay)
                delay *= 2

    def _log_to_mlflow(self, record: LookRecord, monitor: SequentialMonitor) -> None:
        if not self.tracking_uri:
            return
        try:
            if self._mlflow is None:
                self._mlflow = MlflowClient(self.tracking_uri)
            client = self._mlflow
            for method, point in record.comparisons.items():
                for name, value in (
                    ("z", point.z),
                    ("efficacy_bound", point.efficacy),
                    ("futility_bound", point.futility),
                ):
                    if value is not None and math.isfinite(value):
                        client.log_metric(
                            self.parent_run_id, f"sequential/{method}/{name}", value, step=record.look
                        )
            text = describe_look(record, two_sided=_two_sided(monitor))
            client.set_tag(self.parent_run_id, f"normlab.look.{record.look}", text[:5000])
            client.log_dict(self.parent_run_id, json_safe(monitor.to_json()), "sequential.json")
        except Exception as exc:  # tracking never fails a study
            log.warning("could not log look %d to MLflow: %s", record.look, exc)


def replay_from_values(
    spec: StudySpec, values: dict[str, dict[int, float]], *, higher_is_better: bool
) -> SequentialMonitor:
    """The looks a sequential study takes given its seeds' final results ({arm: {seed: value}}, arms as
    `StudySpec.sequential_arms` names them): look k sees every seed below the k-th look's count (an arm
    closed earlier has no later seeds, a failed seed has no value)."""
    design = spec.sequential
    assert design is not None, "only a sequential study has looks"
    monitor = monitor_for(spec, higher_is_better=higher_is_better)
    for count in design.looks():
        monitor.look({m: {s: v for s, v in seeds.items() if s < count} for m, seeds in values.items()})
        if not monitor.open_arms():
            break
    return monitor


def reconcile_looks(
    engine: Engine, study_id: str, spec: StudySpec, *, higher_is_better: bool
) -> SequentialMonitor:
    """Replay the design over the stored final trials and store every look (see the module docstring)."""
    with session_scope(engine, readonly=True) as session:
        trials = list_trials(session, study_id=study_id, phase=spec.seed_phase, status=TrialStatus.SUCCEEDED)
    values: dict[str, dict[int, float]] = {arm: {} for arm in spec.sequential_arms}
    for trial in trials:
        if trial.seed is not None and trial.metric_value is not None and math.isfinite(trial.metric_value):
            values.setdefault(spec.arm_of(trial.method, trial.group), {})[int(trial.seed)] = float(
                trial.metric_value
            )
    monitor = replay_from_values(spec, values, higher_is_better=higher_is_better)
    with session_scope(engine) as session:
        for record in monitor.records:
            record_look(session, study_id=study_id, record=record)
    return monitor

"""One study's results table and mechanism evidence, built from the store as GET /results builds them
(default metric, the study's reference, planned seeds and paper numbers). The study driver saves them
with the study's MLflow parent run when it ends."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session

from service.results_evidence import RESULT_PHASES, results_evidence
from service.store import TrialView, get_study, list_trials
from studies.evidence import Evidence
from studies.spec import DATASET_METRICS, StudySpec
from studies.tables import ResultsTable, TrialRecord, build_results_table
from studies.tables.dataset_notes import dataset_note

__all__ = ["StudyResults", "planned_seeds", "stored_metric_names", "study_results", "trial_records"]


@dataclass(frozen=True)
class StudyResults:
    table: ResultsTable
    evidence: Evidence


def study_results(session: Session, *, study_id: str, confidence: float = 0.95) -> StudyResults | None:
    """The results of one study, or None while it has no final-phase or grid trials."""
    study = get_study(session, study_id=study_id)
    trials = list_trials(session, study_id=study_id, phase=list(RESULT_PHASES))
    if not trials:
        return None
    spec = StudySpec.model_validate(study.spec)
    metric, higher_is_better = DATASET_METRICS[study.dataset]
    records = trial_records(trials)
    table = build_results_table(
        records,
        dataset=study.dataset,
        metric=metric,
        higher_is_better=higher_is_better,
        reference=spec.reference,
        confidence=confidence,
        planned_seeds=planned_seeds([spec]),
        paper_values=dict(spec.paper_numbers),
        dataset_note=dataset_note(study.dataset),
    )
    evidence = results_evidence(
        session,
        trials=trials,
        dataset=study.dataset,
        metric=metric,
        higher_is_better=higher_is_better,
        confidence=confidence,
    )
    return StudyResults(table=table, evidence=evidence)


def trial_records(trials: Sequence[TrialView], metric: str | None = None) -> list[TrialRecord]:
    """The statistics' view of stored trials: each seeded trial's primary metric value, or the stored
    metric named `metric` (None when that trial did not report it as a number)."""
    return [
        TrialRecord(
            study_id=t.study_id,
            method=t.method,
            seed=t.seed,
            value=_value(t, metric),
            status=t.status,
            mlflow_run_id=t.mlflow_run_id,
            group=t.group,
        )
        for t in trials
        if t.seed is not None
    ]


def stored_metric_names(trials: Sequence[TrialView]) -> list[str]:
    """The metrics a results table can be built on: every key some trial stored as a number."""
    return sorted({name for t in trials for name, value in t.metrics.items() if _is_number(value)})


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _value(trial: TrialView, metric: str | None) -> float | None:
    if metric is None:
        return trial.metric_value
    value = trial.metrics.get(metric)
    return float(value) if _is_number(value) else None


def planned_seeds(specs: Sequence[StudySpec]) -> dict[str, list[int]]:
    """Seeds each row (method, or "method [grid point]") was planned to run, over every spec."""
    planned: dict[str, list[int]] = {}
    for spec in specs:
        for method in spec.methods:
            labels = (
                [f"{method} [{point.label}]" for point in spec.grid_points(method)]
                if spec.kind == "grid"
                else [method]
            )
            for label in labels:
                planned.setdefault(label, [])
                planned[label] += [s for s in spec.seeds if s not in planned[label]]
    return planned

"""Results tables and their mechanism evidence, built from stored trials: the one place that turns a
selection of final-phase (or grid) trials into a studies.tables table (its metric's direction from
studies.spec.METRIC_DIRECTIONS, the studies' reference, planned seeds and paper numbers; a sequential
study's comparisons from its stored looks, studies.store.results_sequential). GET /results (through
service.api.results, which chooses the studies and checks the request) and the study driver (which saves
one study's results with its MLflow parent run) both build here. No FastAPI: the driver imports it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, TypeGuard

from sqlalchemy.orm import Session

from studies.evidence import Evidence
from studies.spec import DATASET_METRICS, StudySpec, higher_is_better
from studies.store import StudyView, TrialView, get_study, list_trials, study_looks
from studies.store.completeness import StudyCompleteness
from studies.store.results_evidence import RESULT_PHASES, results_evidence
from studies.store.results_sequential import sequential_summaries, sequential_table
from studies.tables import DEFAULT_REFERENCE, ResultsTable, TrialRecord, build_results_table
from studies.tables.build import PlanKey
from studies.tables.dataset_notes import dataset_note
from studies.tables.model import StudyCompletenessNote

if TYPE_CHECKING:
    from studies.sequential import LookRecord
    from studies.tuning import StudyTuning

__all__ = [
    "ResultsSelection",
    "StudyResults",
    "planned_seeds",
    "results_table",
    "select_results",
    "selection_evidence",
    "stored_looks",
    "stored_metric_names",
    "study_results",
    "trial_records",
]


@dataclass(frozen=True)
class ResultsSelection:
    """What a results table is built on: the studies of one dataset, their final-phase or grid trials, and
    the metric compared (`metric_key` None: each trial's primary metric, `metric_value`)."""

    dataset: str
    studies: tuple[StudyView, ...]
    trials: tuple[TrialView, ...]
    metric: str  # as tables name it: the dataset's primary metric, or `metric_key`
    metric_key: str | None
    higher_is_better: bool
    # Study id -> the stored looks of each sequential study among `studies` (stored_looks).
    looks: Mapping[str, tuple[LookRecord, ...]] = field(default_factory=dict)
    # Whether each of `studies` holds every trial it planned (studies.store.completeness), in their order.
    completeness: tuple[StudyCompleteness, ...] = ()
    # Newer studies of the dataset that a default choice passed over because they are incomplete.
    passed_over: tuple[StudyCompleteness, ...] = ()

    @property
    def specs(self) -> list[StudySpec]:
        return [StudySpec.model_validate(s.spec) for s in self.studies]


@dataclass(frozen=True)
class StudyResults:
    table: ResultsTable
    evidence: Evidence
    tuning: StudyTuning | None = None  # knob importance, optimisation history (results_tuning)


def select_results(
    dataset: str,
    studies: Sequence[StudyView],
    trials: Sequence[TrialView],
    metric_key: str | None = None,
    looks: Mapping[str, Sequence[LookRecord]] | None = None,
    *,
    completeness: Sequence[StudyCompleteness] = (),
    passed_over: Sequence[StudyCompleteness] = (),
) -> ResultsSelection:
    """The selection of `trials` on `metric_key` (None: the dataset's primary metric); its direction comes
    from the metric table, so a metric without one raises studies.spec.UnknownMetricError. `looks`: the
    stored looks of its sequential studies (stored_looks), by study id; `completeness` and `passed_over`:
    what the selection says of its studies' completeness (studies.store.completeness)."""
    metric = metric_key if metric_key is not None else DATASET_METRICS[dataset][0]
    return ResultsSelection(
        dataset=dataset,
        studies=tuple(studies),
        trials=tuple(trials),
        metric=metric,
        metric_key=metric_key,
        higher_is_better=higher_is_better(dataset, metric),
        looks={study_id: tuple(records) for study_id, records in (looks or {}).items()},
        completeness=tuple(completeness),
        passed_over=tuple(passed_over),
    )


def stored_looks(session: Session, studies: Sequence[StudyView]) -> dict[str, list[LookRecord]]:
    """The stored looks of every sequential study among `studies`, by study id."""
    return {study.id: study_looks(session, study.id) for study in studies if study.spec.get("sequential")}


def results_table(
    selection: ResultsSelection,
    *,
    reference: str | None = None,
    confidence: float = 0.95,
    adjustment: str = "holm",
) -> ResultsTable:
    """The CI table of a selection; `reference` None: the first study's reference row. A sequential study's
    arms are planned the seeds its looks gave them, and its comparisons show what its looks concluded
    (studies.store.results_sequential). The table says what the selection knows of its studies' completeness.
    """
    specs = selection.specs
    summaries = sequential_summaries(selection.studies, specs, selection.looks)
    given = [summaries[s.id]["seeds_per_arm"] if s.id in summaries else None for s in selection.studies]
    table = build_results_table(
        trial_records(selection.trials, selection.metric_key),
        dataset=selection.dataset,
        metric=selection.metric,
        higher_is_better=selection.higher_is_better,
        reference=reference or (specs[0].reference if specs else DEFAULT_REFERENCE),
        confidence=confidence,
        adjustment=adjustment,
        planned_seeds=planned_seeds(specs, seeds_per_arm=given),
        paper_values={m: v for spec in specs for m, v in spec.paper_numbers.items()},
        dataset_note=dataset_note(selection.dataset),  # stand-ins say what they stand in for
    )
    table = sequential_table(table, summaries, primary_metric=selection.metric_key is None)
    notes = [_completeness_note(c, shown=True) for c in selection.completeness]
    notes += [_completeness_note(c, shown=False) for c in selection.passed_over]
    return replace(table, completeness=tuple(notes)) if notes else table


def _completeness_note(completeness: StudyCompleteness, *, shown: bool) -> StudyCompletenessNote:
    return StudyCompletenessNote(
        study_id=completeness.study_id,
        name=completeness.name,
        complete=completeness.complete,
        reason=completeness.reason,
        shown=shown,
    )


def selection_evidence(
    session: Session, selection: ResultsSelection, *, confidence: float = 0.95
) -> Evidence:
    """The mechanism evidence of a selection's trials (per-epoch histories read from the store)."""
    return results_evidence(
        session,
        trials=selection.trials,
        dataset=selection.dataset,
        metric=selection.metric,
        higher_is_better=selection.higher_is_better,
        metric_key=selection.metric_key,
        confidence=confidence,
    )


def study_results(session: Session, *, study_id: str, confidence: float = 0.95) -> StudyResults | None:
    """One study's results on its primary metric, as GET /results shows them by default, or None while it
    has no final-phase or grid trials."""
    study = get_study(session, study_id=study_id)
    trials = list_trials(session, study_id=study_id, phase=list(RESULT_PHASES))
    if not trials:
        return None
    selection = select_results(study.dataset, [study], trials, looks=stored_looks(session, [study]))
    # Imported here: Optuna's evaluators load only where a study's results are built, not with the API.
    from studies.store.results_tuning import stored_tuning_trials, tuning_of

    return StudyResults(
        table=results_table(selection, confidence=confidence),
        evidence=selection_evidence(session, selection, confidence=confidence),
        tuning=tuning_of(study, stored_tuning_trials(session, study), confidence=confidence),
    )


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
    """Every key some trial stored as a number (a results table also needs the metric's direction)."""
    return sorted({name for t in trials for name, value in t.metrics.items() if _is_number(value)})


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _value(trial: TrialView, metric: str | None) -> float | None:
    if metric is None:
        return trial.metric_value
    value = trial.metrics.get(metric)
    return float(value) if _is_number(value) else None


def planned_seeds(
    specs: Sequence[StudySpec], *, seeds_per_arm: Sequence[Mapping[str, int] | None] = ()
) -> dict[PlanKey, list[int]]:
    """Seeds each row was planned to run, over every spec: by method, or by (method, grid point).

    `seeds_per_arm`, beside `specs` where given: the seeds a sequential study's looks gave each arm (its
    first n), which an arm its looks stopped early planned instead of the design's maximum.
    """
    planned: dict[PlanKey, list[int]] = {}
    given = [*seeds_per_arm, *([None] * (len(specs) - len(seeds_per_arm)))]
    for spec, arms in zip(specs, given, strict=True):
        for method in spec.methods:
            rows: list[tuple[PlanKey, str | None]] = (
                [((method, point.label), point.label) for point in spec.grid_points(method)]
                if spec.kind == "grid"
                else [(method, None)]
            )
            for row, group in rows:
                # An arm is a method, or a grid point as its results row names it (StudySpec.arm_of).
                given_n = None if arms is None else arms.get(spec.arm_of(method, group))
                seeds = spec.seeds if given_n is None else spec.seeds[:given_n]
                planned.setdefault(row, [])
                planned[row] += [s for s in seeds if s not in planned[row]]
    return planned

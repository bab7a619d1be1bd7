"""What GET /results/{dataset} shows: which studies and trials, on which metric. The checks of a request
(known dataset, studies of that dataset, trials to show, a metric those trials stored and the metric table
gives a direction for) raise the domain errors service.errors maps to 404 and 422; the table and its
evidence are built in service.study_results, as the study driver builds them.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session

from service.errors import NoResultsError, UnknownDatasetError, UnknownMetricError
from service.results_evidence import RESULT_PHASES
from service.store import StudyView, get_study, list_studies, list_trials
from service.study_results import (
    ResultsSelection,
    results_table,
    select_results,
    selection_evidence,
    stored_metric_names,
)
from studies.spec import KNOWN_DATASETS, METRIC_DIRECTIONS

__all__ = ["ALL_STUDIES", "ResultsSelection", "choose_results", "results_table", "selection_evidence"]

ALL_STUDIES = "all"  # the study id that pools every study of the dataset


def choose_results(
    session: Session, *, dataset: str, study_ids: Sequence[str] = (), metric: str | None = None
) -> ResultsSelection:
    """The final-phase and grid trials to show for `dataset`: of the studies `study_ids` ([ALL_STUDIES]:
    every study of it, oldest first; none: the newest study that has some), on `metric` (None: the
    dataset's primary metric)."""
    if dataset not in KNOWN_DATASETS:
        raise UnknownDatasetError(f"unknown dataset '{dataset}'; known datasets: {', '.join(KNOWN_DATASETS)}")
    studies = _chosen_studies(session, dataset, list(study_ids))
    trials = [t for s in studies for t in list_trials(session, study_id=s.id, phase=list(RESULT_PHASES))]
    if not trials:
        raise NoResultsError(
            f"no final-phase or grid trials for '{dataset}' yet"
            + (f" in study {', '.join(s.id for s in studies)}" if studies else "")
            + ": submit a study (POST /studies) and wait for its final phase"
        )
    if metric is not None:
        stored = stored_metric_names(trials)
        comparable = [name for name in stored if (dataset, name) in METRIC_DIRECTIONS]
        if metric not in comparable:
            raise UnknownMetricError(metric, comparable, stored=metric in stored)
    return select_results(dataset, studies, trials, metric)


def _chosen_studies(session: Session, dataset: str, ids: list[str]) -> list[StudyView]:
    """The named studies (all on `dataset`), every study for `all`, else the newest study with results."""
    if ids == [ALL_STUDIES]:
        return list_studies(session, dataset=dataset, order="oldest")
    if ids:
        chosen = [get_study(session, study_id=i) for i in ids]
        other = [s.id for s in chosen if s.dataset != dataset]
        if other:
            raise NoResultsError(f"study {', '.join(other)} is not a study of '{dataset}'")
        return chosen
    for candidate in list_studies(session, dataset=dataset):
        if list_trials(session, study_id=candidate.id, phase=list(RESULT_PHASES)):
            return [candidate]
    return []

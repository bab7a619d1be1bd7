"""What GET /results/{dataset} shows: which studies and trials, on which metric, against which reference.
The checks of a request (known dataset, studies of that dataset, trials to show, a metric those trials
stored and the metric table gives a direction for) raise the domain errors service.api.errors maps to 404 and
422, and a reference that names no single row of the table is a 422 at `["query", "reference"]`; the table
and its evidence are built in studies.store.results, as the study driver builds them (a sequential study's
comparisons from its stored looks, which the selection carries).

By default the newest complete study is shown, so a newer incomplete one (running, failed, or marked
succeeded with trials missing from the store) never hides it; the selection carries every shown study's
completeness and the incomplete studies passed over (studies.store.completeness), which the JSON states.
"""

from __future__ import annotations

from collections.abc import Sequence

from fastapi.exceptions import RequestValidationError
from sqlalchemy.orm import Session

from service.api.errors import NoResultsError, UnknownDatasetError, UnknownMetricError
from service.api.mlflow_links import mlflow_ui_url
from studies.spec import KNOWN_DATASETS, METRIC_DIRECTIONS
from studies.spec.diff import spec_differences
from studies.store import StudyView, get_study, list_studies, list_trials
from studies.store import results as study_results
from studies.store.completeness import StudyCompleteness, read_completeness
from studies.store.results import (
    ResultsSelection,
    select_results,
    selection_evidence,
    stored_looks,
    stored_metric_names,
)
from studies.store.results_evidence import RESULT_PHASES
from studies.tables import ResultsTable

__all__ = [
    "ALL_STUDIES",
    "ResultsSelection",
    "choose_results",
    "mlflow_run_links",
    "refuse_mixed_pool",
    "results_table",
    "selection_evidence",
]

ALL_STUDIES = "all"  # the study id that pools every study of the dataset


def choose_results(
    session: Session, *, dataset: str, study_ids: Sequence[str] = (), metric: str | None = None
) -> ResultsSelection:
    """The final-phase and grid trials to show for `dataset`: of the studies `study_ids` ([ALL_STUDIES]:
    every study of it, oldest first; none: the newest complete study that has some, else the newest that
    has some), on `metric` (None: the dataset's primary metric). The selection says whether each of its
    studies is complete, and which newer incomplete studies the default choice passed over."""
    if dataset not in KNOWN_DATASETS:
        raise UnknownDatasetError(f"unknown dataset '{dataset}'; known datasets: {', '.join(KNOWN_DATASETS)}")
    studies, completeness, passed_over = _chosen_studies(session, dataset, list(study_ids))
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
    return select_results(
        dataset,
        studies,
        trials,
        metric,
        looks=stored_looks(session, studies),
        completeness=completeness,
        passed_over=passed_over,
    )


def _chosen_studies(
    session: Session, dataset: str, ids: list[str]
) -> tuple[list[StudyView], list[StudyCompleteness], list[StudyCompleteness]]:
    """(studies, their completeness, the incomplete newer studies passed over): the named studies (all on
    `dataset`), every study for `all`, else the newest complete study with results, or the newest with
    results where none is complete. An incomplete study (running, failed, or marked succeeded with trials
    missing from the store) never hides a complete one by being newer."""
    if ids == [ALL_STUDIES]:
        chosen = list_studies(session, dataset=dataset, order="oldest")
        return chosen, read_completeness(session, chosen), []
    if ids:
        chosen = [get_study(session, study_id=i) for i in ids]
        other = [s.id for s in chosen if s.dataset != dataset]
        if other:
            raise NoResultsError(f"study {', '.join(other)} is not a study of '{dataset}'")
        return chosen, read_completeness(session, chosen), []
    incomplete: list[tuple[StudyView, StudyCompleteness]] = []
    for candidate in list_studies(session, dataset=dataset):
        if not list_trials(session, study_id=candidate.id, phase=list(RESULT_PHASES)):
            continue
        (completeness,) = read_completeness(session, [candidate])
        if completeness.complete:
            return [candidate], [completeness], [c for _, c in incomplete]
        incomplete.append((candidate, completeness))
    if incomplete:  # none is complete: the newest with results, saying so
        study, completeness = incomplete[0]
        return [study], [completeness], []
    return [], [], []


def results_table(
    selection: ResultsSelection,
    *,
    reference: str | None = None,
    confidence: float = 0.95,
    adjustment: str = "holm",
) -> ResultsTable:
    """The CI table of a selection (studies.store.results.results_table). A `reference` the request names
    must pick one row: a method with one row, or a row label (`method [grid point]`); the table itself would
    only warn on every row, with a 200, which a client reading the numbers can miss."""
    table = study_results.results_table(
        selection, reference=reference, confidence=confidence, adjustment=adjustment
    )
    if reference is not None and not any(row.is_reference for row in table.rows):
        raise _unknown_reference(reference, table)
    return table


def mlflow_run_links(selection: ResultsSelection, tracking_uri: str) -> dict[str, str]:
    """{MLflow run id: its page in the MLflow UI} for the selection's trials that have a run."""
    experiments = {study.id: study.mlflow_experiment_id for study in selection.studies}
    links: dict[str, str] = {}
    for trial in selection.trials:
        experiment = experiments.get(trial.study_id)
        if trial.mlflow_run_id and experiment:
            url = mlflow_ui_url(tracking_uri, experiment_id=experiment, run_id=trial.mlflow_run_id)
            if url is not None:
                links[trial.mlflow_run_id] = url
    return links


# What pooled studies may set differently: their seeds, final and tuning (more seeds of one experiment).
_POOLABLE_KEYS = frozenset({"seeds", "tune_seeds"})


def refuse_mixed_pool(studies: Sequence[StudyView], *, explicit: Sequence[str]) -> None:
    """A 422 at `study` when two or more studies named by id differ in more than their seeds: their pooled
    table would mix experiments (and a seed both ran would count once). `study=all` pools as asked."""
    if len(studies) < 2 or list(explicit) == [ALL_STUDIES]:
        return
    first = studies[0]
    for other in studies[1:]:
        differences = [d for d in spec_differences(first.spec, other.spec) if d.key not in _POOLABLE_KEYS]
        if differences:
            shown = ", ".join(f"{d.key} ({d.a} vs {d.b})" for d in differences[:5])
            more = f" and {len(differences) - 5} more" if len(differences) > 5 else ""
            msg = (
                f"studies {first.id} and {other.id} differ in {shown}{more}: pooling them would mix two "
                f"experiments; compare them side by side at /compare?a={first.id}&b={other.id}, or pass "
                "pool=true to pool them anyway"
            )
            raise RequestValidationError(
                [{"type": "mixed_pool", "loc": ("query", "study"), "msg": msg, "input": list(explicit)}]
            )


def _unknown_reference(reference: str, table: ResultsTable) -> RequestValidationError:
    """A 422 in FastAPI's own format, at the query parameter, naming the rows that can be the reference."""
    labels = [row.label for row in table.rows]
    same_method = [row.label for row in table.rows if row.method == reference]
    if same_method:
        kind = "ambiguous_reference"
        msg = f"reference '{reference}' names {len(same_method)} rows; name one: {', '.join(same_method)}"
    else:
        kind = "unknown_reference"
        msg = (
            f"unknown reference '{reference}': no row of this table is that method or row label; choose one "
            f"of {', '.join(labels) or 'none (the table has no rows)'}, or leave `reference` out for the "
            "study's reference"
        )
    return RequestValidationError(
        [{"type": kind, "loc": ("query", "reference"), "msg": msg, "input": reference}]
    )

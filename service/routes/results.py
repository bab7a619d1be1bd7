"""/results/{dataset}: the seed-wise CI table (studies.tables) over final-phase and grid trials."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response

from service.errors import NoResultsError, UnknownDatasetError, UnknownMetricError, error_responses
from service.results_evidence import results_evidence
from service.routes.sessions import ReadSessionDep
from service.routes.text import StorableText
from service.store import Phase, StudyView, get_study, list_studies, list_trials
from service.study_results import planned_seeds, stored_metric_names, trial_records
from studies.spec import DATASET_METRICS, StudySpec

__all__ = ["router"]

router = APIRouter(prefix="/results", tags=["results"])

_RESULT_PHASES = (Phase.FINAL, Phase.GRID)
_LOWER_IS_BETTER_HINTS = ("rmse", "mse", "mae", "loss", "perplexity", "error")


@router.get(
    "/{dataset}",
    summary="Results table: one row per method (or grid point), CIs over seeds, paired tests vs a reference",
    responses={
        200: {
            "content": {
                "application/json": {},
                "text/csv": {},
                "text/markdown": {},
                "text/html": {},
            }
        },
        **error_responses(404, 422),
    },
)
def read_results(
    dataset: str,
    session: ReadSessionDep,
    format: Literal["json", "csv", "md", "html"] = "json",
    study: Annotated[
        list[StorableText] | None,
        Query(
            description="study id(s), repeat or comma-separate; `all` pools every study; default: the newest"
        ),
    ] = None,
    metric: Annotated[
        str | None, Query(description="a key of the trials' metrics (e.g. test_accuracy_corruption_mean)")
    ] = None,
    reference: Annotated[
        str | None, Query(description="reference row; default: the study's reference")
    ] = None,
    confidence: Annotated[float, Query(gt=0.5, lt=1.0)] = 0.95,
    adjust: Literal["holm", "bh", "none"] = "holm",
) -> Response:
    from studies.tables.build import build_results_table
    from studies.tables.dataset_notes import dataset_note
    from studies.tables.render_html import to_html

    if dataset not in DATASET_METRICS:
        raise UnknownDatasetError(
            f"unknown dataset '{dataset}'; known datasets: {', '.join(DATASET_METRICS)}"
        )
    studies = _chosen_studies(session, dataset, _split_ids(study))
    trials = [t for s in studies for t in list_trials(session, study_id=s.id, phase=list(_RESULT_PHASES))]
    if not trials:
        raise NoResultsError(
            f"no final-phase or grid trials for '{dataset}' yet"
            + (f" in study {', '.join(s.id for s in studies)}" if studies else "")
            + ": submit a study (POST /studies) and wait for its final phase"
        )
    if metric is not None and metric not in (known := stored_metric_names(trials)):
        raise UnknownMetricError(metric, known)
    metric_name, higher_is_better = _metric(dataset, metric)
    records = trial_records(trials, metric)
    specs = [StudySpec.model_validate(s.spec) for s in studies]
    table = build_results_table(
        records,
        dataset=dataset,
        metric=metric_name,
        higher_is_better=higher_is_better,
        reference=reference or (specs[0].reference if specs else "frozen_ln"),
        confidence=confidence,
        adjustment=adjust,
        planned_seeds=planned_seeds(specs),
        paper_values={m: v for spec in specs for m, v in spec.paper_numbers.items()},
        dataset_note=dataset_note(dataset),  # stand-ins say what they stand in for and what they are
    )
    if format == "csv":
        return PlainTextResponse(table.to_csv(), media_type="text/csv")
    if format == "md":
        return PlainTextResponse(table.to_markdown(), media_type="text/markdown")
    evidence = results_evidence(
        session,
        trials=trials,
        dataset=dataset,
        metric=metric_name,
        higher_is_better=higher_is_better,
        metric_key=metric,
        confidence=confidence,
    )
    if format == "html":
        return HTMLResponse(to_html(table, evidence=evidence))
    return JSONResponse({**table.to_json(), "evidence": evidence.to_json()})


def _split_ids(values: list[str] | None) -> list[str]:
    return [part.strip() for value in values or [] for part in value.split(",") if part.strip()]


def _chosen_studies(session, dataset: str, ids: list[str]) -> list[StudyView]:
    """The named studies (all on `dataset`), every study for `all`, else the newest study with results."""
    if ids == ["all"]:
        return list_studies(session, dataset=dataset, order="oldest")
    if ids:
        chosen = [get_study(session, study_id=i) for i in ids]
        other = [s.id for s in chosen if s.dataset != dataset]
        if other:
            raise NoResultsError(f"study {', '.join(other)} is not a study of '{dataset}'")
        return chosen
    for candidate in list_studies(session, dataset=dataset):
        if list_trials(session, study_id=candidate.id, phase=list(_RESULT_PHASES)):
            return [candidate]
    return []


def _metric(dataset: str, metric: str | None) -> tuple[str, bool]:
    default_name, higher_is_better = DATASET_METRICS[dataset]
    if metric is None:
        return default_name, higher_is_better
    lowered = metric.lower()
    if any(hint in lowered for hint in _LOWER_IS_BETTER_HINTS):
        return metric, False
    if "acc" in lowered:
        return metric, True
    return metric, higher_is_better

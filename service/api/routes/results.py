"""/results/{dataset}: the seed-wise CI table (studies.tables) over final-phase and grid trials.

Which studies, trials and metric: service.api.results; the table and its evidence: studies.store.results; the
studies' knob importance and optimisation history: studies.store.results_tuning. This module only reads
the query and picks the rendering. The store reads (the selection, the evidence's histories, the tuning
trials) are one read-only unit of work at the database gate; the table, the tuning views and the
rendering, CPU work, run after it in a worker thread that holds no connection.

A sequential study's comparisons show the repeated intervals and stage-wise p-values of its stored looks,
and the JSON adds a `sequential` block, {study id: its summary}, for the sequential studies it covers
(studies.store.results_sequential); a table of fixed-seed studies is as it always was.

The JSON's `studies` states each shown study's completeness (planned and recorded final or grid trials, the
missing ones by name, tuning trials per method, a reason), and `passed_over` the newer incomplete studies a
request without `study` skipped for the newest complete one (studies.store.completeness); the markdown and
HTML renderings say the same above their table (the table carries it: studies.store.results)."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from sqlalchemy.orm import Session

from service.api.back_link import with_back_link
from service.api.deps import DatabaseDep, SettingsDep
from service.api.errors import error_responses
from service.api.results import (
    ResultsSelection,
    choose_results,
    mlflow_run_links,
    refuse_mixed_pool,
    results_table,
    selection_evidence,
)
from service.api.routes.text import StorableText
from studies.evidence import Evidence

if TYPE_CHECKING:
    from studies.tuning import TuningTrial

__all__ = ["router"]

router = APIRouter(prefix="/results", tags=["results"])


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
                "application/x-latex": {},
            }
        },
        **error_responses(404, 422, 503),
    },
)
async def read_results(
    dataset: str,
    database: DatabaseDep,
    settings: SettingsDep,
    format: Literal["json", "csv", "md", "html", "latex"] = "json",
    study: Annotated[
        list[StorableText] | None,
        Query(
            description="study id(s), repeat or comma-separate; `all` pools every study; default: the newest"
        ),
    ] = None,
    metric: Annotated[
        str | None,
        Query(
            min_length=1,  # empty names no metric: leave it out for the primary one
            description="a key of the trials' metrics with a known better direction (e.g. "
            "test_accuracy_corruption_mean, train_loss); default: the dataset's primary metric",
        ),
    ] = None,
    reference: Annotated[
        str | None,
        Query(
            min_length=1,
            description="reference row: a method of the table, or a row label (`method [grid point]`) where "
            "the method has several rows; one that picks no single row is a 422 naming the rows; default: "
            "the study's reference",
        ),
    ] = None,
    confidence: Annotated[float, Query(gt=0.5, lt=1.0)] = 0.95,
    adjust: Literal["holm", "bh", "none"] = "holm",
    pool: Annotated[
        bool,
        Query(
            description="pool named studies whose specs differ in more than their seeds (without it that is a "
            "422 naming the differences: their trials would mix two experiments; /compare shows them side by "
            "side); `study=all` pools every study of the dataset as asked"
        ),
    ] = False,
) -> Response:
    chosen, evidence, tuning_trials = await database.read(
        partial(
            _select,
            dataset=dataset,
            study_ids=_split_ids(study),
            metric=metric,
            confidence=confidence,
            with_evidence=format in ("json", "html"),
            pool=pool,
        )
    )
    return await run_in_threadpool(
        _render,
        chosen,
        evidence,
        tuning_trials,
        format=format,
        reference=reference,
        confidence=confidence,
        adjust=adjust,
        mlflow_tracking_uri=str(settings.mlflow_ui_url),
    )


def _select(
    session: Session,
    *,
    dataset: str,
    study_ids: list[str],
    metric: str | None,
    confidence: float,
    with_evidence: bool,
    pool: bool = False,
) -> tuple[ResultsSelection, Evidence | None, dict[str, list[TuningTrial]]]:
    chosen = choose_results(session, dataset=dataset, study_ids=study_ids, metric=metric)
    if not pool:
        refuse_mixed_pool(chosen.studies, explicit=study_ids)
    if not with_evidence:
        return chosen, None, {}
    # Imported here, as the renderers are: Optuna loads with the first page that shows tuning, not the API.
    from studies.store.results_tuning import stored_tuning_trials

    evidence = selection_evidence(session, chosen, confidence=confidence)
    tuning_trials = {study.id: stored_tuning_trials(session, study) for study in chosen.studies}
    return chosen, evidence, tuning_trials


def _render(
    chosen: ResultsSelection,
    evidence: Evidence | None,
    tuning_trials: dict[str, list[TuningTrial]],
    *,
    format: str,
    reference: str | None,
    confidence: float,
    adjust: str,
    mlflow_tracking_uri: str,
) -> Response:
    from studies.tables.render_html import to_html

    table = results_table(chosen, reference=reference, confidence=confidence, adjustment=adjust)
    if format == "csv":
        return PlainTextResponse(table.to_csv(), media_type="text/csv")
    if format == "md":
        return PlainTextResponse(table.to_markdown(), media_type="text/markdown")
    if format == "latex":
        return PlainTextResponse(table.to_latex(), media_type="application/x-latex")
    assert evidence is not None, "json and html show the evidence, so _select read it"
    # Optuna's evaluators run here, on the trials _select read, with no connection held.
    from studies.store.results_tuning import tuning_of

    tuning = [
        views
        for study in chosen.studies
        if (views := tuning_of(study, tuning_trials.get(study.id, []), confidence=confidence)) is not None
    ]
    if format == "html":
        run_links = mlflow_run_links(chosen, mlflow_tracking_uri)
        return HTMLResponse(
            with_back_link(to_html(table, evidence=evidence, run_links=run_links, tuning=tuning))
        )
    return JSONResponse(
        {
            **table.to_json(),
            "evidence": evidence.to_json(),
            "tuning": [views.to_json() for views in tuning],
            # Whether each shown study holds every trial it planned, and the newer incomplete studies the
            # default choice passed over (service.api.results): an incomplete table says so.
            "studies": [c.to_json() for c in chosen.completeness],
            "passed_over": [c.to_json() for c in chosen.passed_over],
        }
    )


def _split_ids(values: list[str] | None) -> list[str]:
    """`?study=a&study=b` and `?study=a,b` alike."""
    return [part.strip() for value in values or [] for part in value.split(",") if part.strip()]

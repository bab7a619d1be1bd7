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
HTML renderings say the same above their table (the table carries it: studies.store.results).

The HTML page gains an export block (service.api.export_links): the table as Markdown and LaTeX, and each
figure as SVG and PDF from /results/{dataset}/figures (service.api.routes.figures), all with the page's
own query. The query parameters and the store read are shared with that route
(service.api.routes.results_query)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response

from service.api.back_link import with_back_link
from service.api.deps import DatabaseDep, SettingsDep
from service.api.errors import error_responses
from service.api.export_links import with_export_links
from service.api.results import ResultsSelection, mlflow_run_links, results_table
from service.api.routes.results_query import ResultsQueryDep, results_in_view, tuning_views

if TYPE_CHECKING:
    from studies.evidence import Evidence
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
    request: Request,
    database: DatabaseDep,
    settings: SettingsDep,
    query: ResultsQueryDep,
    format: Literal["json", "csv", "md", "html", "latex"] = "json",
) -> Response:
    with_evidence = format in ("json", "html")
    async with results_in_view(database, dataset=dataset, query=query, with_evidence=with_evidence) as read:
        chosen, evidence, tuning_trials = read
        return await run_in_threadpool(
            _render,
            chosen,
            evidence,
            tuning_trials,
            format=format,
            reference=query.reference,
            confidence=query.confidence,
            adjust=query.adjust,
            mlflow_tracking_uri=str(settings.mlflow_ui_url),
            # The page's export line asks for the table and its figures with the page's own parameters.
            query=[(key, value) for key, value in request.query_params.multi_items() if key != "format"],
        )


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
    query: list[tuple[str, str]],
) -> Response:
    from studies.tables.render_html import to_html

    table = results_table(chosen, reference=reference, confidence=confidence, adjustment=adjust)
    if format == "csv":
        return PlainTextResponse(table.to_csv(), media_type="text/csv")
    if format == "md":
        return PlainTextResponse(table.to_markdown(), media_type="text/markdown")
    if format == "latex":
        return PlainTextResponse(table.to_latex(), media_type="application/x-latex")
    assert evidence is not None, "json and html show the evidence, so read_selection read it"
    tuning = tuning_views(chosen, tuning_trials, confidence=confidence)
    if format == "html":
        from studies.tables.figures import results_figures

        run_links = mlflow_run_links(chosen, mlflow_tracking_uri)
        page = to_html(table, evidence=evidence, run_links=run_links, tuning=tuning)
        figures = [figure.name for figure in results_figures(table, evidence, tuning)]
        return HTMLResponse(
            with_back_link(with_export_links(page, dataset=table.dataset, query=query, figures=figures))
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

"""/results/{dataset}/figures/{name}.svg|.pdf: one figure of a results page as a file, for a paper.

The names are the page's figure ids (studies.tables.figures); the query is /results' own, so a figure is
the one the page with the same query shows. An unknown name is a 404 that lists the names there are. The
store is read as /results reads it (one read-only unit of work); the figure and the PDF are drawn after it,
in a worker thread that holds no connection."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response

from service.api.deps import DatabaseDep
from service.api.errors import error_responses
from service.api.results import ResultsSelection, results_table
from service.api.routes.results_query import ResultsQueryDep, results_in_view, tuning_views
from studies.tables.figures import FOREST_PLOT

if TYPE_CHECKING:
    from studies.evidence import Evidence
    from studies.tuning import TuningTrial

__all__ = ["MEDIA_TYPES", "router"]

router = APIRouter(prefix="/results", tags=["results"])

MEDIA_TYPES = {"svg": "image/svg+xml", "pdf": "application/pdf"}


@router.get(
    "/{dataset}/figures/{name}.{format}",
    summary="One figure of the results page (forest plot, mechanism evidence, tuning) as SVG or PDF",
    response_class=Response,
    responses={
        200: {"content": {media_type: {} for media_type in MEDIA_TYPES.values()}},
        **error_responses(404, 422, 503),
    },
)
async def read_figure(
    dataset: str,
    name: str,
    format: Literal["svg", "pdf"],
    database: DatabaseDep,
    query: ResultsQueryDep,
) -> Response:
    """`name`: a figure id of the results page (`forest_plot`, always there); the 404 for another lists
    them. The query parameters are /results' own."""
    # The forest plot needs the table alone; any other name needs what the page's figures show.
    with_evidence = name != FOREST_PLOT
    async with results_in_view(database, dataset=dataset, query=query, with_evidence=with_evidence) as read:
        chosen, evidence, tuning_trials = read
        return await run_in_threadpool(
            _render,
            chosen,
            evidence,
            tuning_trials,
            name=name,
            format=format,
            reference=query.reference,
            confidence=query.confidence,
            adjust=query.adjust,
        )


def _render(
    chosen: ResultsSelection,
    evidence: Evidence | None,
    tuning_trials: dict[str, list[TuningTrial]],
    *,
    name: str,
    format: str,
    reference: str | None,
    confidence: float,
    adjust: str,
) -> Response:
    from studies.tables.figures import find_figure, results_figures

    table = results_table(chosen, reference=reference, confidence=confidence, adjustment=adjust)
    tuning = tuning_views(chosen, tuning_trials, confidence=confidence) if evidence is not None else []
    figure = find_figure(results_figures(table, evidence, tuning), name)
    filename = re.sub(r"[^A-Za-z0-9_.=-]+", "_", f"{table.dataset}_{figure.name}.{format}")
    # inline: a browser shows it; saved, it keeps a name that says what it is.
    headers = {"Content-Disposition": f'inline; filename="{filename}"'}
    if format == "svg":
        return Response(figure.svg, media_type=MEDIA_TYPES["svg"], headers=headers)
    from studies.tables.pdf import svg_to_pdf

    pdf = svg_to_pdf(figure.svg, title=figure.caption)
    return Response(pdf, media_type=MEDIA_TYPES["pdf"], headers=headers)

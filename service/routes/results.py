"""/results/{dataset}: the seed-wise CI table (studies.tables) over final-phase and grid trials.

Which studies, trials and metric: service.results; the table and its evidence: service.study_results.
This module only reads the query and picks the rendering."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response

from service.errors import error_responses
from service.results import choose_results, results_table, selection_evidence
from service.routes.sessions import ReadSessionDep
from service.routes.text import StorableText

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
        str | None,
        Query(
            description="a key of the trials' metrics with a known better direction (e.g. "
            "test_accuracy_corruption_mean, train_loss); default: the dataset's primary metric"
        ),
    ] = None,
    reference: Annotated[
        str | None, Query(description="reference row; default: the study's reference")
    ] = None,
    confidence: Annotated[float, Query(gt=0.5, lt=1.0)] = 0.95,
    adjust: Literal["holm", "bh", "none"] = "holm",
) -> Response:
    from studies.tables.render_html import to_html

    chosen = choose_results(session, dataset=dataset, study_ids=_split_ids(study), metric=metric)
    table = results_table(chosen, reference=reference, confidence=confidence, adjustment=adjust)
    if format == "csv":
        return PlainTextResponse(table.to_csv(), media_type="text/csv")
    if format == "md":
        return PlainTextResponse(table.to_markdown(), media_type="text/markdown")
    evidence = selection_evidence(session, chosen, confidence=confidence)
    if format == "html":
        return HTMLResponse(to_html(table, evidence=evidence))
    return JSONResponse({**table.to_json(), "evidence": evidence.to_json()})


def _split_ids(values: list[str] | None) -> list[str]:
    """`?study=a&study=b` and `?study=a,b` alike."""
    return [part.strip() for value in values or [] for part in value.split(",") if part.strip()]

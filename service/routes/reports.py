"""/studies/{id}/report: claim by claim, what the study measured against what the paper says."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response

from service.errors import error_responses
from service.reports import study_report
from service.routes.sessions import ReadSessionDep
from service.routes.text import StorableText

__all__ = ["router"]

router = APIRouter(prefix="/studies", tags=["reports"])


@router.get(
    "/{study_id}/report",
    summary="A study's report: the paper claim it tests, paper vs measured, verdict, figures, provenance",
    responses={
        200: {"content": {"application/json": {}, "text/markdown": {}, "text/html": {}}},
        **error_responses(404, 422),
    },
)
def read_report(
    study_id: StorableText,
    session: ReadSessionDep,
    format: Literal["json", "md", "html"] = "json",
    claim: StorableText | None = None,
) -> Response:
    """`claim` judges the study against another claim it serves (one that shares the spec's claim's
    study, e.g. vision_gates_collapse_to_ln on the CIFAR-10 study); default: the spec's own claim."""
    report = study_report(session, study_id=study_id, claim_id=claim)
    if format == "md":
        return PlainTextResponse(report.to_markdown(), media_type="text/markdown")
    if format == "html":
        return HTMLResponse(report.to_html())
    return JSONResponse(report.to_json())

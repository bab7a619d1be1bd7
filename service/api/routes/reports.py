"""/studies/{id}/report: claim by claim, what the study measured against what the paper says.

The report is assembled in one read-only unit of work at the database gate; its rendering runs after it,
in a worker thread that holds no connection."""

from __future__ import annotations

from functools import partial
from typing import Literal

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response

from service.api.back_link import with_back_link
from service.api.deps import DatabaseDep, SettingsDep
from service.api.errors import error_responses
from service.api.extensions import studies_visible
from service.api.reports import study_report
from service.api.routes.text import NamedText, StorableText
from studies.report import StudyReport

__all__ = ["router"]

router = APIRouter(prefix="/studies", tags=["reports"])


@router.get(
    "/{study_id}/report",
    summary="A study's report: the paper claim it tests, paper vs measured, verdict, figures, provenance",
    responses={
        200: {"content": {"application/json": {}, "text/markdown": {}, "text/html": {}}},
        **error_responses(404, 422, 503),
    },
)
async def read_report(
    study_id: StorableText,
    database: DatabaseDep,
    settings: SettingsDep,
    format: Literal["json", "md", "html"] = "json",
    claim: NamedText | None = None,
) -> Response:
    """`claim` judges the study against another claim it serves (one that shares the spec's claim's
    study, e.g. vision_gates_collapse_to_ln on the CIFAR-10 study); default: the spec's own claim."""
    async with studies_visible(database, study_ids=[study_id]):
        report = await database.read(
            partial(
                study_report,
                study_id=study_id,
                claim_id=claim,
                mlflow_tracking_uri=settings.mlflow_ui_url,
            )
        )
        return await run_in_threadpool(_render, report, format)


def _render(report: StudyReport, format: str) -> Response:
    if format == "md":
        return PlainTextResponse(report.to_markdown(), media_type="text/markdown")
    if format == "html":
        return HTMLResponse(with_back_link(report.to_html(), study_page=f"/studies/{report.study_id}"))
    return JSONResponse(report.to_json())

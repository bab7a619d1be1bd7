"""/healthz (the process answers) and /readyz (a study could run now: the database takes writes with disk to
spare, MLflow answers, Ray's job server takes jobs; service.orchestration.readiness)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from service.api.deps import SettingsDep
from service.api.routes.schemas import ReadinessOut
from service.orchestration.readiness import ReadinessChecker
from service.settings import Settings

__all__ = ["router"]

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Liveness: the API process answers")
async def healthz() -> dict[str, str]:
    # Async: liveness must answer even while every worker thread is busy.
    return {"status": "ok"}


@router.get(
    "/readyz",
    response_model=ReadinessOut,
    responses={
        503: {
            "model": ReadinessOut,
            "description": "Not ready: `not_ready` says which part and why (database, disk, mlflow, ray)",
        }
    },
    summary="Readiness: the database takes writes with disk to spare, MLflow answers, Ray's job server takes jobs",
)
def readyz(request: Request, response: Response, settings: SettingsDep) -> dict:
    # Sync (its checks block), outside the database gate: the pool keeps connections for it beyond the gate's.
    readiness = _checker(request, settings).check()
    if not readiness.ready:
        response.status_code = 503
    return readiness.as_json()


def _checker(request: Request, settings: Settings) -> ReadinessChecker:
    """The app's checker, made on first use: it keeps the Ray answer between requests. The engine is read on
    every request (tests swap it)."""
    state = request.app.state
    checker: ReadinessChecker | None = getattr(state, "readiness", None)
    if checker is None:
        checker = ReadinessChecker(settings, state.engine, getattr(state, "dispatcher", None))
        state.readiness = checker
    checker.engine = state.engine
    return checker

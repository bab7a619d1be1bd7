"""/healthz (the process answers) and /readyz (the database answers; Ray and MLflow reachability reported)."""

from __future__ import annotations

import httpx
from fastapi import APIRouter, Request, Response
from sqlalchemy import text

from service.api.deps import SettingsDep
from service.api.routes.schemas import ReadinessOut
from studies.store import read_only

__all__ = ["router"]

router = APIRouter(tags=["health"])

_PROBE_TIMEOUT_S = 1.5


@router.get("/healthz", summary="Liveness: the API process answers")
async def healthz() -> dict[str, str]:
    # Async: liveness must answer even while every worker thread is busy.
    return {"status": "ok"}


@router.get(
    "/readyz",
    response_model=ReadinessOut,
    responses={503: {"model": ReadinessOut, "description": "Not ready: the database does not answer"}},
    summary="Readiness: the database answers; Ray and MLflow reachability reported",
)
def readyz(request: Request, response: Response, settings: SettingsDep) -> dict:
    # Sync (its probes block), outside the database gate: the pool keeps connections for it beyond the gate's.
    database = _probe_database(request)
    ray = _probe_http(f"{settings.ray_dashboard_url}/api/version")
    mlflow = _probe_http(f"{settings.mlflow_tracking_uri}/health")
    ready = database["reachable"]
    if not ready:
        response.status_code = 503
    # Ray and MLflow do not gate readiness: studies queue while the cluster is away and run when it returns.
    return {"status": "ready" if ready else "not ready", "database": database, "ray": ray, "mlflow": mlflow}


def _probe_database(request: Request) -> dict:
    engine = request.app.state.engine
    try:
        with read_only(engine).connect() as connection:  # a probe must not queue for the write lock
            connection.execute(text("SELECT 1"))
    except Exception as exc:
        return {"reachable": False, "backend": engine.dialect.name, "detail": type(exc).__name__}
    return {"reachable": True, "backend": engine.dialect.name}


def _probe_http(url: str) -> dict:
    try:
        answer = httpx.get(url, timeout=_PROBE_TIMEOUT_S)
    except httpx.HTTPError as exc:
        return {"reachable": False, "url": url, "detail": type(exc).__name__}
    # Any HTTP answer (even 401 from a token-protected Ray dashboard) means the server is up.
    return {"reachable": True, "url": url, "status_code": answer.status_code}

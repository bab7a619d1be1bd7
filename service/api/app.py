"""The FastAPI app factory: settings, database, token and dispatcher wired onto app.state.

uvicorn --factory service.api.app:create_app      (or `normlab serve`, which also starts Ray and MLflow)
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from importlib.metadata import PackageNotFoundError, version

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from pydantic import SecretStr

from service.api.body_timeout import BodyTimeoutMiddleware
from service.api.errors import install_error_handlers
from service.api.host_check import AllowedHosts, HostCheckMiddleware
from service.api.routes import (
    figures_router,
    health_router,
    reports_router,
    results_router,
    studies_router,
)
from service.api.routes.compare import router as compare_router
from service.api.routes.plans import router as plans_router
from service.api.routes.study_charts import router as study_charts_router
from service.auth import ensure_api_token, ensure_plugin_token
from service.orchestration.ports import Dispatcher
from service.orchestration.study_runs import StudyRuns
from service.settings import Settings, get_settings
from service.web import router as web_router
from studies.spec import KNOWN_DATASETS, METHODS, StudySpec
from studies.store import make_engine, upgrade_database

__all__ = ["create_app"]


def _version() -> str:
    try:
        return version("normlab")
    except PackageNotFoundError:
        return "0+unknown"


def create_app(
    settings: Settings | None = None,
    dispatcher: Dispatcher | None = None,
    *,
    lifespan: Callable[[FastAPI], AbstractAsyncContextManager[None]] | None = None,
) -> FastAPI:
    """Build the API. `dispatcher` stops running studies' Ray jobs on cancel (None: cancel only queued
    studies); `lifespan` runs inside the app's own (e.g. to start a background loop with the server)."""
    settings = settings or get_settings()
    if settings.auto_migrate:
        upgrade_database(str(settings.database_url))
    engine = make_engine(str(settings.database_url))

    @asynccontextmanager
    async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            if lifespan is None:
                yield
            else:
                async with lifespan(app):
                    yield
        finally:
            engine.dispose()

    app = FastAPI(
        title="NormLab",
        version=_version(),
        summary="Sweeps and seed-wise comparisons of normalization methods for Transformers",
        lifespan=_lifespan,
    )
    app.state.settings = settings
    app.state.engine = engine
    app.state.dispatcher = dispatcher
    # The MLflow runs of studies: a deleted study's parent run is marked there (mlflow imported only then).
    app.state.study_runs = StudyRuns(str(settings.mlflow_tracking_uri))
    # What to call once a new study is stored (the reconcile loop's wake, where one runs in this process).
    app.state.on_study_queued = None
    app.state.api_token = SecretStr(ensure_api_token(settings))  # SecretStr: never printed by accident
    # None unless plugins are on: then no token grants the right (service.api.plugins).
    app.state.plugin_token = ensure_plugin_token(settings) if settings.allow_plugins else None
    install_error_handlers(app)
    app.add_middleware(BodyTimeoutMiddleware, timeout_s=settings.body_timeout_s)  # stalled bodies: 408
    app.add_middleware(HostCheckMiddleware, allowed=AllowedHosts.for_settings(settings))  # DNS rebinding
    app.include_router(health_router)
    # The pages before the JSON routes: `/studies/{id}` answers a browser with its page, anyone else with JSON.
    app.include_router(web_router)
    app.include_router(studies_router)
    app.include_router(results_router)
    app.include_router(figures_router)
    app.include_router(reports_router)
    app.include_router(plans_router)
    app.include_router(study_charts_router)
    # The pages' scripts and the chart library they draw with, served from the package: no page loads
    # anything from outside the service (it may run where nothing else is reachable).
    app.mount("/static", StaticFiles(packages=[("service.web", "static")]), name="static")
    app.include_router(compare_router)
    _document_spec_schema(app)
    return app


def _document_spec_schema(app: FastAPI) -> None:
    """POST /studies reads its body by hand (JSON or YAML), so add the StudySpec schema to the docs."""
    build_openapi = app.openapi

    def openapi() -> dict:
        if app.openapi_schema is None:
            document = build_openapi()
            spec_schema = StudySpec.model_json_schema(ref_template="#/components/schemas/{model}")
            # The validators accept only these names; saying so lets clients (and schema-driven
            # tests) build specs that pass, instead of guessing at free text.
            properties = spec_schema["properties"]
            properties["dataset"]["enum"] = list(KNOWN_DATASETS)
            properties["methods"]["items"]["enum"] = list(METHODS)
            schemas = document.setdefault("components", {}).setdefault("schemas", {})
            schemas.update(spec_schema.pop("$defs", {}))
            schemas["StudySpec"] = spec_schema
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

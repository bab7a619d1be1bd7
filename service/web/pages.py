"""The pages: `/` (studies, newest first, searched by the API's own filters), `/studies/{id}` for a browser,
`/catalog` (claims and verdicts).

Thin routes, as the API's: one read-only unit of work at the database gate, the views (and the figures,
CPU work) built in a worker thread, a template rendered. `/studies/{id}` is shared with the JSON API: the
page route matches only requests that prefer HTML (negotiation.HtmlRoute), so every other client gets the
JSON route's answer, unchanged. The pages refresh themselves from the JSON API (their inline script polls
it); the study page also polls `/ui/studies/{id}/sections`, the part of it below its head (links,
attempts, trials, curves) as an HTML fragment, so every link stays built on the server.
None of these routes is part of the API's OpenAPI document.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, Response
from sqlalchemy.orm import Session

from service.api.compare import compare_studies
from service.api.deps import DatabaseDep, SettingsDep
from service.api.errors import NoResultsError
from service.api.extensions import studies_visible
from service.api.load_shedding import DatabaseGate
from service.api.mlflow_links import mlflow_sign_in_user
from service.api.results import ResultsSelection, choose_results, results_table
from service.api.routes.plans import cluster_of
from service.api.routes.text import NamedText, StorableText
from service.settings import Settings
from service.web.catalog import DEFAULT_REPORTS_DIR, SHOWN_TIERS, catalog_verdicts, stored_report
from service.web.compare import CompareSide, compared_table
from service.web.negotiation import HtmlRoute
from service.web.plan_view import is_planned, plan_beside
from service.web.rendering import render
from service.web.search import StudySearch, read_search
from service.web.views import StudyPage, study_card, study_page
from studies.methods import known_methods
from studies.planning import History, read_history
from studies.spec import KNOWN_DATASETS, StudySpec
from studies.store import (
    StudyNotFoundError,
    StudyStatus,
    StudyView,
    TrialView,
    get_study,
    list_studies,
    list_tags,
    list_trials,
    study_histories,
    study_looks,
    study_sequential,
    study_trial_plan,
)
from studies.tables.sequential import SequentialSummary

if TYPE_CHECKING:
    from studies.sequential import LookRecord

__all__ = ["router"]

HOME_LIMIT = 100  # studies on the home page (and in each of its polls of GET /studies)
POLL_INTERVAL_MS = 2000  # how often a page with a queued or running study asks the API again


async def reports_dir(settings: SettingsDep) -> Path:
    """Where scripts/run_catalog.py left the catalog's reports (NORMLAB_CATALOG_REPORTS_DIR)."""
    return settings.catalog_reports_dir or DEFAULT_REPORTS_DIR


ReportsDirDep = Annotated[Path, Depends(reports_dir)]

_negotiated = APIRouter(route_class=HtmlRoute, include_in_schema=False)
_pages = APIRouter(include_in_schema=False)


@_pages.get("/", name="home_page")
async def home_page(
    request: Request,
    database: DatabaseDep,
    settings: SettingsDep,
    q: str | None = None,
    dataset: str | None = None,
    method: str | None = None,
    status: str | None = None,
    tag: Annotated[list[str] | None, Query()] = None,
) -> Response:
    # The filters' choices include the plugin methods and user datasets that stored studies brought.
    async with studies_visible(database, every_study=True):
        search = read_search(q=q, dataset=dataset, method=method, status=status, tags=tag or ())
        datasets, methods = tuple(KNOWN_DATASETS), known_methods()
    studies, tags_in_use = await database.read(partial(_home_data, search=search))
    cards = [
        study_card(
            s,
            mlflow_tracking_uri=settings.mlflow_ui_url,
            ray_dashboard_url=settings.ray_ui_base,
            # The home page reads no trials: a study that succeeded has its final-phase (or grid) table.
            has_results=s.status == StudyStatus.SUCCEEDED,
        )
        for s in studies
    ]
    return render(
        request,
        "home.html",
        {
            "studies": cards,
            "limit": HOME_LIMIT,
            "poll_ms": POLL_INTERVAL_MS,
            "mlflow_user": mlflow_sign_in_user(),
            "search": search,
            "tags_in_use": tags_in_use,
            "datasets": datasets,
            "methods": methods,
            "statuses": [s.value for s in StudyStatus],
        },
    )


def _home_data(session: Session, *, search: StudySearch) -> tuple[list[StudyView], dict[str, int]]:
    """The studies the search selects, and every tag in use (the page's tag chips)."""
    return list_studies(session, **search.filters(), limit=HOME_LIMIT), list_tags(session)


@_negotiated.get("/studies/{study_id}", name="study_page")
async def study_page_route(
    request: Request, study_id: StorableText, database: DatabaseDep, settings: SettingsDep
) -> Response:
    async with studies_visible(database, study_ids=[study_id]):
        page = await _study_page(study_id, database, settings)
    if page is None:
        return _not_found(request, f"No study has the id {study_id!r}.")
    return render(request, "study.html", {"page": page, "study": page.study, "poll_ms": POLL_INTERVAL_MS})


@_pages.get("/ui/studies/{study_id}/sections", name="study_sections")
async def study_sections(
    request: Request, study_id: StorableText, database: DatabaseDep, settings: SettingsDep
) -> Response:
    """The study page below its head (links, attempts, trials, curves), which its script swaps in while
    the study runs."""
    async with studies_visible(database, study_ids=[study_id]):
        page = await _study_page(study_id, database, settings)
    if page is None:
        return _not_found(request, f"No study has the id {study_id!r}.")
    return render(request, "_study_sections.html", {"page": page, "study": page.study})


@_pages.get("/catalog", name="catalog_page")
async def catalog_page(request: Request, reports: ReportsDirDep) -> Response:
    claims = await run_in_threadpool(catalog_verdicts, reports)  # reads a report file per claim and tier
    return render(request, "catalog.html", {"claims": claims, "tiers": SHOWN_TIERS})


@_pages.get("/catalog/reports/{tier}/{claim_id}", name="catalog_report")
async def catalog_report(request: Request, tier: str, claim_id: str, reports: ReportsDirDep) -> Response:
    """The HTML report scripts/run_catalog.py stored for the claim at the tier (self-contained, no scripts)."""
    path = stored_report(reports, tier, claim_id, "html")
    if path is None:
        return _not_found(request, f"No {tier} report of claim {claim_id!r} is stored here.")
    return FileResponse(path, media_type="text/html; charset=utf-8")


@_negotiated.get("/compare", name="compare_page")  # JSON: service.api.routes.compare
async def compare_page(request: Request, a: NamedText, b: NamedText, database: DatabaseDep) -> Response:
    """Two studies side by side: what their specs set differently and each one's own results table."""
    try:
        async with studies_visible(database, study_ids=(a, b)):
            studies, selections = await database.read(partial(_compare_data, ids=(a, b)))
            compared = await database.read(partial(compare_studies, ids=(a, b)))
    except StudyNotFoundError as exc:
        return _not_found(request, str(exc))
    except RequestValidationError as exc:  # the same study twice, or studies of two datasets
        message = "; ".join(str(e.get("msg")) for e in exc.errors())
        return render(request, "not_found.html", {"message": message}, status_code=422)
    sides = await run_in_threadpool(partial(_compare_sides, studies, selections))
    second = compared.studies[1]  # b against a: its spec differences and paired rows
    context = {"sides": sides, "differences": list(second.differences), "paired": second.paired}
    return render(request, "compare.html", {**context, "metric": compared.metric})


def _compare_data(
    session: Session, *, ids: tuple[str, str]
) -> tuple[list[StudyView], list[ResultsSelection | str]]:
    """Both studies and, for each, its own results selection (or why it has none yet)."""
    studies = [get_study(session, study_id=study_id) for study_id in ids]
    selections: list[ResultsSelection | str] = []
    for study in studies:
        try:
            selections.append(choose_results(session, dataset=study.dataset, study_ids=[study.id]))
        except NoResultsError as exc:
            selections.append(str(exc))
    return studies, selections


def _compare_sides(studies: list[StudyView], selections: list[ResultsSelection | str]) -> list[CompareSide]:
    sides = []
    for study, selection in zip(studies, selections, strict=True):
        table = None if isinstance(selection, str) else compared_table(results_table(selection))
        sides.append(
            CompareSide(
                id=study.id,
                name=study.name,
                status=study.status,
                dataset=study.dataset,
                page_url=f"/studies/{quote(study.id, safe='')}",
                table=table,
                why_no_table=selection if isinstance(selection, str) else None,
            )
        )
    return sides


async def _study_page(study_id: str, database: DatabaseGate, settings: Settings) -> StudyPage | None:
    """The study's page data (None: no such study): the store read at the gate, the views and figures
    built in a worker thread that holds no connection."""
    try:
        study, trials, histories, sequential, looks, history, trial_plan = await database.read(
            partial(_study_data, study_id=study_id)
        )
    except StudyNotFoundError:
        return None
    page = await run_in_threadpool(
        partial(
            study_page,
            study,
            trials,
            histories,
            mlflow_tracking_uri=settings.mlflow_ui_url,
            ray_dashboard_url=settings.ray_ui_base,
            sequential=sequential,
            looks=looks,
            mlflow_user=mlflow_sign_in_user(),
        )
    )
    if history is None:
        return page
    plan = await run_in_threadpool(
        partial(
            plan_beside,
            study,
            trials,
            history=history,
            cluster=cluster_of(settings),
            limits=settings.study_limits,
            trial_plan=trial_plan,
        )
    )
    return replace(page, plan=plan)


def _study_data(
    session: Session, *, study_id: str
) -> tuple[
    StudyView,
    list[TrialView],
    dict[str, list[dict[str, Any]]],
    SequentialSummary | None,
    list[LookRecord],
    History | None,
    dict[str, Any] | None,
]:
    """The study, its trials and their histories, its sequential summary and looks (what its completeness
    counts a sequential design's trials from), and the trial plan its driver resolved."""
    study = get_study(session, study_id=study_id)
    trials = list_trials(session, study_id=study_id)
    histories = study_histories(session, study_id=study_id) if trials else {}
    looks = study_looks(session, study.id) if study.spec.get("sequential") else []
    sequential = study_sequential(session, study=study)
    trial_plan = study_trial_plan(session, study_id=study_id).plan
    return study, trials, histories, sequential, looks, _history(session, study), trial_plan


def _history(session: Session, study: StudyView) -> History | None:
    """Earlier studies of the study's dataset and model, which its plan is priced from; None when its
    stored spec no longer validates (then the page has no plan). Once the plan is cached (the page polls
    every few seconds) it is priced already: no read."""
    try:
        spec = StudySpec.model_validate(study.spec)
    except ValueError:
        return None
    return History() if is_planned(study.id, spec) else read_history(session, spec)


def _not_found(request: Request, message: str) -> Response:
    return render(request, "not_found.html", {"message": message}, status_code=404)


router = APIRouter()
# The negotiated routes first: a page route that does not match hands the request on to the next route.
router.include_router(_negotiated)
router.include_router(_pages)

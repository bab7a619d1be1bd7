"""/studies: submit (JSON or YAML), list and search, read with progress, list trials, a trial's history,
cancel, tag, delete.

Routes only persist: a submitted study is stored QUEUED and the background loop starts it. Cancelling,
which stops a running study's cluster job first, is service.orchestration.cancel.cancel_study. Deleting
removes an ended study's rows in one transaction (studies.store.delete_study) and marks its MLflow runs
after the answer has left (service.orchestration.delete).

The routes that touch the store are `async def` and hand their store calls to the database gate (one
transaction each, committed before the response is built); response validation then runs on the event
loop, never waiting for a worker thread while a connection or SQLite's write lock is held.
"""

from __future__ import annotations

from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, BackgroundTasks, Depends, Header, Query, Request, Response, status
from sqlalchemy.orm import Session

from service.api.deps import AuthDep, DatabaseDep, DispatcherDep, EngineDep, SettingsDep, StudyRunsDep
from service.api.errors import error_responses
from service.api.routes.choices import KnownDataset, KnownMethod, check_known_filters
from service.api.routes.schemas import StudyDeletedOut, StudyOut, TrialHistoryOut, TrialOut
from service.api.routes.spec_body import read_spec, spec_request_body
from service.api.routes.tag_values import Tag, TagsIn
from service.api.routes.text import StorableText
from service.orchestration import cancel as studies_service
from service.orchestration.delete import mark_runs_deleted
from studies.spec import StudySpec
from studies.store import (
    Phase,
    StudyStatus,
    StudyView,
    TrialStatus,
    TrialView,
    create_study,
    create_study_once,
    delete_study,
    get_study,
    list_studies,
    list_trials,
    set_tags,
    study_sequential,
    study_trial_plan,
    trial_history,
)
from studies.tables.sequential import SequentialSummary

__all__ = ["router"]

router = APIRouter(prefix="/studies", tags=["studies"])

_SPEC_BODY = spec_request_body("A StudySpec as JSON or YAML (see studies/examples/).")


_REPLAYED_HEADER = "Idempotent-Replayed"

IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=255,
        pattern=r"^[!-~]+$",  # visible ASCII, e.g. a UUID
        description=(
            "Makes a retried submission safe: the first POST with a key stores the study (201); a later one "
            "with the same key and the same spec stores nothing and answers that study (200, header "
            f"`{_REPLAYED_HEADER}: true`); the same key with another spec is a 422. Keys never expire."
        ),
    ),
]

_REPLAY_RESPONSE: dict[int | str, dict[str, Any]] = {
    200: {
        "model": StudyOut,
        "description": "Replay: an earlier POST with this Idempotency-Key and spec stored this study; "
        "nothing new was stored",
        "headers": {
            _REPLAYED_HEADER: {
                "description": "`true`: this answer repeats an earlier submission",
                "schema": {"type": "string", "enum": ["true"]},
            }
        },
    }
}


async def spec_from_body(request: Request, settings: SettingsDep) -> StudySpec:
    """Parse and validate the body by its content type, with the server's study limits."""
    return await read_spec(request, settings)


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=StudyOut,
    dependencies=[AuthDep],
    openapi_extra=_SPEC_BODY,
    responses={**_REPLAY_RESPONSE, **error_responses(401, 403, 413, 415, 422, 503, 507)},
    summary="Submit a study (stored as queued; the background loop starts it)",
)
async def submit_study(
    spec: Annotated[StudySpec, Depends(spec_from_body)],
    database: DatabaseDep,
    settings: SettingsDep,
    request: Request,
    response: Response,
    background: BackgroundTasks,
    idempotency_key: IdempotencyKey = None,
) -> StudyOut:
    # Committed when the write returns: a 201 means the study is stored.
    study, created = await database.write(partial(_store_study, spec=spec, idempotency_key=idempotency_key))
    if not created:
        response.status_code = status.HTTP_200_OK
        response.headers[_REPLAYED_HEADER] = "true"
    response.headers["Location"] = str(request.url_for("read_study", study_id=study.id))
    on_study_queued = request.app.state.on_study_queued
    if created and on_study_queued is not None:
        # A background task runs once the response has left.
        background.add_task(on_study_queued)
    return StudyOut.from_view(study, mlflow_tracking_uri=settings.mlflow_ui_url)


def _store_study(session: Session, *, spec: StudySpec, idempotency_key: str | None) -> tuple[StudyView, bool]:
    """(the study, whether this call created it): a new one, or the one an earlier POST stored under
    `idempotency_key`."""
    if idempotency_key is None:
        return create_study(session, spec=spec), True
    return create_study_once(session, spec=spec, idempotency_key=idempotency_key)


@router.get(
    "",
    response_model=list[StudyOut],
    summary="List studies, newest first; every filter given narrows the list",
    responses=error_responses(503),
)
async def read_studies(
    database: DatabaseDep,
    settings: SettingsDep,
    status: StudyStatus | None = None,
    dataset: KnownDataset | None = None,
    method: Annotated[KnownMethod | None, Query(description="a method the study compares")] = None,
    q: Annotated[
        StorableText | None, Query(description="text in the study's name or description, any case")
    ] = None,
    tag: Annotated[
        list[Tag] | None, Query(description="a tag the study carries; repeated, it must carry every one")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[StudyOut]:
    await check_known_filters(database, dataset=dataset, method=method)
    studies = await database.read(
        partial(list_studies, status=status, dataset=dataset, method=method, q=q, tags=tag or (), limit=limit)
    )
    return [StudyOut.from_view(s, mlflow_tracking_uri=settings.mlflow_ui_url) for s in studies]


@router.get(
    "/{study_id}",
    response_model=StudyOut,
    responses=error_responses(404, 503),
    summary="A study with its progress (and, for a sequential study, its looks and outcomes)",
)
async def read_study(study_id: StorableText, database: DatabaseDep, settings: SettingsDep) -> StudyOut:
    study, sequential, trial_plan = await database.read(partial(_study_in_full, study_id=study_id))
    return StudyOut.from_view(
        study, mlflow_tracking_uri=settings.mlflow_ui_url, sequential=sequential, trial_plan=trial_plan
    )


def _study_in_full(
    session: Session, *, study_id: str
) -> tuple[StudyView, SequentialSummary | None, dict[str, Any] | None]:
    """The study, its sequential summary (from its looks) and the trial plan its driver resolved."""
    study = get_study(session, study_id=study_id)
    return study, study_sequential(session, study=study), study_trial_plan(session, study_id=study_id).plan


@router.get(
    "/{study_id}/trials",
    response_model=list[TrialOut],
    responses=error_responses(404, 503),
    summary="A study's trials, oldest first",
)
async def read_trials(
    study_id: StorableText,
    database: DatabaseDep,
    phase: Phase | None = None,
    status: TrialStatus | None = None,
) -> list[TrialOut]:
    trials = await database.read(partial(_study_trials, study_id=study_id, phase=phase, status=status))
    return [TrialOut.from_view(t) for t in trials]


def _study_trials(
    session: Session, *, study_id: str, phase: Phase | None, status: TrialStatus | None
) -> list[TrialView]:
    get_study(session, study_id=study_id)  # 404 for an unknown study rather than an empty list
    return list_trials(session, study_id=study_id, phase=phase, status=status)


@router.get(
    "/{study_id}/trials/{trial_key:path}/history",
    response_model=TrialHistoryOut,
    responses=error_responses(404, 503),
    summary="A trial's per-epoch history: every metric of every epoch it reported (epoch 0 included)",
)
async def read_trial_history(
    study_id: StorableText, trial_key: StorableText, database: DatabaseDep
) -> TrialHistoryOut:
    history = await database.read(partial(trial_history, study_id=study_id, trial_key=trial_key))
    return TrialHistoryOut.from_history(study_id, trial_key, history)


@router.post(
    "/{study_id}/cancel",
    response_model=StudyOut,
    dependencies=[AuthDep],
    responses=error_responses(401, 404, 409, 503, 507),
    summary="Cancel a study: a queued one at once, a running one by stopping its Ray job",
)
def cancel_study(
    study_id: StorableText, engine: EngineDep, dispatcher: DispatcherDep, settings: SettingsDep
) -> StudyOut:
    # Sync, outside the gate: the Ray call between its transactions may take seconds, and holds no
    # connection meanwhile; each transaction commits before the route returns.
    study = studies_service.cancel_study(engine, dispatcher, study_id)
    return StudyOut.from_view(study, mlflow_tracking_uri=settings.mlflow_ui_url)


@router.put(
    "/{study_id}/tags",
    response_model=StudyOut,
    dependencies=[AuthDep],
    responses=error_responses(401, 404, 422, 503, 507),
    summary="Replace a study's tags (an empty list removes them all)",
)
async def put_study_tags(
    study_id: StorableText, body: TagsIn, database: DatabaseDep, settings: SettingsDep
) -> StudyOut:
    study = await database.write(partial(set_tags, study_id=study_id, tags=body.tags))
    return StudyOut.from_view(study, mlflow_tracking_uri=settings.mlflow_ui_url)


@router.delete(
    "/{study_id}",
    response_model=StudyDeletedOut,
    dependencies=[AuthDep],
    responses=error_responses(401, 404, 409, 422, 503, 507),
    summary="Delete an ended study with its trials and everything else stored about it; its MLflow runs "
    "are kept, the parent run tagged normlab.deleted=true",
)
async def remove_study(
    study_id: StorableText,
    confirm: Annotated[
        str,
        Query(
            min_length=1,
            description="the study's id again: a deletion cannot be undone, so it is never one slip away",
        ),
    ],
    database: DatabaseDep,
    runs: StudyRunsDep,
    background: BackgroundTasks,
) -> StudyDeletedOut:
    # A queued or running study is a 409 (cancel it first); the rows go in one transaction, committed here.
    deleted = await database.write(partial(delete_study, study_id=study_id, confirm=confirm))
    # After the answer has left: a slow or absent MLflow never delays the deletion (best-effort, logged).
    background.add_task(mark_runs_deleted, runs, deleted)
    return StudyDeletedOut.from_deleted(deleted)

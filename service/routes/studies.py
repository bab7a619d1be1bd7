"""/studies: submit (JSON or YAML), list, read with progress, list trials, a trial's history, cancel.

Routes only persist: a submitted study is stored QUEUED and the background loop starts it. Cancelling,
which stops a running study's cluster job first, is service.studies.cancel_study.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, BackgroundTasks, Depends, Header, Query, Request, Response, status

from service import studies as studies_service
from service.deps import AuthDep, DispatcherDep, SessionDep, SettingsDep
from service.errors import error_responses
from service.routes.schemas import StudyOut, TrialHistoryOut, TrialOut
from service.routes.sessions import EngineDep, ReadSessionDep
from service.routes.spec_body import read_spec
from service.routes.text import StorableText
from service.store import (
    Phase,
    StudyStatus,
    TrialStatus,
    create_study,
    create_study_once,
    get_study,
    list_studies,
    list_trials,
    trial_history,
)
from studies.spec import StudySpec

__all__ = ["router"]

router = APIRouter(prefix="/studies", tags=["studies"])

_SPEC_BODY = {
    "requestBody": {
        "required": True,
        "description": "A StudySpec as JSON or YAML (see studies/examples/).",
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/StudySpec"}},
            "application/yaml": {"schema": {"type": "string"}},
        },
    }
}


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
    responses={**_REPLAY_RESPONSE, **error_responses(401, 413, 415, 422)},
    summary="Submit a study (stored as queued; the background loop starts it)",
)
def submit_study(
    spec: Annotated[StudySpec, Depends(spec_from_body)],
    session: SessionDep,
    request: Request,
    response: Response,
    background: BackgroundTasks,
    idempotency_key: IdempotencyKey = None,
) -> StudyOut:
    created = True
    if idempotency_key is None:
        study = create_study(session, spec=spec)
    else:
        study, created = create_study_once(session, spec=spec, idempotency_key=idempotency_key)
        if not created:
            response.status_code = status.HTTP_200_OK
            response.headers[_REPLAYED_HEADER] = "true"
    response.headers["Location"] = str(request.url_for("read_study", study_id=study.id))
    on_study_queued = request.app.state.on_study_queued
    if created and on_study_queued is not None:
        # A background task runs once the response has left, after the session committed the study.
        background.add_task(on_study_queued)
    return StudyOut.from_view(study)


@router.get("", response_model=list[StudyOut], summary="List studies, newest first")
def read_studies(
    session: ReadSessionDep,
    status: StudyStatus | None = None,
    dataset: StorableText | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[StudyOut]:
    return [StudyOut.from_view(s) for s in list_studies(session, status=status, dataset=dataset, limit=limit)]


@router.get(
    "/{study_id}",
    response_model=StudyOut,
    responses=error_responses(404),
    summary="A study with its progress",
)
def read_study(study_id: StorableText, session: ReadSessionDep) -> StudyOut:
    return StudyOut.from_view(get_study(session, study_id=study_id))


@router.get(
    "/{study_id}/trials",
    response_model=list[TrialOut],
    responses=error_responses(404),
    summary="A study's trials, oldest first",
)
def read_trials(
    study_id: StorableText,
    session: ReadSessionDep,
    phase: Phase | None = None,
    status: TrialStatus | None = None,
) -> list[TrialOut]:
    get_study(session, study_id=study_id)  # 404 for an unknown study rather than an empty list
    return [
        TrialOut.from_view(t) for t in list_trials(session, study_id=study_id, phase=phase, status=status)
    ]


@router.get(
    "/{study_id}/trials/{trial_key:path}/history",
    response_model=TrialHistoryOut,
    responses=error_responses(404),
    summary="A trial's per-epoch history: every metric of every epoch it reported (epoch 0 included)",
)
def read_trial_history(
    study_id: StorableText, trial_key: StorableText, session: ReadSessionDep
) -> TrialHistoryOut:
    history = trial_history(session, study_id=study_id, trial_key=trial_key)
    return TrialHistoryOut.from_history(study_id, trial_key, history)


@router.post(
    "/{study_id}/cancel",
    response_model=StudyOut,
    dependencies=[AuthDep],
    responses=error_responses(401, 404, 409, 503),
    summary="Cancel a study: a queued one at once, a running one by stopping its Ray job",
)
def cancel_study(study_id: StorableText, engine: EngineDep, dispatcher: DispatcherDep) -> StudyOut:
    return StudyOut.from_view(studies_service.cancel_study(engine, dispatcher, study_id))

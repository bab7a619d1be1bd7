"""GET /compare: two or more studies of one dataset side by side (service.api.compare), as JSON; a
browser gets the compare page on the same path."""

from __future__ import annotations

from dataclasses import asdict
from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Query

from service.api.compare import StudiesCompared, compare_studies
from service.api.deps import DatabaseDep
from service.api.errors import error_responses
from service.api.extensions import studies_visible
from service.api.routes.text import StorableText

__all__ = ["router"]

router = APIRouter(tags=["compare"])


@router.get(
    "/compare",
    summary="Two or more studies of one dataset: spec differences and paired differences by seed",
    responses=error_responses(404, 422, 503),
)
async def compare(
    database: DatabaseDep,
    study: Annotated[
        list[StorableText],
        Query(
            description="a study id; name two or more", min_length=2, json_schema_extra={"uniqueItems": True}
        ),
    ],
) -> dict[str, Any]:
    """Every study after the first against the first: what its spec sets differently, and for each row
    (method or grid point) both ran, its difference on the seeds both ran (paired t, Holm across rows;
    "not tested" where a study chose its seeds look by look)."""
    async with studies_visible(database, study_ids=study):
        return _json(await database.read(partial(compare_studies, ids=study)))


def _json(compared: StudiesCompared) -> dict[str, Any]:
    return {
        "dataset": compared.dataset,
        "metric": compared.metric,
        "higher_is_better": compared.higher_is_better,
        "against": compared.studies[0].study.id,
        "studies": [
            {
                "id": side.study.id,
                "name": side.study.name,
                "status": side.study.status,
                "spec_differences": [asdict(d) for d in side.differences],
                "paired": [asdict(row) for row in side.paired],
            }
            for side in compared.studies
        ],
    }

"""The records stored studies bring with them: their plugins' and user datasets' facts.

The API process never imports a plugin, so it knows a plugin's method or a user's dataset only from the
specs that name them. A request that shows such studies (results, figures, a study's page, a report)
reads their records here and overlays them for its own duration (normlab.REGISTRY.overlay); two studies
naming the same record contribute the newest one.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from normlab import Record
from studies.spec.plugins import plugin_records
from studies.store._studies import get_study, list_studies
from studies.store.errors import StudyNotFoundError
from studies.store.tables import Study
from studies.store.views import StudyView

__all__ = ["extension_records", "records_of_studies"]


def records_of_studies(studies: Iterable[StudyView]) -> list[Record]:
    """The records of `studies` (oldest first: a newer study's record replaces an older one's)."""
    return _records_of_specs(study.spec for study in studies)


def _records_of_specs(specs: Iterable[object]) -> list[Record]:
    found: dict[tuple[str, str], Record] = {}
    for spec in specs:
        for record in plugin_records(spec):
            found[(type(record).section, record.name)] = record
    return list(found.values())


def extension_records(
    session: Session, *, dataset: str | None = None, study_ids: Iterable[str] = (), every_study: bool = False
) -> list[Record]:
    """The records of every study of `dataset` and of the studies named; `every_study`: of all stored
    studies (what a filter on the study list may name), reading their specs alone."""
    if every_study:
        return _records_of_specs(session.scalars(select(Study.spec).order_by(Study.created_at, Study.id)))
    studies = list_studies(session, dataset=dataset, order="oldest") if dataset is not None else []
    for study_id in study_ids:
        try:
            studies.append(get_study(session, study_id=study_id))
        except StudyNotFoundError:
            continue  # the route says so, in its own words
    return records_of_studies(studies)

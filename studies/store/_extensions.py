"""The records stored studies bring with them: their plugins' and user datasets' facts.

The API process never imports a plugin, so it knows a plugin's method or a user's dataset only from the
specs that name them. A request that shows such studies (results, figures, a study's page, a report)
reads their records here and overlays them for its own duration (normlab.REGISTRY.overlay); two studies
naming the same record contribute the newest one.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy.orm import Session

from normlab import Record
from studies.spec.plugins import plugin_records
from studies.store._studies import get_study, list_studies
from studies.store.errors import StudyNotFoundError
from studies.store.views import StudyView

__all__ = ["extension_records", "records_of_studies"]


def records_of_studies(studies: Iterable[StudyView]) -> list[Record]:
    """The records of `studies` (oldest first: a newer study's record replaces an older one's)."""
    found: dict[tuple[str, str], Record] = {}
    for study in studies:
        for record in plugin_records(study.spec):
            found[(type(record).section, record.name)] = record
    return list(found.values())


def extension_records(
    session: Session, *, dataset: str | None = None, study_ids: Iterable[str] = ()
) -> list[Record]:
    """The records of every study of `dataset` and of the studies named."""
    studies = list_studies(session, dataset=dataset, order="oldest") if dataset is not None else []
    for study_id in study_ids:
        try:
            studies.append(get_study(session, study_id=study_id))
        except StudyNotFoundError:
            continue  # the route says so, in its own words
    return records_of_studies(studies)

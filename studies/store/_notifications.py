"""Which ended studies still owe their announcement, and recording one as sent (at most once a study)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from studies.store._studies import _progress_for
from studies.store.status import TERMINAL_STATUSES
from studies.store.tables import Study, StudyNotification
from studies.store.views import StudyView

__all__ = ["mark_announced", "studies_to_announce"]


def studies_to_announce(session: Session, *, ended_since: datetime, limit: int) -> list[StudyView]:
    """Ended studies not yet announced that ended at or after `ended_since`, the earliest first. An older
    end is not announced late (turning notifications on must not replay every study ever run)."""
    announced = select(StudyNotification.study_id)
    rows = list(
        session.scalars(
            select(Study)
            .where(
                Study.status.in_([s.value for s in TERMINAL_STATUSES]),
                Study.finished_at.is_not(None),
                Study.finished_at >= ended_since,
                Study.id.not_in(announced),
            )
            .order_by(Study.finished_at.asc(), Study.id)
            .limit(limit)
        )
    )
    progress = _progress_for(session, rows)
    return [StudyView.from_row(row, progress[row.id]) for row in rows]


def mark_announced(session: Session, *, study_id: str, at: datetime) -> None:
    """Record the study's announcement as sent; a second call (another process got there first) is a no-op."""
    if session.get(StudyNotification, study_id) is not None:
        return
    try:
        with session.begin_nested():
            session.add(StudyNotification(study_id=study_id, notified_at=at))
    except IntegrityError:
        pass  # recorded by a concurrent reconcile loop meanwhile

"""Per-epoch trial history: every metric a trial reported, epoch by epoch, upserted by (trial_key, epoch).

The driver writes each epoch as Tune reports it; a retried trial that re-reports an epoch overwrites it
(last write wins), so a history never holds an epoch twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from studies.numbers import json_safe
from studies.store._trials import _domain, _many
from studies.store.errors import (
    InvalidTrialError,
    StudyNotFoundError,
    TrialKeyConflictError,
    TrialNotFoundError,
)
from studies.store.status import Phase
from studies.store.tables import Study, Trial, TrialEpoch, utcnow

__all__ = ["record_trial_epoch", "study_histories", "trial_history"]

EPOCH_KEY = "epoch"


def record_trial_epoch(
    session: Session, *, study_id: str, trial_key: str, epoch: int, metrics: Mapping[str, Any]
) -> None:
    """Insert or overwrite epoch `epoch` of trial `trial_key` (one small upsert; the trial row may not exist yet).

    Non-finite floats are stored as null, as in record_trial. An epoch key already recorded for another
    study raises TrialKeyConflictError and is left untouched.
    """
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise InvalidTrialError(f"epoch must be an integer >= 0, got {epoch!r}")
    if session.get(Study, study_id) is None:
        raise StudyNotFoundError(study_id)
    values = {
        "trial_key": trial_key,
        "epoch": epoch,
        "study_id": study_id,
        "metrics": json_safe({k: v for k, v in metrics.items() if k != EPOCH_KEY}),
        "recorded_at": utcnow(),
    }
    insert = pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    statement = insert(TrialEpoch).values(**values)
    upsert = statement.on_conflict_do_update(
        index_elements=[TrialEpoch.trial_key, TrialEpoch.epoch],
        set_={"metrics": statement.excluded.metrics, "recorded_at": statement.excluded.recorded_at},
        where=TrialEpoch.study_id == statement.excluded.study_id,
    ).returning(TrialEpoch.epoch)
    # No row comes back when the WHERE refused the update (rowcount is not reliable for upserts).
    if session.execute(upsert).first() is None:
        owner = session.scalar(
            select(TrialEpoch.study_id).where(TrialEpoch.trial_key == trial_key, TrialEpoch.epoch == epoch)
        )
        raise TrialKeyConflictError(trial_key, str(owner), study_id)


def trial_history(session: Session, *, study_id: str, trial_key: str) -> list[dict[str, Any]]:
    """The trial's epochs in order, each `{"epoch": e, **metrics}`; [] for a trial that reported none yet.

    Raises StudyNotFoundError for an unknown study and TrialNotFoundError for a key the study has
    neither a trial row nor epochs for.
    """
    if session.get(Study, study_id) is None:
        raise StudyNotFoundError(study_id)
    rows = session.scalars(
        select(TrialEpoch)
        .where(TrialEpoch.study_id == study_id, TrialEpoch.trial_key == trial_key)
        .order_by(TrialEpoch.epoch)
    ).all()
    if not rows:
        known = session.scalar(
            select(Trial.id).where(Trial.study_id == study_id, Trial.trial_key == trial_key)
        )
        if known is None:
            raise TrialNotFoundError(study_id, trial_key)
    return [_as_dict(row) for row in rows]


def study_histories(
    session: Session, *, study_id: str, phase: Phase | str | Sequence[Phase | str] | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Every trial's history in a study, by trial_key; `phase` (one or several) keeps the trials recorded
    in that phase (epochs of a trial without a trial row count only when no phase is asked for)."""
    if session.get(Study, study_id) is None:
        raise StudyNotFoundError(study_id)
    query = select(TrialEpoch).where(TrialEpoch.study_id == study_id)
    if phase is not None:
        phases = [_domain(Phase, p, "phase") for p in _many(phase)]
        keys = select(Trial.trial_key).where(Trial.study_id == study_id, Trial.phase.in_(phases))
        query = query.where(TrialEpoch.trial_key.in_(keys))
    histories: dict[str, list[dict[str, Any]]] = {}
    for row in session.scalars(query.order_by(TrialEpoch.trial_key, TrialEpoch.epoch)):
        histories.setdefault(row.trial_key, []).append(_as_dict(row))
    return histories


def _as_dict(row: TrialEpoch) -> dict[str, Any]:
    return {EPOCH_KEY: row.epoch, **row.metrics}

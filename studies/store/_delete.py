"""Deleting an ended study with everything stored about it, in the caller's one transaction: a failure
half-way rolls every table back, so no study is left with some of its rows gone.

Which tables hold a study's rows is read from the schema (every foreign key to `studies.id`), not listed
here: a table added later is deleted with its study without anyone remembering to add it.
"""

from __future__ import annotations

from typing import cast

from sqlalchemy import Column, ColumnElement, CursorResult, Table, delete
from sqlalchemy.orm import Session

from studies.store._studies import _get_row
from studies.store.errors import DeletionNotConfirmedError, StudyNotDeletableError
from studies.store.status import TERMINAL_STATUSES, StudyStatus
from studies.store.tables import Base, Study
from studies.store.views import DeletedStudy

__all__ = ["delete_study", "study_key_columns"]


def delete_study(session: Session, *, study_id: str, confirm: str | None) -> DeletedStudy:
    """Delete the ended study `study_id` and every row keyed by it (trials, epochs, attempts, failed
    submissions, looks, notifications, tags); its MLflow runs are not the store's (the caller marks them).

    Checked in this order, so the answer is the most useful one: an unknown id raises StudyNotFoundError,
    a study that has not ended StudyNotDeletableError (its driver may still write to it), and `confirm`
    not repeating the id DeletionNotConfirmedError (a deletion is never one slip away).
    """
    row = _get_row(session, study_id, for_update=True)  # a concurrent status change waits for this
    if StudyStatus(row.status) not in TERMINAL_STATUSES:
        raise StudyNotDeletableError(study_id, row.status)
    if confirm != study_id:
        raise DeletionNotConfirmedError(study_id, confirm)
    # Children first, the study last: explicit deletes rather than ON DELETE CASCADE alone, so the count
    # of each table is known and nothing depends on SQLite's foreign_keys pragma being on.
    rows: dict[str, int] = {}
    for key in study_key_columns():
        rows[key.table.name] = _deleted(session, key.table, key == study_id)
    session.expunge(row)  # its row goes now: the session must not flush or refresh it
    rows[Study.__tablename__] = _deleted(session, cast(Table, Study.__table__), Study.id == study_id)
    return DeletedStudy(
        id=row.id,
        name=row.name,
        dataset=row.dataset,
        status=row.status,
        mlflow_experiment_id=row.mlflow_experiment_id,
        mlflow_parent_run_id=row.mlflow_parent_run_id,
        rows=rows,
    )


def _deleted(session: Session, table: Table, where: ColumnElement[bool]) -> int:
    """How many rows of `table` the DELETE ... WHERE `where` removed."""
    return cast(CursorResult, session.execute(delete(table).where(where))).rowcount


def study_key_columns() -> list[Column]:
    """The column of every table that refers to a study (a foreign key to studies.id), children first."""
    studies_id = Study.__table__.c.id
    return [
        fk.parent
        for table in reversed(Base.metadata.sorted_tables)
        for fk in sorted(table.foreign_keys, key=lambda fk: fk.parent.name)
        if fk.column is studies_id
    ]

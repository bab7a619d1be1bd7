"""How a study's trials are planned: the spec fields its submitter wrote, recorded when it is stored, and the
trial plan its driver resolved, recorded when the study starts.

The stored spec has every default filled in, so it cannot tell `budget.compile: none` written by the
submitter from the default; the fields written are kept beside it (pydantic's `model_fields_set`, as
dotted paths). The driver measures what the submitter left open (workers.driver.throughput), records the
plan it resolved, and a restarted driver keeps that plan rather than choosing again mid-study.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from sqlalchemy.orm import Session

from studies.store.errors import StudyNotFoundError
from studies.store.tables import Study, StudyTrialPlan, utcnow

__all__ = ["StoredTrialPlan", "set_study_trial_plan", "spec_fields_set", "study_trial_plan"]


@dataclass(frozen=True)
class StoredTrialPlan:
    spec_fields_set: frozenset[str] | None  # None: not recorded (a study stored before they were)
    plan: dict[str, Any] | None  # None: its driver has not planned yet


def spec_fields_set(spec: BaseModel, prefix: str = "") -> list[str]:
    """The fields of `spec` (and of its sections, recursively) that were given a value rather than left to
    their defaults, as sorted dotted paths ("budget.compile")."""
    fields: list[str] = []
    for name in spec.model_fields_set:
        path = f"{prefix}{name}"
        fields.append(path)
        value = getattr(spec, name, None)
        if isinstance(value, BaseModel):
            fields.extend(spec_fields_set(value, prefix=f"{path}."))
    return sorted(fields)


def record_spec_fields(session: Session, *, study_id: str, fields: list[str]) -> None:
    """At creation (studies.store.create_study): the fields the submitter wrote."""
    session.add(StudyTrialPlan(study_id=study_id, spec_fields_set=sorted(fields)))


def set_study_trial_plan(session: Session, *, study_id: str, plan: Mapping[str, Any]) -> None:
    """The trial plan the study's driver resolved (replacing an earlier driver's)."""
    if session.get(Study, study_id) is None:
        raise StudyNotFoundError(study_id)
    row = session.get(StudyTrialPlan, study_id)
    if row is None:
        row = StudyTrialPlan(study_id=study_id)
        session.add(row)
    row.plan = dict(plan)
    row.planned_at = utcnow()
    session.flush()


def study_trial_plan(session: Session, *, study_id: str) -> StoredTrialPlan:
    """What is recorded of the study's planning (both parts None when nothing is)."""
    row = session.get(StudyTrialPlan, study_id)
    if row is None:
        return StoredTrialPlan(spec_fields_set=None, plan=None)
    fields = None if row.spec_fields_set is None else frozenset(row.spec_fields_set)
    return StoredTrialPlan(spec_fields_set=fields, plan=None if row.plan is None else dict(row.plan))

"""SQLAlchemy tables: one row per study, one row per driver attempt of a study (its Ray job and, when the
driver died, why), one row per submission of a driver the cluster did not take (in its words), one row per
trial (keyed by the driver's idempotent trial_key), and one row per reported epoch of a trial (its per-epoch
history), one row per look of a sequential study (what the look saw and decided, as
studies.sequential's LookRecord writes it), one row per tag of a study, and one row per study of how its
trials were planned (the spec fields its submitter wrote, and the driver's trial plan).

The Alembic revisions in studies/store/migrations create exactly these tables; a test compares the two.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from studies.store.status import Phase, StudyStatus, TrialStatus

__all__ = [
    "Base",
    "Study",
    "StudyAttempt",
    "StudyLook",
    "StudyNotification",
    "StudySubmitFailure",
    "StudyTag",
    "StudyTrialPlan",
    "Trial",
    "TrialEpoch",
    "utcnow",
]

# Deterministic constraint names, so later migrations can address them on every backend.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

JSONType = JSON().with_variant(JSONB(), "postgresql")


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def _in(column: str, values: list[str]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Study(Base):
    __tablename__ = "studies"
    __table_args__ = (CheckConstraint(_in("status", [s.value for s in StudyStatus]), name="status"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)  # uuid4 hex
    name: Mapped[str] = mapped_column(String(120))
    dataset: Mapped[str] = mapped_column(String(64), index=True)
    kind: Mapped[str] = mapped_column(String(16))
    spec: Mapped[dict[str, Any]] = mapped_column(JSONType)  # the validated StudySpec, defaults filled in
    status: Mapped[str] = mapped_column(String(16), index=True)
    error: Mapped[str | None] = mapped_column(Text)
    planned_trials: Mapped[int] = mapped_column(Integer)
    ray_job_id: Mapped[str | None] = mapped_column(String(128))
    mlflow_experiment_id: Mapped[str | None] = mapped_column(String(64))
    mlflow_parent_run_id: Mapped[str | None] = mapped_column(String(64))
    # The client's Idempotency-Key of the POST that created the study (None: sent without one).
    idempotency_key: Mapped[str | None] = mapped_column(String(255), unique=True, index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # When the reconcile loop made sure this ended study left no MLflow run RUNNING (None: not yet).
    mlflow_closed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    # Loaded with the study (one query for a whole listing): every view of a study shows its attempts.
    attempts: Mapped[list[StudyAttempt]] = relationship(
        order_by="StudyAttempt.number", lazy="selectin", passive_deletes=True
    )
    # Loaded with it too: the pages show a study that Ray does not take, and why.
    submit_failures: Mapped[list[StudySubmitFailure]] = relationship(
        order_by="StudySubmitFailure.number", lazy="selectin", passive_deletes=True
    )
    # Loaded with it too: every listing shows a study's tags. Changed through this collection only
    # (studies.store._tags), so a removed tag is deleted with the flush rather than orphaned.
    tags: Mapped[list[StudyTag]] = relationship(
        order_by="StudyTag.tag", lazy="selectin", cascade="all, delete-orphan", passive_deletes=True
    )


class StudyAttempt(Base):
    """One submission of a study's driver as a Ray job; a new one follows a driver that died."""

    __tablename__ = "study_attempts"

    study_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("studies.id", ondelete="CASCADE"), primary_key=True
    )
    number: Mapped[int] = mapped_column(Integer, primary_key=True)  # 1, 2, ...
    ray_job_id: Mapped[str] = mapped_column(String(128))
    submitted_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    # Set when the driver died without recording the study's outcome (None while it runs or once it did).
    ended_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    death_reason: Mapped[str | None] = mapped_column(Text)
    # The driver was found dead when the service started (the stack was stopped under it): such a death
    # does not count against the study's attempt limit.
    interrupted: Mapped[bool] = mapped_column(Boolean, default=False)


class StudyNotification(Base):
    """A study whose end was announced to the notification URL (service.orchestration.notify)."""

    __tablename__ = "study_notifications"

    study_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("studies.id", ondelete="CASCADE"), primary_key=True
    )
    notified_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class StudyTag(Base):
    """One tag of a study: a label people give it to find it again (studies.store._tags holds the rules)."""

    __tablename__ = "study_tags"

    study_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("studies.id", ondelete="CASCADE"), primary_key=True
    )
    # Indexed on its own: the study list filters by tag (`GET /studies?tag=`) across every study.
    tag: Mapped[str] = mapped_column(String(40), primary_key=True, index=True)


class StudyTrialPlan(Base):
    """How a study's trials are planned: which spec fields its submitter wrote (the others are defaults,
    which the driver may resolve by measurement: workers.driver.throughput), and the trial plan its driver
    resolved (workers.trials.plan.TrialPlan.to_dict), which a restarted driver keeps and the page shows."""

    __tablename__ = "study_trial_plans"

    study_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("studies.id", ondelete="CASCADE"), primary_key=True
    )
    # Dotted paths ("budget.compile"), sorted; None: not recorded (the row was made by the driver).
    spec_fields_set: Mapped[list[str] | None] = mapped_column(JSONType)
    plan: Mapped[dict[str, Any] | None] = mapped_column(JSONType)  # None until the driver planned
    planned_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class StudySubmitFailure(Base):
    """One submission of a study's driver that the cluster refused or did not answer, in the cluster's words.

    The reconcile loop tries the same driver attempt again after a backoff (`retry_at`) and fails the study
    once the attempt has failed to submit as often as the service allows (`retry_at` None: it gave up).
    """

    __tablename__ = "study_submit_failures"
    __table_args__ = (
        CheckConstraint("number >= 1", name="number"),
        CheckConstraint("attempt >= 1", name="attempt"),
    )

    study_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("studies.id", ondelete="CASCADE"), primary_key=True
    )
    number: Mapped[int] = mapped_column(Integer, primary_key=True)  # 1, 2, ... per study
    attempt: Mapped[int] = mapped_column(Integer)  # the driver attempt it was to start (StudyAttempt.number)
    failed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    error: Mapped[str] = mapped_column(Text)  # what the cluster said (or that it did not answer)
    retry_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Trial(Base):
    __tablename__ = "trials"
    __table_args__ = (
        CheckConstraint(_in("phase", [p.value for p in Phase]), name="phase"),
        CheckConstraint(_in("status", [s.value for s in TrialStatus]), name="status"),
        Index("ix_trials_study_id_phase", "study_id", "phase"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    study_id: Mapped[str] = mapped_column(String(32), ForeignKey("studies.id", ondelete="CASCADE"))
    trial_key: Mapped[str] = mapped_column(String(255), unique=True)
    phase: Mapped[str] = mapped_column(String(16))
    method: Mapped[str] = mapped_column(String(32))
    group_label: Mapped[str | None] = mapped_column(String(255))  # grid point label (kind: grid)
    config: Mapped[dict[str, Any]] = mapped_column(JSONType)
    seed: Mapped[int | None] = mapped_column(BigInteger)  # seeds reach 2**32 - 1
    status: Mapped[str] = mapped_column(String(16))
    metrics: Mapped[dict[str, Any]] = mapped_column(JSONType)
    metric_value: Mapped[float | None] = mapped_column(Float)  # the phase's primary metric
    mlflow_run_id: Mapped[str | None] = mapped_column(String(64))
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class TrialEpoch(Base):
    """Every metric a trial reported for one epoch (epoch 0: init ranks and the untrained metric).

    Keyed by (trial_key, epoch) without a foreign key to `trials`: epochs are written as Tune reports them,
    which may precede the trial's own row (a start record that lost a lock race). The study foreign key
    deletes a study's histories with it.
    """

    __tablename__ = "trial_epochs"

    trial_key: Mapped[str] = mapped_column(String(255), primary_key=True)
    epoch: Mapped[int] = mapped_column(Integer, primary_key=True)
    study_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("studies.id", ondelete="CASCADE"), index=True
    )
    metrics: Mapped[dict[str, Any]] = mapped_column(JSONType)
    recorded_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))  # last (re)report of this epoch


class StudyLook(Base):
    """One look of a sequential study: what it saw and decided (studies.sequential.LookRecord as JSON).

    Written once by the study's driver and never changed: what a look decided stays decided (the store
    refuses a different record for a stored look). The study foreign key deletes a study's looks with it.
    """

    __tablename__ = "study_looks"
    __table_args__ = (CheckConstraint("look >= 1", name="look"),)

    study_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("studies.id", ondelete="CASCADE"), primary_key=True
    )
    look: Mapped[int] = mapped_column(Integer, primary_key=True)  # 1 = first
    # LookRecord.to_json(), non-finite numbers as strings (JSONB has no Infinity or NaN): studies.store._looks
    record: Mapped[dict[str, Any]] = mapped_column(JSONType)
    recorded_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))

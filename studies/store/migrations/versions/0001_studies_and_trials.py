"""Studies and trials.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(JSONB(), "postgresql")
STUDY_STATUSES = "status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')"
TRIAL_STATUSES = "status IN ('running', 'succeeded', 'failed', 'cancelled')"
PHASES = "phase IN ('tune', 'final', 'grid')"


def upgrade() -> None:
    op.create_table(
        "studies",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("name", sa.String(120), nullable=False),
        sa.Column("dataset", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("spec", JSON, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("planned_trials", sa.Integer(), nullable=False),
        sa.Column("ray_job_id", sa.String(128), nullable=True),
        sa.Column("mlflow_experiment_id", sa.String(64), nullable=True),
        sa.Column("mlflow_parent_run_id", sa.String(64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(STUDY_STATUSES, name=op.f("ck_studies_status")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_studies")),
    )
    op.create_index(op.f("ix_studies_dataset"), "studies", ["dataset"])
    op.create_index(op.f("ix_studies_status"), "studies", ["status"])

    op.create_table(
        "trials",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("study_id", sa.String(32), nullable=False),
        sa.Column("trial_key", sa.String(255), nullable=False),
        sa.Column("phase", sa.String(16), nullable=False),
        sa.Column("method", sa.String(32), nullable=False),
        sa.Column("group_label", sa.String(255), nullable=True),
        sa.Column("config", JSON, nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("metrics", JSON, nullable=False),
        sa.Column("metric_value", sa.Float(), nullable=True),
        sa.Column("mlflow_run_id", sa.String(64), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(PHASES, name=op.f("ck_trials_phase")),
        sa.CheckConstraint(TRIAL_STATUSES, name=op.f("ck_trials_status")),
        sa.ForeignKeyConstraint(
            ["study_id"], ["studies.id"], name=op.f("fk_trials_study_id_studies"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_trials")),
        sa.UniqueConstraint("trial_key", name=op.f("uq_trials_trial_key")),
    )
    op.create_index("ix_trials_study_id_phase", "trials", ["study_id", "phase"])


def downgrade() -> None:
    op.drop_index("ix_trials_study_id_phase", table_name="trials")
    op.drop_table("trials")
    op.drop_index(op.f("ix_studies_status"), table_name="studies")
    op.drop_index(op.f("ix_studies_dataset"), table_name="studies")
    op.drop_table("studies")

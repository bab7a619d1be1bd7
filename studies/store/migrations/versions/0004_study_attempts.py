"""Driver attempts of a study (each Ray job, and why its driver died), and when the reconcile loop closed an
ended study's MLflow runs.

Revision ID: 0004
Revises: 0003
Create Date: 2025-04-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    attempts = op.create_table(
        "study_attempts",
        sa.Column("study_id", sa.String(32), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("ray_job_id", sa.String(128), nullable=False),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("death_reason", sa.Text(), nullable=True),
        sa.Column("interrupted", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(
            ["study_id"], ["studies.id"], name=op.f("fk_study_attempts_study_id_studies"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("study_id", "number", name=op.f("pk_study_attempts")),
    )
    # A plain nullable ALTER on SQLite too: the studies table is never copied (a copy would cascade-delete
    # trials through the foreign keys).
    op.add_column("studies", sa.Column("mlflow_closed_at", sa.DateTime(timezone=True), nullable=True))
    # Every study that already has a Ray job ran one driver so far: its attempt 1.
    studies = sa.table(
        "studies",
        sa.column("id", sa.String),
        sa.column("ray_job_id", sa.String),
        sa.column("started_at", sa.DateTime(timezone=True)),
        sa.column("updated_at", sa.DateTime(timezone=True)),
    )
    op.execute(
        attempts.insert().from_select(
            ["study_id", "number", "ray_job_id", "submitted_at", "interrupted"],
            sa.select(
                studies.c.id,
                sa.literal(1),
                studies.c.ray_job_id,
                sa.func.coalesce(studies.c.started_at, studies.c.updated_at),
                sa.false(),
            ).where(studies.c.ray_job_id.is_not(None)),
        )
    )


def downgrade() -> None:
    op.drop_column("studies", "mlflow_closed_at")
    op.drop_table("study_attempts")

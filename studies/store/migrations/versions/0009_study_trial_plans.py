"""How a study's trials are planned: one row per study with the spec fields its submitter wrote and the
trial plan its driver resolved (seeds per trial, compile mode and GPU share, with the throughput measurement
that chose them), deleted with its study.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-08
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

_JSON = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    # A new table only, as 0006 to 0008: no existing table is altered. A study stored before has no row:
    # which fields its submitter wrote is unknown, so its driver keeps the rules it was submitted under.
    op.create_table(
        "study_trial_plans",
        sa.Column("study_id", sa.String(32), nullable=False),
        sa.Column("spec_fields_set", _JSON, nullable=True),
        sa.Column("plan", _JSON, nullable=True),
        sa.Column("planned_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["study_id"],
            ["studies.id"],
            name=op.f("fk_study_trial_plans_study_id_studies"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("study_id", name=op.f("pk_study_trial_plans")),
    )


def downgrade() -> None:
    op.drop_table("study_trial_plans")

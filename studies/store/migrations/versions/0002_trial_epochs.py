"""Per-epoch trial history.

Revision ID: 0002
Revises: 0001
Create Date: 2025-02-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "trial_epochs",
        sa.Column("trial_key", sa.String(255), nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.String(32), nullable=False),
        sa.Column("metrics", JSON, nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["study_id"], ["studies.id"], name=op.f("fk_trial_epochs_study_id_studies"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("trial_key", "epoch", name=op.f("pk_trial_epochs")),
    )
    op.create_index(op.f("ix_trial_epochs_study_id"), "trial_epochs", ["study_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_trial_epochs_study_id"), table_name="trial_epochs")
    op.drop_table("trial_epochs")

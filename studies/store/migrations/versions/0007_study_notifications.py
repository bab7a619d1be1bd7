"""Studies whose end was announced to NORMLAB_NOTIFY_URL: one row each, so a restart never announces one
twice.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A new table only, as 0006: no existing table is altered.
    op.create_table(
        "study_notifications",
        sa.Column("study_id", sa.String(32), nullable=False),
        sa.Column("notified_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["study_id"],
            ["studies.id"],
            name=op.f("fk_study_notifications_study_id_studies"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("study_id", name=op.f("pk_study_notifications")),
    )


def downgrade() -> None:
    op.drop_table("study_notifications")

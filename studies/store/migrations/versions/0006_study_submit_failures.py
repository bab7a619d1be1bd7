"""Failed submissions of a study's driver: each one the cluster refused or did not answer, in its words, and
when the reconcile loop tries again.

Revision ID: 0006
Revises: 0005
Create Date: 2025-06-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A new table only: no existing table is altered (on SQLite a copied studies table would cascade-delete
    # its trials through the foreign keys).
    op.create_table(
        "study_submit_failures",
        sa.Column("study_id", sa.String(32), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("failed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("retry_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("number >= 1", name=op.f("ck_study_submit_failures_number")),
        sa.CheckConstraint("attempt >= 1", name=op.f("ck_study_submit_failures_attempt")),
        sa.ForeignKeyConstraint(
            ["study_id"],
            ["studies.id"],
            name=op.f("fk_study_submit_failures_study_id_studies"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("study_id", "number", name=op.f("pk_study_submit_failures")),
    )


def downgrade() -> None:
    op.drop_table("study_submit_failures")

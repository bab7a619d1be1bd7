"""The looks of sequential studies: one row per look, what it saw and decided.

Revision ID: 0005
Revises: 0004
Create Date: 2025-05-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "study_looks",
        sa.Column("study_id", sa.String(32), nullable=False),
        sa.Column("look", sa.Integer(), nullable=False),
        sa.Column("record", JSON, nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("look >= 1", name=op.f("ck_study_looks_look")),
        sa.ForeignKeyConstraint(
            ["study_id"], ["studies.id"], name=op.f("fk_study_looks_study_id_studies"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("study_id", "look", name=op.f("pk_study_looks")),
    )


def downgrade() -> None:
    op.drop_table("study_looks")

"""Tags of studies: one row per (study, tag), deleted with its study, so the study list can be filtered by
tag.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A new table only, as 0006 and 0007: no existing table is altered.
    op.create_table(
        "study_tags",
        sa.Column("study_id", sa.String(32), nullable=False),
        sa.Column("tag", sa.String(40), nullable=False),
        sa.ForeignKeyConstraint(
            ["study_id"],
            ["studies.id"],
            name=op.f("fk_study_tags_study_id_studies"),
            ondelete="CASCADE",
        ),
        # The pair is the key: a study has each tag once.
        sa.PrimaryKeyConstraint("study_id", "tag", name=op.f("pk_study_tags")),
    )
    # The study list filters by tag across every study.
    op.create_index(op.f("ix_study_tags_tag"), "study_tags", ["tag"])


def downgrade() -> None:
    op.drop_index(op.f("ix_study_tags_tag"), table_name="study_tags")
    op.drop_table("study_tags")

"""Idempotency-Key of the POST that created a study, unique, so a retried submission never stores two.

Revision ID: 0003
Revises: 0002
Create Date: 2025-03-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A nullable column and a unique index: both are plain ALTERs on SQLite too, so the studies table is
    # never copied (a copy would cascade-delete trials through the foreign keys).
    op.add_column("studies", sa.Column("idempotency_key", sa.String(255), nullable=True))
    op.create_index(op.f("ix_studies_idempotency_key"), "studies", ["idempotency_key"], unique=True)


def downgrade() -> None:
    op.drop_index(op.f("ix_studies_idempotency_key"), table_name="studies")
    op.drop_column("studies", "idempotency_key")

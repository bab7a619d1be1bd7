"""Alembic, driven from code: the migrations ship inside the package, no alembic.ini needed."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from studies.store.engine import normalize_database_url

if TYPE_CHECKING:
    from alembic.config import Config

__all__ = ["MIGRATIONS_DIR", "alembic_config", "upgrade_database"]

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


def alembic_config(database_url: str) -> Config:
    # alembic is imported here, not at the top: every study driver imports the store but never migrates.
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # ConfigParser treats % as interpolation; URLs carry %-escapes (passwords, options=-csearch_path%3D...).
    config.set_main_option("sqlalchemy.url", normalize_database_url(database_url).replace("%", "%%"))
    return config


def upgrade_database(database_url: str, revision: str = "head") -> None:
    """Create or migrate the schema to `revision` (idempotent: at head it does nothing)."""
    from alembic import command

    command.upgrade(alembic_config(database_url), revision)

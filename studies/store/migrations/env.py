"""Alembic environment: runs the migrations online on an engine built by studies.store.make_engine."""

from __future__ import annotations

from alembic import context

from studies.store.engine import make_engine
from studies.store.tables import Base

config = context.config
target_metadata = Base.metadata


def run_migrations_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:  # a caller (e.g. a test) lends its own connection
        _run(connection)
        return
    url = config.get_main_option("sqlalchemy.url")
    if url is None:  # studies.store.migrate sets it; alembic run by hand needs it in alembic.ini
        raise RuntimeError("no sqlalchemy.url in the Alembic config")
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            _run(connection)
    finally:
        engine.dispose()


def _run(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",  # SQLite alters tables by copying them
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()

"""Revision 0008 (study_tags): an existing database keeps its studies and gains an empty table of tags, each
(study, tag) pair once, deleted with its study; the downgrade removes it again."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic import command

from studies.store import make_engine, upgrade_database
from studies.store.migrate import alembic_config


@pytest.fixture
def database_url(empty_database_url: str) -> str:
    """These tests run the migrations themselves: a database with no schema yet."""
    return empty_database_url


_STUDY = (
    "INSERT INTO studies (id, name, dataset, kind, spec, status, planned_trials, created_at, updated_at) "
    "VALUES ('{id}', 'n', 'digits', 'compare', '{{}}', 'succeeded', 1, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
)


def _tag(study_id: str, tag: str) -> str:
    return f"INSERT INTO study_tags (study_id, tag) VALUES ('{study_id}', '{tag}')"


@pytest.fixture
def engine_at_0007(database_url):
    upgrade_database(database_url, revision="0007")
    engine = make_engine(database_url)
    with engine.begin() as connection:
        connection.execute(sa.text(_STUDY.format(id="s1")))
    yield engine
    engine.dispose()


def _count(engine, table: str) -> int:
    with engine.connect() as connection:
        return connection.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one()


def test_upgrading_adds_an_empty_table_where_a_study_has_each_tag_once(database_url, engine_at_0007):
    upgrade_database(database_url)
    assert _count(engine_at_0007, "studies") == 1 and _count(engine_at_0007, "study_tags") == 0
    with engine_at_0007.begin() as connection:
        connection.execute(sa.text(_STUDY.format(id="s2")))
        for study_id, tag in (("s1", "paper"), ("s1", "v1.0"), ("s2", "paper")):
            connection.execute(sa.text(_tag(study_id, tag)))
    with pytest.raises(sa.exc.IntegrityError), engine_at_0007.begin() as connection:
        connection.execute(sa.text(_tag("s1", "paper")))
    assert _count(engine_at_0007, "study_tags") == 3


def test_a_studys_tags_go_with_it_and_a_tag_needs_a_study(database_url, engine_at_0007):
    upgrade_database(database_url)
    with engine_at_0007.begin() as connection:
        connection.execute(sa.text(_tag("s1", "paper")))
    with pytest.raises(sa.exc.IntegrityError), engine_at_0007.begin() as connection:
        connection.execute(sa.text(_tag("no-such-study", "paper")))
    with engine_at_0007.begin() as connection:
        connection.execute(sa.text("DELETE FROM studies WHERE id = 's1'"))
    assert _count(engine_at_0007, "study_tags") == 0


def test_the_tag_column_is_indexed_for_the_filtered_study_list(database_url, engine_at_0007):
    upgrade_database(database_url)
    engine_at_0007.dispose()  # a pooled SQLite connection would answer from the schema it read before
    indexes = sa.inspect(engine_at_0007).get_indexes("study_tags")
    assert {"name": "ix_study_tags_tag", "columns": ["tag"]} in [
        {"name": index["name"], "columns": index["column_names"]} for index in indexes
    ]


def test_downgrading_to_0007_removes_the_table_and_keeps_the_studies(database_url, engine_at_0007):
    upgrade_database(database_url)
    with engine_at_0007.begin() as connection:
        connection.execute(sa.text(_tag("s1", "paper")))
    command.downgrade(alembic_config(database_url), "0007")
    engine_at_0007.dispose()
    assert "study_tags" not in sa.inspect(engine_at_0007).get_table_names()
    assert _count(engine_at_0007, "studies") == 1

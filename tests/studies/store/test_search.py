"""The study list narrowed by text in the name or description, a method of the spec and tags, each alone
and together with the status and dataset filters (on SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest

from studies.store import list_studies, session_scope, set_study_status, set_tags
from tests.factories import add_study, digits_spec, quick_spec


@pytest.fixture
def studies(engine) -> dict[str, str]:
    """Three studies: name -> id."""
    made = {
        "alpha": add_study(engine, quick_spec(name="Alpha sweep", description="AutoNorm against DyT")),
        "beta": add_study(engine, digits_spec(name="beta 50% run", methods=["frozen_ln", "dyt"])),
        "gamma": add_study(engine, digits_spec(name="gamma", methods=["frozen_ln"], dataset="mnist_5k")),
    }
    with session_scope(engine) as session:
        set_tags(session, study_id=made["alpha"].id, tags=["paper", "v1"])
        set_tags(session, study_id=made["beta"].id, tags=["paper"])
        set_study_status(session, study_id=made["gamma"].id, status="cancelled")
    return {name: study.id for name, study in made.items()}


def _names(engine, studies: dict[str, str], **filters) -> set[str]:
    by_id = {study_id: name for name, study_id in studies.items()}
    with session_scope(engine, readonly=True) as session:
        return {by_id[s.id] for s in list_studies(session, **filters)}


@pytest.mark.parametrize(
    ("q", "expected"),
    [
        ("alpha", {"alpha"}),  # in the name, any case
        ("SWEEP", {"alpha"}),
        ("dyt", {"alpha"}),  # in the description only
        ("a", {"alpha", "beta", "gamma"}),
        ("50%", {"beta"}),  # % and _ are plain characters, not wildcards
        ("%", {"beta"}),
        ("_", set()),
        ("nothing like it", set()),
        ("", {"alpha", "beta", "gamma"}),  # empty: no filter
    ],
)
def test_q_finds_text_in_the_name_or_the_description(engine, studies, q, expected):
    assert _names(engine, studies, q=q) == expected


@pytest.mark.parametrize(
    ("method", "expected"),
    [("dyt", {"alpha", "beta"}), ("frozen_ln", {"alpha", "beta", "gamma"}), ("autonorm_s", {"alpha"})],
)
def test_method_keeps_the_studies_whose_spec_compares_it(engine, studies, method, expected):
    assert _names(engine, studies, method=method) == expected


def test_a_method_named_only_in_another_field_does_not_match(engine, studies):
    # "dyt" appears in alpha's description, but only a spec's `methods` count.
    assert _names(engine, studies, method="dy") == set()


def test_tags_keep_the_studies_that_carry_every_one(engine, studies):
    assert _names(engine, studies, tags=["paper"]) == {"alpha", "beta"}
    assert _names(engine, studies, tags=["paper", "v1"]) == {"alpha"}
    assert _names(engine, studies, tags=["v1", "v1"]) == {"alpha"}
    assert _names(engine, studies, tags=["unused"]) == set()


def test_the_filters_combine_with_status_and_dataset(engine, studies):
    assert _names(engine, studies, status="queued", method="frozen_ln") == {"alpha", "beta"}
    assert _names(engine, studies, dataset="mnist_5k", method="frozen_ln") == {"gamma"}
    assert _names(engine, studies, q="a", tags=["paper"], method="autonorm_s") == {"alpha"}
    assert _names(engine, studies, status="cancelled", tags=["paper"]) == set()


def test_a_filtered_list_keeps_its_order_and_limit(engine, studies):
    with session_scope(engine, readonly=True) as session:
        newest = [s.id for s in list_studies(session, tags=["paper"])]
        oldest = [s.id for s in list_studies(session, tags=["paper"], order="oldest", limit=1)]
    assert newest == [studies["beta"], studies["alpha"]] and oldest == [studies["alpha"]]

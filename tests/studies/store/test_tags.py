"""Tags of studies: the rules a tag follows, and setting, adding, removing and listing a study's tags (on
SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest

from studies.store import (
    MAX_TAGS,
    InvalidTagError,
    StudyNotFoundError,
    add_tags,
    check_tags,
    get_study,
    list_studies,
    list_tags,
    remove_tags,
    session_scope,
    set_tags,
    tag_problem,
)
from tests.factories import add_study


def _tags(engine, study_id: str) -> tuple[str, ...]:
    with session_scope(engine, readonly=True) as session:
        return get_study(session, study_id=study_id).tags


# ------------------------------------------------------------------------------------------- the rules


@pytest.mark.parametrize("tag", ["baseline", "paper-2", "v1.3", "a_b", "x", "0", "a" * 40])
def test_lowercase_letters_digits_dashes_underscores_and_dots_of_1_to_40_characters_are_tags(tag):
    assert tag_problem(tag) is None


@pytest.mark.parametrize(
    ("tag", "fragment"),
    [
        ("", "not empty"),
        ("a" * 41, "longer than 40 characters"),
        ("Baseline", "('baseline' would do)"),
        ("two words", "only lowercase letters, digits"),
        ("a/b", "only lowercase letters, digits"),
        ("é", "only lowercase letters, digits"),
        ("tag\n", "only lowercase letters, digits"),
        (3, "a tag is text"),
    ],
)
def test_anything_else_is_refused_saying_why(tag, fragment):
    problem = tag_problem(tag)
    assert problem is not None and fragment in problem


def test_checked_tags_come_back_in_alphabetical_order():
    assert check_tags(["v2", "paper", "ablation"]) == ("ablation", "paper", "v2")


def test_the_first_bad_tag_is_named_with_its_position():
    with pytest.raises(InvalidTagError) as caught:
        check_tags(["ok", "fine", "Not OK", "BAD"])
    assert caught.value.index == 2 and caught.value.tag == "Not OK"


def test_a_tag_listed_twice_is_refused_at_its_second_place():
    with pytest.raises(InvalidTagError, match="listed twice") as caught:
        check_tags(["a", "b", "a"])
    assert caught.value.index == 2


def test_a_study_carries_at_most_20_tags():
    assert len(check_tags([f"t{i}" for i in range(MAX_TAGS)])) == MAX_TAGS
    with pytest.raises(InvalidTagError, match="at most 20 tags, not 21") as caught:
        check_tags([f"t{i}" for i in range(MAX_TAGS + 1)])
    assert caught.value.index is None  # the list as a whole


# ----------------------------------------------------------------------------------- a study's tags


def test_a_new_study_has_no_tags(engine):
    assert add_study(engine).tags == ()


def test_setting_tags_replaces_them_all_and_they_read_back_with_the_study(engine):
    study = add_study(engine)
    with session_scope(engine) as session:
        assert set_tags(session, study_id=study.id, tags=["paper", "ablation"]).tags == ("ablation", "paper")
    with session_scope(engine) as session:
        assert set_tags(session, study_id=study.id, tags=["paper", "v2"]).tags == ("paper", "v2")
    assert _tags(engine, study.id) == ("paper", "v2")
    with session_scope(engine, readonly=True) as session:
        assert [s.tags for s in list_studies(session)] == [("paper", "v2")]
    with session_scope(engine) as session:
        set_tags(session, study_id=study.id, tags=[])
    assert _tags(engine, study.id) == ()


def test_adding_keeps_the_tags_a_study_has_and_adding_one_again_changes_nothing(engine):
    study = add_study(engine)
    with session_scope(engine) as session:
        add_tags(session, study_id=study.id, tags=["paper"])
    with session_scope(engine) as session:
        assert add_tags(session, study_id=study.id, tags=["v2", "paper", "v2"]).tags == ("paper", "v2")


def test_removing_drops_only_the_tags_named_and_a_missing_one_is_no_error(engine):
    study = add_study(engine)
    with session_scope(engine) as session:
        set_tags(session, study_id=study.id, tags=["a", "b", "c"])
    with session_scope(engine) as session:
        assert remove_tags(session, study_id=study.id, tags=["b", "never-had"]).tags == ("a", "c")


def test_adding_past_20_tags_is_refused_and_stores_nothing(engine):
    study = add_study(engine)
    with session_scope(engine) as session:
        set_tags(session, study_id=study.id, tags=[f"t{i:02}" for i in range(MAX_TAGS - 1)])
    with pytest.raises(InvalidTagError, match="would have 21"), session_scope(engine) as session:
        add_tags(session, study_id=study.id, tags=["x", "y"])
    assert len(_tags(engine, study.id)) == MAX_TAGS - 1


def test_a_bad_tag_stores_nothing(engine):
    study = add_study(engine)
    with pytest.raises(InvalidTagError), session_scope(engine) as session:
        set_tags(session, study_id=study.id, tags=["good", "Bad"])
    assert _tags(engine, study.id) == ()


def test_tagging_an_unknown_study_is_not_found(engine):
    for change in (set_tags, add_tags, remove_tags):
        with pytest.raises(StudyNotFoundError), session_scope(engine) as session:
            change(session, study_id="0" * 32, tags=["paper"])


def test_each_study_keeps_its_own_tags_and_the_listing_counts_the_studies_per_tag(engine):
    first, second = add_study(engine), add_study(engine)
    with session_scope(engine) as session:
        set_tags(session, study_id=first.id, tags=["paper", "v1"])
        set_tags(session, study_id=second.id, tags=["paper"])
    assert _tags(engine, second.id) == ("paper",)
    with session_scope(engine, readonly=True) as session:
        assert list_tags(session) == {"paper": 2, "v1": 1}

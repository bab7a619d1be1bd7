"""A verdict across a swept knob: one result per value, the headline at the pre-registered value, and the
range where the claim holds said in words."""

from __future__ import annotations

import pytest

from studies.claims import (
    CONTRADICTED,
    INCONCLUSIVE,
    SUPPORTED,
    CheckResult,
    Sensitivity,
    StudyData,
    verdict_by,
)
from studies.claims.sensitivity import holds_for, knob_values, with_sensitivity
from studies.claims.verdicts import NOT_TESTED
from tests.studies.claims.synthetic import data, trial


def _study(scales=(1.0, 2.0, 4.0, 8.0, 12.0, 16.0)) -> StudyData:
    return data([trial({"init_scale": s}, seed, {"init_x": s}) for s in scales for seed in range(2)])


def _supported_from_twelve(subset: StudyData) -> CheckResult:
    """A stand-in check: supported when every trial's init_x is at least 12."""
    values = [t.get("init_x") for t in subset.completed()]
    verdict = SUPPORTED if all(v is not None and v >= 12 for v in values) else CONTRADICTED
    return CheckResult(check="stand_in", verdict=verdict, summary=f"{len(values)} trials: {verdict}.")


def test_values_come_in_numeric_order_whatever_their_type():
    study = data([trial({"init_scale": s}, 0, {}) for s in ("16", 2.0, "4", 1)])
    assert [float(v) for v in knob_values(study, "init_scale")] == [1.0, 2.0, 4.0, 16.0]


def test_verdict_by_evaluates_the_check_on_each_values_trials():
    rows = verdict_by("init_scale", _study(), _supported_from_twelve)
    assert [(v, verdict) for v, verdict, _ in rows] == [
        (1.0, CONTRADICTED),
        (2.0, CONTRADICTED),
        (4.0, CONTRADICTED),
        (8.0, CONTRADICTED),
        (12.0, SUPPORTED),
        (16.0, SUPPORTED),
    ]
    assert all(summary.startswith("2 trials") for *_, summary in rows)


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ("nnnnyy", "supported for init_scale >= 12 only (grid 1 to 16)"),
        ("yynnnn", "supported for init_scale <= 2 only (grid 1 to 16)"),
        ("nyyynn", "supported for 2 <= init_scale <= 8 only (grid 1 to 16)"),
        ("nnynnn", "supported for init_scale = 4 only (grid 1 to 16)"),
        ("ynynnn", "supported at init_scale = 1, 4 only (grid 1 to 16)"),
        ("yyyyyy", "supported at every init_scale on the grid (1 to 16)"),
        ("nnnnnn", "supported at no init_scale on the grid (1 to 16)"),
    ],
)
def test_the_range_where_a_verdict_holds_is_said_in_words(flags, expected):
    values = (1.0, 2.0, 4.0, 8.0, 12.0, 16.0)
    rows = [(v, SUPPORTED if f == "y" else INCONCLUSIVE) for v, f in zip(values, flags, strict=True)]
    assert holds_for("init_scale", rows) == expected


def test_the_headline_is_the_pre_registered_values_and_the_notes_hold_the_table():
    result = with_sensitivity(Sensitivity(knob="init_scale", at=4.0), _study(), _supported_from_twelve)
    assert result.verdict == CONTRADICTED
    assert result.summary.endswith("Across init_scale: supported for init_scale >= 12 only (grid 1 to 16).")
    assert result.notes[0].startswith("headline verdict at the pre-registered init_scale = 4")
    assert result.notes[1:] == tuple(
        f"init_scale = {s}: {v}: 2 trials: {v}."
        for s, v in (("1", CONTRADICTED), ("2", CONTRADICTED), ("4", CONTRADICTED), ("8", CONTRADICTED),
                     ("12", SUPPORTED), ("16", SUPPORTED))
    )  # fmt: skip
    at_sixteen = with_sensitivity(Sensitivity(knob="init_scale", at=16), _study(), _supported_from_twelve)
    assert at_sixteen.verdict == SUPPORTED


def test_a_grid_without_the_pre_registered_value_is_not_tested():
    result = with_sensitivity(Sensitivity(knob="init_scale", at=3.0), _study(), _supported_from_twelve)
    assert result.verdict == NOT_TESTED
    assert "no init_scale = 3, the pre-registered value" in (result.reason or "")
    assert len(result.notes) == 6  # the table is still shown


def test_trials_of_one_value_get_the_plain_verdict_said_to_be_for_that_value_alone():
    # A knob not swept, or a report that already split the trials by value.
    result = with_sensitivity(Sensitivity(knob="init_scale", at=1.0), _study((16.0,)), _supported_from_twelve)
    assert result.verdict == SUPPORTED
    assert result.notes == ("the trials hold init_scale = 16 only: this verdict is for that value alone",)
    assert with_sensitivity(None, _study(), _supported_from_twelve).verdict == CONTRADICTED

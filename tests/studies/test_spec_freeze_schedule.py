"""AutoNorm-S's freeze schedule must fit the budget: a t_freeze that can reach budget.epochs never freezes,
and the study would silently compare plain AutoNorm under the AutoNorm-S name."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from studies.knobs import freeze_fits
from studies.spec import DEFAULT_T_FREEZE, KNOBS, StudySpec

BASE = {
    "name": "freeze",
    "dataset": "digits",
    "methods": ["autonorm_s", "frozen_ln"],
    "budget": {"epochs": 6, "batch_size": 32},
}
AT = ("method_search", "autonorm_s", "t_freeze")


def spec(**changes) -> StudySpec:
    return StudySpec.model_validate({**BASE, **changes})


def errors(**changes) -> dict[tuple, str]:
    with pytest.raises(ValidationError) as caught:
        StudySpec.model_validate({**BASE, **changes})
    return {tuple(e["loc"]): e["msg"] for e in caught.value.errors()}


def t_freeze(distribution) -> dict:
    return {"method_search": {"autonorm_s": {"t_freeze": distribution}}}


@pytest.mark.parametrize(
    "distribution",
    [
        6,
        9,
        {"type": "fixed", "value": 6},
        {"type": "int", "low": 2, "high": 6},
        {"type": "int", "low": 2, "high": 40, "log": True},
        {"type": "choice", "values": [2, 8]},
    ],
)
def test_a_t_freeze_that_can_reach_the_epoch_budget_is_refused_at_its_path(distribution):
    message = errors(**t_freeze(distribution))[AT]
    assert "budget.epochs is 6" in message and "never freezes" in message
    assert "keep t_freeze below 6 (at most 5)" in message


@pytest.mark.parametrize(
    "distribution",
    [
        5,
        {"type": "int", "low": 1, "high": 5},
        {"type": "int", "low": 1, "high": 6, "step": 2},
        {"type": "choice", "values": [1, 5]},
    ],
)
def test_a_t_freeze_below_the_epoch_budget_is_accepted(distribution):
    # int 1..6 step 2 draws 1, 3, 5: it never reaches 6.
    assert spec(**t_freeze(distribution)).search_space_for("autonorm_s")["t_freeze"]


def test_the_refusal_names_the_largest_value_the_distribution_can_draw():
    assert "t_freeze can be 8" in errors(**t_freeze({"type": "choice", "values": [8, 2]}))[AT]
    assert "t_freeze can be 7" in errors(**t_freeze({"type": "int", "low": 1, "high": 8, "step": 3}))[AT]


def test_a_shared_t_freeze_of_an_autonorm_s_only_study_is_checked_at_search():
    message = errors(methods=["autonorm_s"], search={"t_freeze": 6})[("search", "t_freeze")]
    assert "never freezes" in message
    assert spec(methods=["autonorm_s"], search={"t_freeze": 5}).search["t_freeze"].value == 5


def test_grid_studies_are_checked_point_by_point():
    grid = {"type": "grid", "values": [2, 6]}
    message = errors(kind="grid", methods=["autonorm_s"], method_search={"autonorm_s": {"t_freeze": grid}})
    assert "t_freeze can be 6" in message[AT]


def test_the_default_t_freeze_needs_more_epochs_than_it_watches():
    assert DEFAULT_T_FREEZE == 10  # the paper's T_freeze
    message = errors(budget={"epochs": 10})[("budget", "epochs")]
    assert "default t_freeze of 10" in message
    assert "set method_search.autonorm_s.t_freeze below 10" in message
    assert spec(budget={"epochs": 11}).budget.epochs == 11


def test_the_documented_default_budget_with_autonorm_s_must_set_t_freeze():
    # budget.epochs defaults to 10, the same as the default t_freeze: the pair never freezes.
    minimal = {"name": "m", "dataset": "digits", "methods": ["autonorm_s"]}
    with pytest.raises(ValidationError, match="t_freeze below 10"):
        StudySpec.model_validate(minimal)
    assert StudySpec.model_validate({**minimal, "method_search": {"autonorm_s": {"t_freeze": 9}}})


def test_one_epoch_cannot_hold_a_freeze_and_the_message_says_to_raise_the_budget():
    message = errors(budget={"epochs": 1}, **t_freeze(1))[AT]
    assert "raise budget.epochs above 1" in message and "at most 0" not in message


def test_studies_without_autonorm_s_may_run_any_budget():
    assert spec(methods=["autonorm", "frozen_ln"], budget={"epochs": 2}).budget.epochs == 2


def test_an_invalid_t_freeze_is_reported_once_by_the_knob_check():
    problems = errors(**t_freeze({"type": "uniform", "low": 1, "high": 9}))
    assert "use type int" in problems[AT]
    assert len([loc for loc in problems if loc == AT]) == 1


@pytest.mark.parametrize(
    "knob, good, bad",
    [
        ("freeze_signal", "val", "test"),
        ("freeze_scope", "per_layer", "layer"),
        ("post_freeze_gate", "expected", "argmax"),
    ],
)
def test_the_freeze_signal_scope_and_post_freeze_gate_knobs_apply_to_autonorm_s_only(knob, good, bad):
    assert KNOBS[knob].methods == ("autonorm_s",)
    extra = {"autonorm_s": {"t_freeze": 3, knob: good}}
    assert spec(method_search=extra).search_space_for("autonorm_s")[knob].value == good
    problems = errors(method_search={"autonorm_s": {"t_freeze": 3, knob: bad}})
    assert "must be one of" in problems[("method_search", "autonorm_s", knob)]
    assert "does not apply to method 'frozen_ln'" in errors(search={knob: good})[("search", knob)]
    choice = {"type": "choice", "values": list(KNOBS[knob].categories)}
    assert spec(method_search={"autonorm_s": {"t_freeze": 3, knob: choice}}).tunes("autonorm_s")


def test_the_post_freeze_gate_is_searched_like_the_other_autonorm_s_knobs():
    # A knob of its own in a sweep: every mode on the grid, the 422 path of a bad one.
    grid = {"type": "grid", "values": ["sample", "expected", "hard"]}
    chosen = spec(
        kind="grid",
        methods=["autonorm_s"],
        method_search={"autonorm_s": {"t_freeze": 3, "post_freeze_gate": grid}},
    )
    assert chosen.search_space_for("autonorm_s")["post_freeze_gate"].values == ["sample", "expected", "hard"]
    problems = errors(
        method_search={
            "autonorm_s": {"t_freeze": 3, "post_freeze_gate": {"type": "choice", "values": ["hard", "noisy"]}}
        }
    )
    assert (
        "must be one of sample, expected, hard"
        in problems[("method_search", "autonorm_s", "post_freeze_gate")]
    )


@pytest.mark.parametrize(
    "t_freeze, epochs, fits", [(1, 2, True), (9, 10, True), (10, 10, False), (0, 5, False)]
)
def test_the_freeze_rule_that_the_spec_and_the_training_config_both_apply(t_freeze, epochs, fits):
    # AutoNorm-S decides after epoch t_freeze: it can freeze only when some epoch follows that one.
    assert freeze_fits(t_freeze, epochs) is fits

"""A report says how much tuning each arm got, so an asymmetric recipe is never silent."""

from __future__ import annotations

from typing import Any

from studies.report.tuning_effort import tuning_effort


def _spec(**overrides: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": "fairness",
        "dataset": "digits",
        "kind": "compare",
        "model": {"preset": "vit_lite_tiny"},
        "methods": ["autonorm_s", "frozen_ln"],
        "search": {"lr": 0.005, "weight_decay": 0.03},
        "method_search": {"autonorm_s": {"tau": 0.5, "t_freeze": 2, "eps_h": 0.1}},
        "seeds": [0, 1],
        "budget": {"epochs": 3},
    }
    spec.update(overrides)
    return spec


def test_a_fixed_recipe_for_every_arm_is_reported_as_untuned_with_its_values():
    effort = tuning_effort(_spec())
    assert effort is not None
    assert not effort.tuned
    sentence = effort.sentence()
    assert "no arm was tuned" in sentence
    assert "lr 0.005" in sentence and "weight_decay 0.03" in sentence


def test_the_same_search_for_every_arm_is_equal_effort_even_with_method_knobs():
    spec = _spec(
        search={"lr": {"type": "loguniform", "low": 1e-3, "high": 1e-2}, "weight_decay": 0.03},
        method_search={"autonorm_s": {"tau": 0.5, "t_freeze": {"type": "int", "low": 1, "high": 2}}},
        num_samples=4,
    )
    effort = tuning_effort(spec)
    assert effort is not None and effort.tuned and effort.equal
    assert "equal for every arm" in effort.sentence()
    assert "autonorm_s: 4 tuning trial(s) over lr, t_freeze" in effort.sentence()


def test_more_tuning_trials_for_one_arm_is_flagged_unequal():
    spec = _spec(
        search={"lr": {"type": "loguniform", "low": 1e-3, "high": 1e-2}},
        num_samples={"autonorm_s": 2, "frozen_ln": 8},
    )
    effort = tuning_effort(spec)
    assert effort is not None and not effort.equal
    assert "UNEQUAL" in effort.sentence()


def test_an_arm_that_searches_the_learning_rate_alone_is_flagged_unequal():
    spec = _spec(
        method_search={
            "autonorm_s": {"tau": 0.5, "t_freeze": 2, "eps_h": 0.1},
            "frozen_ln": {"lr": {"type": "loguniform", "low": 1e-3, "high": 1e-2}},
        }
    )
    effort = tuning_effort(spec)
    assert effort is not None and not effort.equal
    assert "autonorm_s: not tuned" in effort.sentence()


def test_grid_studies_and_specs_that_no_longer_validate_have_no_statement():
    assert tuning_effort(_spec(kind="grid", search={"lr": {"type": "grid", "values": [0.1, 0.2]}})) is None
    assert tuning_effort({"name": "old", "methods": "not a list"}) is None

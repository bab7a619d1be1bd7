"""paper_numbers are in the metric's own unit, the unit the results table reports them beside: accuracy
as a fraction, RMSE in the target's units, perplexity as is."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from studies.spec import StudySpec

BASE = {"name": "paper", "dataset": "digits", "methods": ["frozen_ln", "dyt"]}


def errors(**changes) -> dict[tuple, str]:
    with pytest.raises(ValidationError) as caught:
        StudySpec.model_validate({**BASE, **changes})
    return {tuple(e["loc"]): e["msg"] for e in caught.value.errors()}


def test_an_accuracy_given_in_percent_is_refused_with_the_fraction_to_write():
    message = errors(paper_numbers={"frozen_ln": 86.35})[("paper_numbers", "frozen_ln")]
    assert "accuracy is a fraction in [0, 1]" in message and "86.35 % is 0.8635" in message
    assert "write 0.8635" in message


@pytest.mark.parametrize("value", [-0.1, 101.0])
def test_accuracies_outside_percent_range_are_refused_without_a_conversion_hint(value):
    message = errors(paper_numbers={"dyt": value})[("paper_numbers", "dyt")]
    assert "fraction in [0, 1]" in message and "write" not in message


@pytest.mark.parametrize("value", [0.0, 0.8297, 1.0])
def test_accuracy_fractions_are_accepted(value):
    assert StudySpec.model_validate({**BASE, "paper_numbers": {"dyt": value}}).paper_numbers == {"dyt": value}


@pytest.mark.parametrize(
    "dataset, value, fragment",
    [
        ("california_housing", 0.0, "rmse is positive"),
        ("california_housing", -0.5, "rmse is positive"),
        ("ptb_lm_sample", 0.5, "perplexity is at least 1"),
    ],
)
def test_rmse_and_perplexity_must_be_possible_values(dataset, value, fragment):
    assert fragment in errors(dataset=dataset, paper_numbers={"dyt": value})[("paper_numbers", "dyt")]


@pytest.mark.parametrize("dataset, value", [("california_housing", 0.52), ("ptb_lm_sample", 38.6)])
def test_rmse_and_perplexity_in_their_own_units_are_accepted(dataset, value):
    spec = StudySpec.model_validate({**BASE, "dataset": dataset, "paper_numbers": {"dyt": value}})
    assert spec.paper_numbers == {"dyt": value}


def test_a_method_outside_the_study_is_reported_as_such_not_as_a_unit_problem():
    message = errors(paper_numbers={"film": 80.0})[("paper_numbers", "film")]
    assert "not in methods" in message

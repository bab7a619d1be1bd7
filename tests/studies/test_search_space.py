"""A spec's search space as Optuna distributions: the space the tuner samples and the space its trials are
re-read in; a sweep's grid values as a range (numbers) or categories (anything else)."""

from __future__ import annotations

import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from studies.search_space import grid_distribution, optuna_distribution, optuna_space
from studies.spec import Choice, Fixed, Grid, IntRange, LogUniform, Uniform


def test_each_searched_distribution_maps_to_its_optuna_distribution_with_inclusive_bounds():
    space = optuna_space(
        {
            "eps_h": Uniform(type="uniform", low=0.05, high=0.2),
            "lr": LogUniform(type="loguniform", low=1e-4, high=1e-2),
            "t_freeze": IntRange(type="int", low=2, high=20),
            "depth": IntRange(type="int", low=2, high=8, step=2),
            "width": IntRange(type="int", low=1, high=64, log=True),
            "activation": Choice(type="choice", values=["gelu", "relu"]),
        }
    )
    assert space == {
        "eps_h": FloatDistribution(0.05, 0.2),
        "lr": FloatDistribution(1e-4, 1e-2, log=True),
        "t_freeze": IntDistribution(2, 20),
        "depth": IntDistribution(2, 8, step=2),
        "width": IntDistribution(1, 64, log=True),
        "activation": CategoricalDistribution(["gelu", "relu"]),
    }


def test_fixed_knobs_are_constants_and_stay_out_of_the_space():
    space = {"tau": Fixed(type="fixed", value=0.5), "lr": Uniform(type="uniform", low=0.1, high=0.2)}
    assert list(optuna_space(space)) == ["lr"]
    with pytest.raises(ValueError, match="constant"):
        optuna_distribution(space["tau"])


def test_a_grid_is_not_sampled_by_a_tuner():
    with pytest.raises(ValueError, match="grid"):
        optuna_distribution(Grid(type="grid", values=[0.25, 0.5]))


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([5, 10, 20], IntDistribution(5, 20)),
        ([0.05, 0.1, 0.2], FloatDistribution(0.05, 0.2)),
        ([1, 0.5], FloatDistribution(0.5, 1.0)),
        (["pre", "post"], CategoricalDistribution(["pre", "post"])),
        ([None, 0.1], CategoricalDistribution([None, 0.1])),
        ([True, False], CategoricalDistribution([True, False])),
    ],
)
def test_grid_values_keep_their_order_as_a_range_when_they_are_numbers(values, expected):
    distribution = grid_distribution(values)
    assert distribution == expected
    assert all(distribution._contains(distribution.to_internal_repr(v)) for v in values)


def test_one_grid_value_is_a_single_point_distribution():
    assert grid_distribution([0.5]).single()

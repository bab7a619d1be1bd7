"""Spec distributions become Ray Tune domains with the same bounds (Tune's int upper bound is exclusive)."""

import pytest
from ray import tune

from studies.spec import Choice, Fixed, Grid, IntRange, LogUniform, Uniform
from workers.driver.search_space import to_tune_space


def test_each_distribution_maps_to_the_matching_tune_domain():
    space = to_tune_space(
        {
            "lr": LogUniform(type="loguniform", low=1e-4, high=1e-2),
            "eps_h": Uniform(type="uniform", low=0.05, high=0.3),
            "t_freeze": IntRange(type="int", low=2, high=5),
            "norm_placement": Choice(type="choice", values=["pre", "post"]),
            "tau": Fixed(type="fixed", value=0.5),
        }
    )
    assert isinstance(space["lr"].get_sampler(), tune.search.sample.LogUniform)
    assert (space["eps_h"].lower, space["eps_h"].upper) == (0.05, 0.3)
    assert (space["t_freeze"].lower, space["t_freeze"].upper) == (2, 6)
    assert space["norm_placement"].categories == ["pre", "post"]
    assert space["tau"] == 0.5


def test_integer_samples_stay_inside_the_declared_inclusive_range():
    domain = to_tune_space({"t_freeze": IntRange(type="int", low=2, high=3)})["t_freeze"]
    samples = set(domain.sample(size=200, random_state=0))
    assert samples == {2, 3}


def test_grid_distributions_are_refused_because_the_grid_phase_expands_them():
    with pytest.raises(ValueError, match="grid phase"):
        to_tune_space({"skip_scale": Grid(type="grid", values=[0.5, 1.0])})

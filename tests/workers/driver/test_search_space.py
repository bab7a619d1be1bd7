"""The tuner's space is studies.search_space's Optuna distributions (the space the knob importance re-reads
the tune trials in), exactly the space Ray's OptunaSearch made of the Tune domains the driver used before:
the same distributions in the same order, so a seeded sampler draws the same knobs."""

import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from ray import tune
from ray.tune.search.optuna import OptunaSearch

from studies.search_space import optuna_space
from studies.spec import Choice, Fixed, Grid, IntRange, LogUniform, Uniform
from workers.driver.search_space import to_tune_space

SPACE = {
    "t_freeze": IntRange(type="int", low=2, high=5),
    "lr": LogUniform(type="loguniform", low=1e-4, high=1e-2),
    "tau": Fixed(type="fixed", value=0.5),
    "eps_h": Uniform(type="uniform", low=0.05, high=0.3),
    "norm_placement": Choice(type="choice", values=["pre", "post"]),
    "depth": IntRange(type="int", low=2, high=8, step=2),
    "width_expansion": IntRange(type="int", low=1, high=64, log=True),
}


def test_searched_knobs_get_their_optuna_distribution_and_fixed_knobs_their_constant():
    space = to_tune_space(SPACE)
    assert list(space) == list(SPACE)
    assert space["lr"] == FloatDistribution(1e-4, 1e-2, log=True)
    assert space["eps_h"] == FloatDistribution(0.05, 0.3)
    assert space["t_freeze"] == IntDistribution(2, 5)  # inclusive, as the spec says
    assert space["norm_placement"] == CategoricalDistribution(["pre", "post"])
    assert space["tau"] == 0.5


def test_the_space_is_what_ray_made_of_the_old_tune_domains_in_the_same_order():
    tune_domains = {
        "t_freeze": tune.randint(2, 6),  # Tune's int upper bound is exclusive
        "lr": tune.loguniform(1e-4, 1e-2),
        "tau": 0.5,
        "eps_h": tune.uniform(0.05, 0.3),
        "norm_placement": tune.choice(["pre", "post"]),
        "depth": tune.qrandint(2, 8, 2),
        "width_expansion": tune.lograndint(1, 65),
    }
    before = OptunaSearch.convert_search_space({"knobs": tune_domains})
    assert list(before.items()) == [(f"knobs/{k}", d) for k, d in optuna_space(SPACE).items()]


def test_grid_distributions_are_refused_because_the_grid_phase_expands_them():
    with pytest.raises(ValueError, match="grid phase"):
        to_tune_space({"skip_scale": Grid(type="grid", values=[0.5, 1.0])})

"""The fixed design of the same test: the seeds every method needs for the requested power, which fall as
the effect grows and rise with the spread and the number of comparisons."""

from __future__ import annotations

from studies.planning import plan_study
from studies.planning.fixed import fixed_seeds
from studies.planning.model import Spread
from studies.spec import SequentialDesign
from studies.stats.power import design_feasibility, equivalence_power
from tests.studies.planning.specs import cifar10_paper, sequential_mnist


def test_the_seeds_needed_fall_as_the_effect_grows():
    needed = [
        fixed_seeds(SequentialDesign(effect=effect), 0.01, 1)[0] for effect in (0.005, 0.01, 0.02, 0.04)
    ]
    assert needed == sorted(needed, reverse=True) and len(set(needed)) == 4


def test_more_spread_or_more_comparisons_need_more_seeds():
    design = SequentialDesign(effect=0.01)
    assert fixed_seeds(design, 0.02, 1)[0] > fixed_seeds(design, 0.01, 1)[0]
    assert fixed_seeds(design, 0.01, 6)[0] > fixed_seeds(design, 0.01, 1)[0]


def test_superiority_needs_what_the_claims_power_analysis_needs_at_the_bonferroni_level():
    design = SequentialDesign(effect=0.01, power=0.9)
    n, question = fixed_seeds(design, 0.015, 3)
    assert n == design_feasibility(0.015, 2, effect=0.01, comparisons=3, power=0.9).seeds_needed
    assert "0.05/3" in question


def test_equivalence_reaches_its_power_at_the_seeds_it_names_and_not_one_seed_earlier():
    design = SequentialDesign(test="equivalence", margin=0.01)
    n, _ = fixed_seeds(design, 0.01, 1)
    assert (
        equivalence_power(0.0, 0.01, n, 0.01, alpha=0.1)
        >= 0.8
        > equivalence_power(0.0, 0.01, n - 1, 0.01, alpha=0.1)
    )


def test_non_inferiority_is_one_sided_so_it_needs_fewer_seeds_than_equivalence():
    level = fixed_seeds(SequentialDesign(test="non_inferiority", margin=0.01), 0.01, 1)[0]
    within = fixed_seeds(SequentialDesign(test="equivalence", margin=0.01), 0.01, 1)[0]
    assert level < within


def test_the_plan_prices_the_fixed_design_and_says_what_it_assumed():
    spec = sequential_mnist(test="equivalence", margin=0.01)
    spread = Spread(sd=0.01, source="prior", study=None, comparisons=0, seeds=0, basis="a stated prior")
    fixed = plan_study(spec, spread=spread, simulations=50).fixed
    assert fixed.seeds_needed == fixed_seeds(spec.sequential, 0.01, 1)[0]
    assert fixed.cost is not None and fixed.cost.seeds_per_method == fixed.seeds_needed
    assert fixed.cost.trials == 2 * 3 + 2 * fixed.seeds_needed  # 3 tuning trials per method, then the seeds
    assert "sd 0.01 (prior)" in fixed.reason


def test_a_fixed_spec_states_no_effect_so_the_plan_gives_what_its_seeds_can_detect():
    few, many = cifar10_paper(seeds=[0, 1, 2]), cifar10_paper(seeds=list(range(12)))
    spread = Spread(sd=0.01, source="prior", study=None, comparisons=0, seeds=0, basis="a stated prior")
    found_few, found_many = plan_study(few, spread=spread).fixed, plan_study(many, spread=spread).fixed
    assert found_few.seeds_needed is None and "states no effect" in found_few.reason
    assert found_many.detectable_effect < found_few.detectable_effect


def test_without_a_spread_nothing_is_sized_and_the_reason_is_the_spreads():
    spec = sequential_mnist(effect=0.01)
    spread = Spread(sd=None, source="none", study=None, comparisons=0, seeds=0, basis="no spread here")
    fixed = plan_study(spec, spread=spread).fixed
    assert fixed.seeds_needed is None and fixed.reason == "not sized: no spread here"


def test_an_effect_beyond_reach_says_so():
    spec = sequential_mnist(effect=1e-6)
    spread = Spread(sd=0.01, source="prior", study=None, comparisons=0, seeds=0, basis="a stated prior")
    fixed = plan_study(spec, spread=spread, simulations=20).fixed
    assert fixed.seeds_needed is None and "more than 10,000 seeds" in fixed.reason

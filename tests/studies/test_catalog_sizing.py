"""A catalog study runs only where it can decide its claim: where the seeds a supported or contradicted
outcome needs at the measured spread do not fit the cpu tier (about 15 minutes on 2 cores, 0.3 minute per
digits trial), the claim has no cpu study and its `no_spec` states the seeds it would need."""

from __future__ import annotations

import pytest

from studies.catalog import get_claim, spec_path
from studies.spec import load_spec
from studies.stats.power import design_feasibility

CPU_TIER_MINUTES = 15
MINUTES_PER_DIGITS_TRIAL = 0.3  # measured: 33 trials in 9.8 min (freeze sweep), 20 in 5.8 (ablation)

# claim -> (design, measured spread, trials per seed) from the claims' first cpu runs on digits
SIZED = {
    # a gain of 0.87 points at the 3 focus points, Holm over 9 (sd pooled where the freeze fired, 3 seeds)
    "autonorm_s_freeze_sweep": (
        {"seeds": 3, "effect": 0.0087, "comparisons": 9, "findings_needed": 3},
        0.0221,
        11,
    ),
}


@pytest.mark.parametrize("claim", sorted(SIZED))
def test_a_claim_whose_needed_seeds_do_not_fit_the_cpu_tier_has_no_cpu_study_and_says_how_many(claim):
    design, sd, trials_per_seed = SIZED[claim]
    feasibility = design_feasibility(sd, **design)
    assert not feasibility.can_decide  # the design that ran could only be inconclusive
    needed = feasibility.seeds_needed
    assert needed is not None
    assert needed * trials_per_seed * MINUTES_PER_DIGITS_TRIAL > CPU_TIER_MINUTES
    assert not spec_path(claim, "cpu").exists()
    assert get_claim(claim).no_spec["cpu"].startswith(f"needs {needed} seeds")


def test_the_ablation_that_a_fixed_cpu_design_cannot_decide_runs_sequentially_on_a_recipe_that_trains():
    # Both post-freeze gates within ±1 point of the sampled gate at the first cpu run's paired sd of
    # expected − sample (5 seeds): 5 fixed seeds could only be inconclusive. The cpu study adds seeds look
    # by look, on the digits recipe whose FrozenLN trains (the CIFAR-10 cpu study's: 30 epochs, dim 64).
    feasibility = design_feasibility(0.02576, 5, margin=0.01, findings_needed=2)
    assert not feasibility.can_decide and feasibility.seeds_needed == 87
    spec = load_spec(spec_path("autonorm_s_post_freeze_gate_ablation", "cpu"))
    assert spec.sequential is not None and spec.sequential.test == "equivalence"
    assert spec.sequential.margin == 0.01 and spec.sequential.max_seeds > 5
    assert spec.sequential_claim_problem() is None  # the design's pairs are the claim's
    recipe = load_spec(spec_path("cifar10_autonorm_s_beats_frozen_ln", "cpu"))
    assert (spec.budget.epochs, spec.model) == (recipe.budget.epochs, recipe.model)

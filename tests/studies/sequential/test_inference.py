"""After a data-dependent stop the p-value and the interval account for the looks: the stage-wise p agrees
with the boundary decision, reduces to the fixed design's p when no earlier look could stop, and the
repeated confidence intervals cover the true difference at all looks together with at least 1 - alpha."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from studies.sequential import (
    Boundaries,
    efficacy_boundaries,
    repeated_confidence_interval,
    stagewise_p_value,
    z_from_t,
)

FIVE_LOOKS = (0.2, 0.4, 0.6, 0.8, 1.0)


@pytest.mark.parametrize("sided", [1, 2])
@pytest.mark.parametrize("look", [1, 2, 3, 4, 5])
def test_a_statistic_on_the_boundary_has_p_equal_to_the_alpha_spent_so_far(look, sided):
    design = efficacy_boundaries(FIVE_LOOKS, alpha=0.05, sided=sided)
    p = stagewise_p_value(design.efficacy[look - 1], design, look)
    assert p == pytest.approx(design.spent[look - 1], rel=1e-6)


def test_beyond_the_boundary_p_is_below_the_spent_alpha_and_within_it_above():
    design = efficacy_boundaries(FIVE_LOOKS, alpha=0.05)
    assert stagewise_p_value(design.efficacy[2] + 0.1, design, 3) < design.spent[2]
    assert stagewise_p_value(design.efficacy[2] - 0.1, design, 3) > design.spent[2]


def test_the_final_look_with_unreachable_earlier_boundaries_gives_the_fixed_design_p():
    design = Boundaries(
        fractions=FIVE_LOOKS,
        efficacy=(9.0, 9.0, 9.0, 9.0, 1.96),
        alpha=0.05,
        sided=2,
        spent=(0.0,) * 4 + (0.05,),
    )
    for z in (0.3, 1.5, 2.5, -2.5):
        assert stagewise_p_value(z, design, 5) == pytest.approx(2 * stats.norm.sf(abs(z)), rel=1e-5)


def test_a_two_sided_p_is_symmetric_in_the_sign_of_the_statistic():
    design = efficacy_boundaries(FIVE_LOOKS, alpha=0.05)
    assert stagewise_p_value(-2.4, design, 4) == pytest.approx(stagewise_p_value(2.4, design, 4), rel=1e-9)


def test_a_later_stop_is_less_extreme_than_any_earlier_crossing():
    design = efficacy_boundaries(FIVE_LOOKS, alpha=0.05, sided=1)
    # However large Z at look 3, the paths that crossed at looks 1 and 2 are more extreme.
    assert stagewise_p_value(30.0, design, 3) == pytest.approx(design.spent[1], rel=1e-6)


def test_a_t_statistic_is_judged_by_its_tail_probability():
    design = efficacy_boundaries([1.0], alpha=0.05)
    assert stagewise_p_value(2.2, design, 1, degrees_of_freedom=4) == pytest.approx(
        2 * stats.t.sf(2.2, 4), rel=1e-6
    )
    assert z_from_t(-2.2, 4) == pytest.approx(-z_from_t(2.2, 4))


def test_repeated_intervals_cover_the_truth_at_all_looks_together():
    design = efficacy_boundaries(FIVE_LOOKS, alpha=0.05, sided=2)
    truth, reps = 0.7, 20_000
    rng = np.random.default_rng(35)
    # Information t_k: the estimate at look k is S_k / t_k with standard error 1 / sqrt(t_k).
    sums = np.cumsum(rng.normal(truth * 0.2, math.sqrt(0.2), size=(reps, 5)), axis=1)
    covered = np.ones(reps, dtype=bool)
    for k, t in enumerate(FIVE_LOOKS):
        low, high = repeated_confidence_interval(0.0, 1.0 / math.sqrt(t), design, k + 1)
        estimate = sums[:, k] / t
        covered &= (estimate + low <= truth) & (truth <= estimate + high)
    assert covered.mean() >= 0.95 - 3 * math.sqrt(0.05 * 0.95 / reps)


def test_a_repeated_interval_is_wider_than_the_fixed_interval_and_wider_still_with_few_seeds():
    design = efficacy_boundaries(FIVE_LOOKS, alpha=0.05)
    low, high = repeated_confidence_interval(1.0, 0.5, design, 5)
    assert (low, high) == pytest.approx((1.0 - design.efficacy[4] * 0.5, 1.0 + design.efficacy[4] * 0.5))
    assert high - low > 2 * 1.959964 * 0.5
    t_low, t_high = repeated_confidence_interval(1.0, 0.5, design, 5, degrees_of_freedom=9)
    assert t_high - t_low > high - low


def test_looks_are_numbered_from_one():
    design = efficacy_boundaries(FIVE_LOOKS)
    with pytest.raises(ValueError, match="1 = the first look"):
        stagewise_p_value(2.0, design, 0)
    with pytest.raises(ValueError, match="1 = the first look"):
        repeated_confidence_interval(0.0, 1.0, design, 6)

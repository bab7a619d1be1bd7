"""Boundaries reproduce the published ones: the classical Pocock and O'Brien-Fleming constants (Jennison &
Turnbull 2000, tables 2.1 and 2.3, 3 decimals), Lan-DeMets spending boundaries as gsDesign and rpact print
them, and rpact's own unit-test values (7 digits) for Hwang-Shih-DeCani spending and beta spending."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from studies.sequential import (
    classical_boundaries,
    critical_values,
    crossing_probabilities,
    efficacy_boundaries,
    hwang_shih_decani,
    pocock_spending,
    with_futility,
)

FIVE_LOOKS = [0.2, 0.4, 0.6, 0.8, 1.0]


@pytest.mark.parametrize(("looks", "published"), [(2, 1.977), (3, 2.004), (4, 2.024), (5, 2.040)])
def test_obrien_fleming_constants_at_two_sided_five_percent(looks, published):
    constant, design = classical_boundaries(looks, "obrien_fleming", alpha=0.05, sided=2)
    assert constant == pytest.approx(published, abs=5e-4)
    assert design.efficacy == pytest.approx([constant * math.sqrt(looks / k) for k in range(1, looks + 1)])
    assert design.spent[-1] == pytest.approx(0.05, abs=1e-8)


@pytest.mark.parametrize(("looks", "published"), [(2, 2.178), (3, 2.289), (4, 2.361), (5, 2.413)])
def test_pocock_constants_at_two_sided_five_percent(looks, published):
    constant, design = classical_boundaries(looks, "pocock", alpha=0.05, sided=2)
    assert constant == pytest.approx(published, abs=5e-4)
    assert design.efficacy == pytest.approx([constant] * looks)


def test_obrien_fleming_three_looks_one_sided_matches_rpact_to_seven_digits():
    _, design = classical_boundaries(3, "obrien_fleming", alpha=0.025, sided=1)
    assert design.efficacy == pytest.approx([3.4710914, 2.4544323, 2.0040356], abs=2e-6)
    assert design.spent == pytest.approx([0.00025917372, 0.0071600594, 0.025], rel=1e-5)


def test_lan_demets_obrien_fleming_five_equal_looks_two_sided():
    design = efficacy_boundaries(FIVE_LOOKS, alpha=0.05, sided=2)
    assert design.efficacy == pytest.approx([4.877, 3.357, 2.680, 2.290, 2.031], abs=5e-4)
    # The one-sided design at 0.025 has the same upper boundaries (each tail spends 0.025).
    one_sided = efficacy_boundaries(FIVE_LOOKS, alpha=0.025, sided=1)
    assert one_sided.efficacy == pytest.approx(design.efficacy, abs=1e-8)


def test_lan_demets_pocock_five_equal_looks_two_sided():
    # Published to two decimals as 2.44, 2.43, 2.41, 2.40, 2.39 (the last is 2.386 to three).
    design = efficacy_boundaries(FIVE_LOOKS, alpha=0.05, sided=2, spending=pocock_spending)
    assert design.efficacy == pytest.approx([2.438, 2.427, 2.410, 2.397, 2.386], abs=5e-4)


def test_hwang_shih_decani_unequal_looks_match_rpact_to_seven_digits():
    design = efficacy_boundaries([0.2, 0.4, 1.0], alpha=0.03, sided=1, spending=hwang_shih_decani(0.0))
    assert design.efficacy == pytest.approx([2.5121443, 2.4228747, 2.0280392], abs=2e-6)
    assert design.nominal_levels[0] == pytest.approx(0.006, rel=1e-8)


def test_beta_spending_futility_boundaries_match_rpact_to_seven_digits():
    design = efficacy_boundaries([0.2, 0.4, 1.0], alpha=0.07, sided=1, spending=hwang_shih_decani(-1.0))
    assert design.efficacy == pytest.approx([2.364813, 2.1928805, 1.5660474], abs=2e-6)
    sized = with_futility(design, drift=math.sqrt(7.1015942), beta=0.14, spending=hwang_shih_decani(-2.0))
    assert sized.futility is not None
    assert sized.futility[:2] == pytest.approx([-1.1063623, -0.35992439], abs=2e-6)
    assert sized.futility[-1] == sized.efficacy[-1]  # the last look always decides


def test_a_single_look_is_the_fixed_design():
    assert efficacy_boundaries([1.0], alpha=0.05, sided=2).efficacy[0] == pytest.approx(1.959964, abs=1e-6)
    assert efficacy_boundaries([1.0], alpha=0.025, sided=1).efficacy[0] == pytest.approx(1.959964, abs=1e-6)


@pytest.mark.parametrize("fractions", [FIVE_LOOKS, [0.15, 0.5, 0.55, 1.0], [0.3, 0.6, 0.9]])
def test_the_boundaries_spend_exactly_what_the_function_allows(fractions):
    design = efficacy_boundaries(fractions, alpha=0.05, sided=2)
    up, down = crossing_probabilities(fractions, design.efficacy, design.lower_continuation())
    assert np.cumsum(up + down) == pytest.approx(design.spent, rel=1e-6, abs=1e-12)


def test_monte_carlo_type_one_error_is_alpha():
    design = efficacy_boundaries(FIVE_LOOKS, alpha=0.05, sided=2)
    rng = np.random.default_rng(20240535)
    increments = rng.normal(size=(200_000, 5)) * math.sqrt(0.2)
    z = np.cumsum(increments, axis=1) / np.sqrt(FIVE_LOOKS)
    rejected = np.any(np.abs(z) >= np.asarray(design.efficacy), axis=1).mean()
    assert abs(rejected - 0.05) < 4 * math.sqrt(0.05 * 0.95 / 200_000)


def test_adding_a_look_never_moves_the_boundaries_already_used():
    three = efficacy_boundaries([0.25, 0.5, 0.7], alpha=0.05)
    four = efficacy_boundaries([0.25, 0.5, 0.7, 1.0], alpha=0.05)
    assert four.efficacy[:3] == pytest.approx(three.efficacy, abs=1e-9)


def test_a_look_with_nothing_to_spend_cannot_stop():
    design = efficacy_boundaries([1e-4, 1.0], alpha=0.05, sided=2)
    assert design.efficacy[0] == math.inf
    assert design.efficacy[1] == pytest.approx(1.959964, abs=1e-6)


def test_t_critical_values_are_wider_with_few_seeds_and_tend_to_the_z_boundary():
    design = efficacy_boundaries(FIVE_LOOKS, alpha=0.05)
    few = critical_values(design, [2, 4, 6, 8, 10])
    many = critical_values(design, [1e6] * 5)
    assert all(t > z for t, z in zip(few, design.efficacy, strict=True))
    assert many == pytest.approx(design.efficacy, abs=1e-4)
    # Same tail probability: the final t boundary with 10 df has the z boundary's nominal level.
    assert 2 * stats.t.sf(few[-1], 10) == pytest.approx(design.nominal_levels[-1], rel=1e-9)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"fractions": [0.5, 0.5, 1.0]}, "increase strictly"),
        ({"fractions": [0.5, 1.2]}, "increase strictly"),
        ({"fractions": [1.0], "alpha": 0.5}, r"alpha must lie in \(0, 0.5\)"),
        ({"fractions": [1.0], "alpha": 0.0}, r"alpha must lie in \(0, 0.5\)"),
    ],
)
def test_bad_designs_are_refused_naming_the_problem(kwargs, message):
    with pytest.raises(ValueError, match=message):
        efficacy_boundaries(**kwargs)


def test_futility_needs_a_one_sided_design():
    with pytest.raises(ValueError, match="one-sided"):
        with_futility(efficacy_boundaries(FIVE_LOOKS), drift=3.0)

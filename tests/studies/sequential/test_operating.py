"""A design's power, stopping chances and expected information match rpact's design characteristics (its
unit tests, 7 digits), and the power under no effect is the type I error."""

from __future__ import annotations

import pytest

from studies.sequential import (
    drift_for_power,
    efficacy_boundaries,
    hwang_shih_decani,
    inflation_factor,
    operating_characteristics,
    with_futility,
)


def test_efficacy_only_design_sized_for_power_matches_rpact():
    design = efficacy_boundaries([0.2, 0.4, 1.0], alpha=0.03, sided=1, spending=hwang_shih_decani(0.0))
    drift = drift_for_power(design, power=0.86)
    assert drift**2 == pytest.approx(9.4594101, rel=1e-5)
    inflation = inflation_factor(design, drift, power=0.86)
    assert inflation == pytest.approx(1.0788327, rel=1e-5)
    under_effect = operating_characteristics(design, drift)
    assert under_effect.rejections == pytest.approx([0.12783451, 0.21271713, 0.51944835], abs=1e-6)
    # rpact states the expected information relative to the fixed design's.
    assert under_effect.expected_fraction * inflation == pytest.approx(0.83081135, rel=1e-5)


def test_beta_spending_design_sized_for_power_matches_rpact():
    design = efficacy_boundaries([0.2, 0.4, 1.0], alpha=0.07, sided=1, spending=hwang_shih_decani(-1.0))
    drift = drift_for_power(design, power=0.86, futility=hwang_shih_decani(-2.0))
    assert drift**2 == pytest.approx(7.1015942, rel=1e-5)
    sized = with_futility(design, drift=drift, beta=0.14, spending=hwang_shih_decani(-2.0))
    inflation = inflation_factor(sized, drift, power=0.86)
    under_effect = operating_characteristics(sized, drift)
    assert under_effect.power == pytest.approx(0.86, abs=1e-6)
    assert under_effect.futility_stops[:2] == pytest.approx([0.010777094, 0.016077535], abs=1e-6)
    assert under_effect.expected_fraction * inflation == pytest.approx(0.82636428, rel=1e-5)
    under_null = operating_characteristics(sized, 0.0)
    assert under_null.expected_fraction * inflation == pytest.approx(0.79471657, rel=1e-5)
    # Non-binding futility: stopping for futility can only lower the type I error below alpha.
    assert under_null.power < 0.07


def test_the_power_under_no_effect_is_alpha():
    design = efficacy_boundaries([0.2, 0.4, 0.6, 0.8, 1.0], alpha=0.05, sided=2)
    assert operating_characteristics(design, 0.0).power == pytest.approx(0.05, abs=1e-8)


def test_obrien_fleming_needs_little_more_information_than_the_fixed_design():
    design = efficacy_boundaries([0.2, 0.4, 0.6, 0.8, 1.0], alpha=0.05, sided=2)
    drift = drift_for_power(design, power=0.9)
    assert 1.0 < inflation_factor(design, drift, power=0.9) < 1.03
    # ... and expects to stop well before the maximum under the effect it is sized for.
    assert operating_characteristics(design, drift).expected_fraction < 0.75


def test_a_power_outside_zero_one_is_refused():
    with pytest.raises(ValueError, match="power must lie"):
        drift_for_power(efficacy_boundaries([1.0]), power=1.0)

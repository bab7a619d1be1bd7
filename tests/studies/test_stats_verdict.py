"""studies.stats.verdict: direction-aware better / worse / no significant difference."""

from __future__ import annotations

from studies.stats import BETTER, INSUFFICIENT_DATA, NO_SIGNIFICANT_DIFFERENCE, WORSE, verdict


def test_higher_accuracy_with_a_small_p_value_is_better() -> None:
    assert verdict(0.02, 0.01, alpha=0.05, higher_is_better=True) == BETTER
    assert verdict(-0.02, 0.01, alpha=0.05, higher_is_better=True) == WORSE


def test_lower_rmse_with_a_small_p_value_is_better() -> None:
    assert verdict(-0.02, 0.01, alpha=0.05, higher_is_better=False) == BETTER
    assert verdict(0.02, 0.01, alpha=0.05, higher_is_better=False) == WORSE


def test_p_value_at_or_above_alpha_is_no_significant_difference() -> None:
    assert verdict(0.5, 0.05, alpha=0.05, higher_is_better=True) == NO_SIGNIFICANT_DIFFERENCE


def test_missing_p_value_or_difference_is_insufficient_data() -> None:
    assert verdict(0.1, None, alpha=0.05, higher_is_better=True) == INSUFFICIENT_DATA
    assert verdict(None, None, alpha=0.05, higher_is_better=True) == INSUFFICIENT_DATA

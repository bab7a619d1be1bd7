"""Spending functions spend nothing at the start, the whole level at the end, and never take any back."""

from __future__ import annotations

import math

import numpy as np
import pytest

from studies.sequential import (
    hwang_shih_decani,
    obrien_fleming_spending,
    pocock_spending,
    spending_function,
)

FUNCTIONS = [obrien_fleming_spending, pocock_spending, hwang_shih_decani(-4), hwang_shih_decani(1)]


@pytest.mark.parametrize("spend", FUNCTIONS)
def test_a_spending_function_runs_from_zero_to_the_level_without_decreasing(spend):
    t = np.linspace(0.0, 1.0, 101)
    spent = spend(t, 0.025)
    assert spent[0] == pytest.approx(0.0, abs=1e-15)
    assert spent[-1] == pytest.approx(0.025, rel=1e-12)
    assert np.all(np.diff(spent) >= 0.0)


def test_obrien_fleming_spends_almost_nothing_at_a_fifth_of_the_seeds():
    # 2 - 2 Phi(z_{0.9875} / sqrt(0.2)): the first boundary of 5 equal looks is then 4.877.
    assert float(obrien_fleming_spending(0.2, 0.025)) == pytest.approx(5.389e-7, rel=1e-3)


def test_pocock_spends_the_level_times_ln_1_plus_e_minus_1_t():
    assert float(pocock_spending(0.5, 0.05)) == pytest.approx(
        0.05 * math.log(1 + (math.e - 1) / 2), rel=1e-12
    )


def test_hwang_shih_decani_with_gamma_zero_spends_linearly():
    assert hwang_shih_decani(0.0)(np.array([0.2, 0.4, 1.0]), 0.03) == pytest.approx([0.006, 0.012, 0.03])


def test_a_spec_names_its_spending_function():
    assert spending_function("obrien_fleming") is obrien_fleming_spending
    assert float(spending_function("hwang_shih_decani", gamma=0.0)(0.5, 0.02)) == pytest.approx(0.01)
    with pytest.raises(ValueError, match="choose one of"):
        spending_function("haybittle")
    with pytest.raises(ValueError, match="needs gamma"):
        spending_function("hwang_shih_decani")


def test_fractions_outside_zero_one_are_refused():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        obrien_fleming_spending(1.2, 0.025)

"""Spearman's p in a `trend` is exact where it can be and never 0: a perfect ordering of n untied points
has p = 2 / n!, the value every permutation of the ranks gives."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from studies.claims import TrendCheck
from studies.claims.trend import smallest_attainable_p, spearman_test
from tests.studies.claims.synthetic import data, trial


def _enumerated_p(x: np.ndarray, y: np.ndarray) -> float:
    """The two-sided p by brute force (scipy visits every ordering of the ranks)."""
    exhaustive = stats.PermutationMethod(n_resamples=math.inf)
    return float(stats.pearsonr(stats.rankdata(x), stats.rankdata(y), method=exhaustive).pvalue)


def test_a_perfect_ordering_of_nine_points_has_p_two_over_nine_factorial():
    x = np.arange(9.0)
    test = spearman_test(x, -(x**2))
    assert test is not None and test.rho == pytest.approx(-1.0)
    assert test.p_value == pytest.approx(2 / math.factorial(9), rel=1e-12)  # 5.5e-6, never "0"
    assert test.method == "exact"
    assert smallest_attainable_p(9) == pytest.approx(test.p_value)


@pytest.mark.parametrize("seed", range(4))
def test_the_exact_p_equals_the_share_of_all_orderings(seed):
    rng = np.random.default_rng(seed)
    x, y = rng.normal(size=7), rng.normal(size=7)
    test = spearman_test(x, y)
    assert test is not None and test.method == "exact"
    assert test.p_value == pytest.approx(_enumerated_p(x, y), abs=1e-12)


def test_tied_points_are_enumerated_exactly():
    x = np.asarray([1.0, 1.0, 2.0, 3.0, 4.0, 4.0, 5.0])
    y = np.asarray([0.3, 0.1, 0.2, 0.5, 0.4, 0.7, 0.6])
    test = spearman_test(x, y)
    assert test is not None and test.method.startswith("exact (ties")
    assert test.p_value == pytest.approx(_enumerated_p(x, y), abs=1e-12)


def test_beyond_the_exact_range_the_p_is_a_permutation_estimate_that_says_so_and_is_never_zero():
    x = np.arange(20.0)
    test = spearman_test(x, x**3)
    assert test is not None and test.rho == pytest.approx(1.0)
    assert 0.0 < test.p_value <= 2e-5
    assert "Monte Carlo" in test.method and "not exact" in test.method


def test_the_trend_finding_prints_the_exact_p_and_how_it_was_obtained():
    trials = [
        trial({"skip_scale": beta}, seed, {"init_erank_jacobian": 1.0 / (1.0 + beta) + 0.001 * seed})
        for beta in (0.1, 0.2, 0.3, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0)
        for seed in range(2)
    ]
    result = TrendCheck(x="knob.skip_scale", y="init_erank_jacobian", expect="negative").evaluate(
        data(trials)
    )
    finding = result.findings[0]
    assert finding.p_value == pytest.approx(2 / math.factorial(9))
    assert "p = 5.51e-06 (exact)" in finding.note


def test_x_values_that_differ_only_by_round_off_give_no_correlation_and_say_so():
    # Initial ranks of 0.9999999996 to 1.0: float32 round-off of one value, whose order is noise.
    noise = [1.0 - 4e-10 * i for i in range(9)]
    assert spearman_test(np.asarray(noise), np.arange(9.0)) is None
    trials = [
        trial({"skip_scale": beta}, 0, {"init_erank_jacobian": rank}, value=0.5 + 0.01 * i)
        for i, (beta, rank) in enumerate(
            zip((0.1, 0.2, 0.3, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0), noise, strict=True)
        )
    ]
    result = TrendCheck(x="init_erank_jacobian", y="primary", expect="positive").evaluate(data(trials))
    assert result.verdict == "inconclusive"
    assert "round-off: no correlation to test" in result.findings[0].note

"""`stratified_spearman`: the size-weighted mean of within-stratum Spearman correlations, tested by
permuting within strata only; exact while the strata allow few enough arrangements, else seeded so the
same data always give the same p-value, and equal to the plain exact Spearman test for one stratum."""

from __future__ import annotations

import numpy as np
import pytest

from studies.claims.stratified_correlation import stratified_spearman
from studies.claims.trend import spearman


def test_the_permutation_test_is_exact_for_small_strata_and_seeded_for_large_ones():
    small = stratified_spearman([1, 2, 3, 4, 1, 2, 3], [1, 2, 3, 4, 3, 2, 1], list("aaaabbb"))
    assert small is not None and small.exact
    assert small.statistic == pytest.approx((4 * 1.0 + 3 * -1.0) / 7)
    assert small.by_stratum == {"a": (pytest.approx(1.0), 4), "b": (pytest.approx(-1.0), 3)}
    xs = [float(i) for i in range(10)] * 2
    ys = [float(i) for i in range(10)] + [float(9 - i) for i in range(10)]
    large = stratified_spearman(xs, ys, ["a"] * 10 + ["b"] * 10)
    assert large is not None and not large.exact
    assert large.statistic == pytest.approx(0.0) and large.p_value == pytest.approx(1.0)
    rising = stratified_spearman(xs, [x + (i % 3) * 0.01 for i, x in enumerate(xs)], ["a"] * 10 + ["b"] * 10)
    assert rising is not None and rising.p_value < 1e-3
    assert rising == stratified_spearman(
        xs, [x + (i % 3) * 0.01 for i, x in enumerate(xs)], ["a"] * 10 + ["b"] * 10
    )
    assert stratified_spearman([1, 2], [2, 1], ["a", "a"]) is None  # no stratum of 3


def test_the_permutation_p_value_of_one_stratum_matches_the_exact_spearman_test():
    x, y = [0.1, 0.4, 0.2, 0.8, 0.5, 0.9], [0.3, 0.2, 0.5, 0.7, 0.9, 0.8]
    one = stratified_spearman(x, y, ["only"] * 6)
    rho, p = spearman(np.asarray(x), np.asarray(y))
    assert one is not None and one.statistic == pytest.approx(rho) and one.p_value == pytest.approx(p)

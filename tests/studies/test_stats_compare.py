"""studies.stats.compare / compare_by_seed: scipy reference tests, worked examples, edge cases."""

from __future__ import annotations

import math
from dataclasses import fields

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from studies.stats import PAIRED_T, WELCH_T, WILCOXON, compare, compare_by_seed, hedges_g

# Hand-worked paired example: d = x - y = [1, 2, 3, 2], mean 2, sd sqrt(2/3), t = 2 sqrt(6).
X = [11.0, 13.0, 12.0, 12.0]
Y = [10.0, 11.0, 9.0, 10.0]


def assert_no_nan(result) -> None:
    for f in fields(result):
        value = getattr(result, f.name)
        if isinstance(value, float):
            assert math.isfinite(value), f"{f.name} is {value}"


def test_paired_comparison_matches_hand_worked_numbers() -> None:
    c = compare(X, Y)
    assert c.paired and c.test == PAIRED_T and c.n == 4
    assert c.diff_mean == pytest.approx(2.0)
    half_width = stats.t.ppf(0.975, 3) * math.sqrt(2 / 3) / 2
    assert c.diff_ci_low == pytest.approx(2.0 - half_width)
    assert c.diff_ci_high == pytest.approx(2.0 + half_width)
    assert c.effect_size == pytest.approx(math.sqrt(6))  # d_z = 2 / sqrt(2/3)
    assert c.effect_size_name == "Cohen's d_z"
    assert c.p_t == pytest.approx(2 * stats.t.sf(2 * math.sqrt(6), 3))
    assert c.prob_improvement == 1.0
    # All four differences positive: two-sided exact p = 2 / 2^4.
    assert c.p_wilcoxon == pytest.approx(0.125)


def test_paired_t_and_wilcoxon_match_scipy() -> None:
    rng = np.random.default_rng(3)
    reference = rng.normal(0.80, 0.01, size=8)
    method = reference + rng.normal(0.004, 0.005, size=8)
    c = compare(method, reference, confidence=0.9)
    t_ref = stats.ttest_rel(method, reference)
    interval = t_ref.confidence_interval(confidence_level=0.9)
    assert c.p_t == pytest.approx(t_ref.pvalue, rel=1e-12)
    assert c.p_value == c.p_t
    assert c.diff_ci_low == pytest.approx(interval.low, rel=1e-12)
    assert c.diff_ci_high == pytest.approx(interval.high, rel=1e-12)
    assert c.p_wilcoxon == pytest.approx(stats.wilcoxon(method, reference, method="exact").pvalue)
    assert c.wilcoxon_method == "exact"
    d = method - reference
    assert c.effect_size == pytest.approx(d.mean() / d.std(ddof=1))


def test_unpaired_comparison_is_welchs_t_test_as_in_scipy() -> None:
    x = [0.81, 0.83, 0.80, 0.86, 0.82]
    y = [0.78, 0.80, 0.79, 0.81]
    c = compare(x, y, paired=False)
    welch = stats.ttest_ind(x, y, equal_var=False)
    interval = welch.confidence_interval(confidence_level=0.95)
    assert not c.paired and c.test == WELCH_T
    assert c.p_wilcoxon is None and c.wilcoxon_method is None
    assert c.p_t == pytest.approx(welch.pvalue, rel=1e-12)
    assert c.diff_ci_low == pytest.approx(interval.low, rel=1e-12)
    assert c.diff_ci_high == pytest.approx(interval.high, rel=1e-12)
    assert (c.n, c.n_reference) == (5, 4)


def test_hedges_g_matches_hand_worked_example() -> None:
    # pooled variance (2 * 1 + 3 * 5/3) / 5 = 1.4; d = -3.5 / sqrt(1.4); J(5) = G(2.5) / (sqrt(2.5) G(2))
    g = hedges_g(np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0, 6.0, 7.0]))
    j = math.gamma(2.5) / (math.sqrt(2.5) * math.gamma(2.0))
    assert g == pytest.approx(-3.5 / math.sqrt(1.4) * j)
    assert j == pytest.approx(1 - 3 / (4 * 5 - 1), abs=2e-3)  # the usual approximation agrees


def test_probability_of_improvement_respects_the_metric_direction() -> None:
    low, high = [1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]
    assert compare(high, low, paired=False).prob_improvement == 1.0
    assert compare(high, low, paired=False, higher_is_better=False).prob_improvement == 0.0
    # Paired: a tie counts one half.
    c = compare([1.0, 2.0, 3.0, 4.0], [0.0, 2.0, 4.0, 3.0], higher_is_better=False)
    assert c.prob_improvement == pytest.approx((0 + 0.5 + 1 + 0) / 4)


def test_lower_rmse_gives_a_negative_difference_and_a_winning_probability() -> None:
    rmse_method = [0.50, 0.52, 0.49, 0.51, 0.50]
    rmse_reference = [0.55, 0.56, 0.54, 0.57, 0.55]
    c = compare(rmse_method, rmse_reference, higher_is_better=False)
    assert c.diff_mean < 0
    assert c.prob_improvement == 1.0
    assert c.p_value < 0.05


def test_minimum_detectable_effect_is_reported_for_paired_and_unpaired_data() -> None:
    paired = compare(X, Y)
    unpaired = compare(X, Y, paired=False)
    assert paired.mde_80 is not None and paired.mde_80 > 0
    assert unpaired.mde_80 is not None and unpaired.mde_80 > 0


def test_fewer_than_five_seeds_warns_about_low_power() -> None:
    assert any("fewer than 5" in w for w in compare(X, Y).warnings)
    five = compare([*X, 13.0], [*Y, 10.5])
    assert not any("fewer than 5" in w for w in five.warnings)


def test_one_seed_pair_gives_the_difference_but_no_test() -> None:
    c = compare([0.9], [0.8])
    assert c.diff_mean == pytest.approx(0.1)
    assert c.p_value is None and c.p_t is None and c.p_wilcoxon is None and c.diff_ci_low is None
    assert c.test == "none"
    assert any("one seed pair" in w for w in c.warnings)
    assert_no_nan(c)


def test_identical_method_and_reference_give_zero_difference_and_p_one() -> None:
    c = compare([0.9, 0.91, 0.92], [0.9, 0.91, 0.92])
    assert (c.diff_mean, c.diff_ci_low, c.diff_ci_high) == (0.0, 0.0, 0.0)
    assert c.p_t == 1.0 and c.p_wilcoxon == 1.0 and c.effect_size == 0.0
    assert any("identical" in w for w in c.warnings)
    assert_no_nan(c)


def test_constant_nonzero_difference_makes_wilcoxon_the_primary_test() -> None:
    reference = [0.80, 0.81, 0.82, 0.83, 0.84, 0.85]
    method = [v + 0.01 for v in reference]
    c = compare(method, reference)
    assert c.test == WILCOXON
    assert c.p_t is None and c.effect_size is None
    assert c.p_value == c.p_wilcoxon == pytest.approx(2 / 2**6)
    assert c.diff_ci_low == c.diff_ci_high == pytest.approx(0.01)
    assert any("zero variance" in w for w in c.warnings)
    assert_no_nan(c)


def test_a_failed_seed_drops_its_pair_and_says_so() -> None:
    c = compare([0.9, None, 0.92, 0.95], [0.88, 0.89, 0.90, float("nan")])
    assert c.n == 2
    assert any("2 pair(s) with a missing value" in w for w in c.warnings)


def test_paired_comparison_of_unequal_lengths_is_refused_with_a_pointer_to_compare_by_seed() -> None:
    with pytest.raises(ValueError, match="compare_by_seed"):
        compare([1.0, 2.0], [1.0])


def test_welch_with_a_single_value_on_one_side_gives_the_difference_but_no_test() -> None:
    c = compare([0.9], [0.8, 0.82, 0.81], paired=False)
    assert c.diff_mean == pytest.approx(0.09)
    assert c.p_value is None and c.diff_ci_low is None
    assert_no_nan(c)


def test_welch_with_constant_but_different_groups_gives_no_p_value() -> None:
    c = compare([0.9, 0.9], [0.8, 0.8], paired=False)
    assert c.diff_mean == pytest.approx(0.1) and c.p_value is None and c.effect_size is None
    assert any("zero variance" in w for w in c.warnings)
    assert_no_nan(c)


def test_compare_by_seed_pairs_on_seed_ids_not_on_positions() -> None:
    method = {2: 12.0, 0: 11.0, 1: 13.0, 3: 12.0}
    reference = {0: 10.0, 1: 11.0, 2: 9.0, 3: 10.0}
    c = compare_by_seed(method, reference)
    assert c.paired and c.seeds == (0, 1, 2, 3)
    assert c.p_t == pytest.approx(compare(X, Y).p_t)


def test_compare_by_seed_falls_back_to_welch_when_the_method_lacks_reference_seeds() -> None:
    method = {0: 0.91, 1: 0.92, 2: 0.93}
    reference = {0: 0.90, 1: 0.91, 2: 0.90, 3: 0.89, 4: 0.90}
    c = compare_by_seed(method, reference)
    assert not c.paired and c.test == WELCH_T and c.p_wilcoxon is None
    assert c.p_t == pytest.approx(
        stats.ttest_ind(list(method.values()), list(reference.values()), equal_var=False).pvalue
    )
    assert any("method lacks reference seed(s) 3, 4" in w and "unpaired" in w for w in c.warnings)


def test_compare_by_seed_treats_a_failed_seed_as_missing() -> None:
    method = {0: 0.91, 1: None, 2: 0.93, 3: 0.92}
    reference = {0: 0.90, 1: 0.91, 2: 0.90, 3: 0.91}
    welch = compare_by_seed(method, reference)
    assert not welch.paired and any("seed(s) 1" in w for w in welch.warnings)
    intersect = compare_by_seed(method, reference, on_mismatch="intersect")
    assert intersect.paired and intersect.seeds == (0, 2, 3)
    assert any("paired on the 3 shared seeds" in w for w in intersect.warnings)


def test_compare_by_seed_with_one_seed_each_gives_insufficient_data_not_nan() -> None:
    c = compare_by_seed({0: 0.9}, {0: 0.8})
    assert c.p_value is None and c.diff_mean == pytest.approx(0.1)
    assert_no_nan(c)
    disjoint = compare_by_seed({0: 0.9}, {1: 0.8})
    assert disjoint.p_value is None and not disjoint.paired
    assert_no_nan(disjoint)


def test_compare_by_seed_with_no_completed_method_seeds_says_there_is_nothing_to_compare() -> None:
    c = compare_by_seed({0: None, 1: None}, {0: 0.8, 1: 0.81})
    assert c.diff_mean is None and c.p_value is None
    assert any("no values for the method" in w for w in c.warnings)


paired_samples = st.lists(st.tuples(st.floats(-10, 10), st.floats(-10, 10)), min_size=3, max_size=10).filter(
    lambda pairs: np.std([a - b for a, b in pairs]) > 1e-3
)


@settings(max_examples=40, deadline=None)
@given(paired_samples, st.floats(-20, 20))
def test_paired_comparison_ignores_a_common_shift_and_flips_sign_when_swapped(pairs, shift) -> None:
    x = [a for a, _ in pairs]
    y = [b for _, b in pairs]
    base = compare(x, y)
    moved = compare([v + shift for v in x], [v + shift for v in y])
    swapped = compare(y, x)
    assert moved.p_t == pytest.approx(base.p_t, rel=1e-5, abs=1e-9)
    assert swapped.diff_mean == pytest.approx(-base.diff_mean, abs=1e-9)
    assert swapped.p_t == pytest.approx(base.p_t, rel=1e-9)
    assert swapped.diff_ci_low == pytest.approx(-base.diff_ci_high, abs=1e-9)
    assert base.diff_ci_low <= base.diff_mean <= base.diff_ci_high
    assert_no_nan(base)

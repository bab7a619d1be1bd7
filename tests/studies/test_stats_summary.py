"""studies.stats.summarize: checked against scipy, hand-worked numbers, properties and edge cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from studies.stats import DEFAULT_BOOTSTRAP_RESAMPLES, DEFAULT_BOOTSTRAP_SEED, interquartile_mean, summarize

FLOAT_FIELDS = ("mean", "std", "sem", "ci_low", "ci_high", "boot_low", "boot_high", "median", "iqm")

# Metric-like values with real spread: hypothesis otherwise finds 1e-300 spreads that no metric has.
spread_samples = st.lists(
    st.floats(min_value=-100, max_value=100, allow_nan=False, allow_infinity=False), min_size=2, max_size=12
).filter(lambda xs: np.std(xs) > 1e-3)


def assert_no_nan(summary) -> None:
    for name in FLOAT_FIELDS:
        value = getattr(summary, name)
        assert value is None or math.isfinite(value), f"{name} is {value}"


def test_t_interval_matches_scipy_t_interval() -> None:
    values = [0.912, 0.918, 0.905, 0.921, 0.915, 0.909]
    s = summarize(values, confidence=0.9)
    low, high = stats.t.interval(0.9, df=5, loc=np.mean(values), scale=stats.sem(values))
    assert s.ci_low == pytest.approx(low, rel=1e-12)
    assert s.ci_high == pytest.approx(high, rel=1e-12)
    assert s.sem == pytest.approx(stats.sem(values), rel=1e-12)
    assert s.std == pytest.approx(np.std(values, ddof=1), rel=1e-12)


def test_bootstrap_interval_is_scipys_seeded_bca_interval_with_the_stated_resample_count() -> None:
    values = [0.71, 0.74, 0.69, 0.80, 0.73, 0.75, 0.72]
    s = summarize(values)
    reference = stats.bootstrap(
        (np.asarray(values),),
        np.mean,
        confidence_level=0.95,
        n_resamples=DEFAULT_BOOTSTRAP_RESAMPLES,
        method="BCa",
        rng=np.random.default_rng(DEFAULT_BOOTSTRAP_SEED),
    ).confidence_interval
    assert s.boot_method == "BCa"
    assert s.boot_resamples == DEFAULT_BOOTSTRAP_RESAMPLES
    assert s.boot_seed == DEFAULT_BOOTSTRAP_SEED
    assert s.boot_low == pytest.approx(reference.low, rel=1e-12)
    assert s.boot_high == pytest.approx(reference.high, rel=1e-12)


def test_bootstrap_interval_is_reproducible_and_depends_on_the_seed() -> None:
    values = [0.1, 0.4, 0.35, 0.8, 0.2]
    assert summarize(values).boot_low == summarize(values).boot_low
    assert summarize(values, seed=1).boot_low != summarize(values, seed=2).boot_low


def test_hand_worked_example_one_to_five() -> None:
    s = summarize([1, 2, 3, 4, 5])
    # sd = sqrt(10 / 4), sem = sd / sqrt(5) = sqrt(0.5), t(0.975, 4) = 2.776445
    assert s.n == 5
    assert s.mean == 3.0
    assert s.std == pytest.approx(math.sqrt(2.5))
    assert s.sem == pytest.approx(math.sqrt(0.5))
    assert s.ci_low == pytest.approx(3 - 2.776445 * math.sqrt(0.5), abs=1e-6)
    assert s.ci_high == pytest.approx(3 + 2.776445 * math.sqrt(0.5), abs=1e-6)
    assert s.median == 3.0


def test_interquartile_mean_trims_a_quarter_from_each_end() -> None:
    assert interquartile_mean(range(1, 9)) == pytest.approx(4.5)  # mean of 3, 4, 5, 6
    s = summarize([1, 2, 3, 4, 100])
    assert s.iqm == pytest.approx(3.0)  # the outlier 100 (and 1) are trimmed
    assert s.mean == pytest.approx(22.0)
    assert s.median == 3.0


def test_confidence_outside_zero_one_is_rejected_with_a_clear_message() -> None:
    with pytest.raises(ValueError, match="between 0 and 1"):
        summarize([1.0, 2.0], confidence=95)


def test_one_seed_gives_the_value_without_intervals_and_says_why() -> None:
    s = summarize([0.9])
    assert (s.n, s.mean, s.median, s.iqm) == (1, 0.9, 0.9, 0.9)
    assert s.std is None and s.ci_low is None and s.boot_low is None
    assert any("one value" in w for w in s.warnings)
    assert_no_nan(s)


def test_identical_values_give_zero_spread_and_intervals_collapsed_on_the_mean() -> None:
    s = summarize([0.5, 0.5, 0.5, 0.5])
    assert s.std == 0.0 and s.sem == 0.0
    assert s.ci_low == s.ci_high == s.boot_low == s.boot_high == 0.5
    assert s.boot_method == "degenerate"
    assert any("zero variance" in w for w in s.warnings)
    assert_no_nan(s)


def test_no_values_give_an_empty_summary_not_a_crash() -> None:
    s = summarize([])
    assert s.n == 0 and s.mean is None and s.values == ()
    assert any("no values" in w for w in s.warnings)


def test_failed_seeds_as_none_or_nan_are_left_out_and_counted() -> None:
    s = summarize([0.8, None, 0.82, float("nan"), 0.81, float("inf")])
    assert s.n == 3
    assert s.n_dropped == 3
    assert s.values == (0.8, 0.82, 0.81)
    assert s.mean == pytest.approx(0.81)
    assert any("3 missing" in w for w in s.warnings)


def test_two_values_still_get_both_intervals() -> None:
    s = summarize([1.0, 2.0])
    assert s.ci_low is not None and s.boot_low is not None
    assert s.ci_low < 1.5 < s.ci_high
    assert_no_nan(s)


@settings(max_examples=40, deadline=None)
@given(spread_samples)
def test_t_interval_contains_the_mean(values: list[float]) -> None:
    s = summarize(values, n_resamples=199)
    assert s.ci_low <= s.mean <= s.ci_high
    assert s.boot_low <= s.boot_high
    assert_no_nan(s)


@settings(max_examples=40, deadline=None)
@given(spread_samples, st.floats(0.5, 0.98), st.floats(0.01, 0.0199))
def test_t_interval_widens_with_the_confidence_level(values: list[float], low: float, gap: float) -> None:
    narrow = summarize(values, confidence=low, n_resamples=99)
    wide = summarize(values, confidence=low + gap, n_resamples=99)
    assert wide.ci_high - wide.ci_low > narrow.ci_high - narrow.ci_low


@settings(max_examples=40, deadline=None)
@given(spread_samples, st.floats(-50, 50))
def test_intervals_shift_with_the_data(values: list[float], shift: float) -> None:
    base = summarize(values, n_resamples=199)
    moved = summarize([v + shift for v in values], n_resamples=199)
    scale = 1e-9 * (1 + max(abs(v) for v in values) + abs(shift))
    assert moved.mean == pytest.approx(base.mean + shift, abs=scale)
    assert moved.ci_low == pytest.approx(base.ci_low + shift, abs=scale * 100)
    assert moved.ci_high == pytest.approx(base.ci_high + shift, abs=scale * 100)
    assert moved.median == pytest.approx(base.median + shift, abs=scale)
    assert moved.std == pytest.approx(base.std, rel=1e-6)
    # BCa counts resampled means equal to the sample mean, and rounding after a shift can flip those
    # ties, so the bootstrap interval moves with the data only up to that discreteness.
    assert min(values) + shift - scale <= moved.boot_low <= moved.boot_high <= max(values) + shift + scale

"""studies.stats.adjust: Holm and Benjamini-Hochberg against worked examples and scipy."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from studies.stats import adjust

P = [0.01, 0.04, 0.03, 0.005]


def test_holm_matches_the_worked_example_in_input_order() -> None:
    # Sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 -> 0.02, 0.03, 0.06, 0.04; running max -> 0.06.
    assert adjust(P, "holm") == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_holm_is_the_default_method() -> None:
    assert adjust(P) == adjust(P, "holm")


def test_benjamini_hochberg_matches_the_worked_example_and_scipy() -> None:
    # Sorted p * 4 / rank -> 0.02, 0.02, 0.04, 0.04 (already monotone).
    assert adjust(P, "bh") == pytest.approx([0.02, 0.04, 0.04, 0.02])
    ps = [0.001, 0.008, 0.039, 0.041, 0.042, 0.06, 0.074, 0.205, 0.212, 0.216]
    assert adjust(ps, "bh") == pytest.approx(list(stats.false_discovery_control(ps, method="bh")))


def test_adjusted_p_values_are_capped_at_one() -> None:
    assert adjust([0.5, 0.6, 0.7], "holm") == pytest.approx([1.0, 1.0, 1.0])


def test_untested_rows_stay_none_and_do_not_enlarge_the_family() -> None:
    assert adjust([0.01, None, 0.04, float("nan")], "holm") == pytest.approx([0.02, None, 0.04, None])


def test_none_method_returns_the_raw_p_values() -> None:
    assert adjust(P, "none") == pytest.approx(P)


def test_unknown_method_and_out_of_range_p_values_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown adjustment"):
        adjust(P, "bonferroni-ish")
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        adjust([0.5, 1.5])


def test_empty_family_gives_an_empty_list() -> None:
    assert adjust([]) == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=15))
def test_adjusted_p_values_never_fall_below_raw_and_holm_is_at_least_as_strict_as_bh(ps) -> None:
    holm = adjust(ps, "holm")
    bh = adjust(ps, "bh")
    for raw, h, b in zip(ps, holm, bh, strict=True):
        assert raw <= b + 1e-12 and b <= h + 1e-12 and h <= 1.0
    # Adjustment keeps the order of the raw p-values.
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    assert all(holm[i] <= holm[j] + 1e-12 for i, j in itertools.pairwise(order))

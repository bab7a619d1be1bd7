"""The freeze precondition's source text states the threshold the check applies: the share of seeds that
must have frozen, and the share of the estimate that then comes from AutoNorm-S, both read off
MIN_FREEZE_FRACTION, so the words cannot drift from the rule."""

from __future__ import annotations

import re

import pytest

from studies.claims.preconditions import (
    FREEZE_SOURCE,
    MIN_FREEZE_FRACTION,
    MIN_SEEDS_PER_ARM,
    FreezeCount,
    _share_in_words,
)


def _stated_percentage() -> float:
    match = re.search(r"at least (\d+(?:\.\d+)?) % of the seeds", FREEZE_SOURCE)
    assert match is not None, FREEZE_SOURCE
    return float(match.group(1))


def test_the_freeze_source_states_the_share_of_seeds_the_check_requires():
    assert _stated_percentage() / 100 == pytest.approx(MIN_FREEZE_FRACTION)
    assert f"(and at least {MIN_SEEDS_PER_ARM})" in FREEZE_SOURCE
    # Of a hundred seeds, the stated percentage is the number a row must have frozen.
    hundred = FreezeCount("autonorm_s", fired=tuple(range(100)), not_fired=(), not_recorded=())
    assert hundred.needed() == _stated_percentage()


def test_the_freeze_source_words_the_estimate_share_from_the_same_fraction():
    assert f"for {_share_in_words(MIN_FREEZE_FRACTION)} of the estimate" in FREEZE_SOURCE


@pytest.mark.parametrize(
    ("share", "words"),
    [
        (0.8, "four fifths"),
        (0.75, "three quarters"),
        (0.5, "one half"),
        (2 / 3, "two thirds"),
        (0.9, "nine tenths"),
        (0.85, "85 %"),  # no exact fraction with a denominator up to ten
        (1.0, "100 %"),
    ],
)
def test_a_share_is_worded_as_a_small_fraction_where_one_is_exact_else_as_a_percentage(share, words):
    assert _share_in_words(share) == words

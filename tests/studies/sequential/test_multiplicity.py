"""Each comparison's share of alpha keeps the family-wise error of a study at or below alpha."""

from __future__ import annotations

import pytest

from studies.sequential import holm_level


def test_before_any_rejection_each_comparison_gets_bonferronis_share():
    assert holm_level(0.05, 4) == pytest.approx(0.0125)


def test_each_rejection_passes_its_share_to_the_comparisons_still_open():
    assert [holm_level(0.05, 4, rejected) for rejected in range(4)] == pytest.approx(
        [0.0125, 0.05 / 3, 0.025, 0.05]
    )


def test_a_finished_family_has_no_level_left_to_give():
    with pytest.raises(ValueError, match="rejected must lie"):
        holm_level(0.05, 3, 3)

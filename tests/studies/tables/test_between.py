"""The difference between two studies, row by row: paired by seed on the seeds both ran, Holm across the
rows, and "not tested" where a study chose its seeds look by look."""

from __future__ import annotations

import pytest

from studies.tables.between import paired_between

A = {"frozen_ln": {0: 0.80, 1: 0.81, 2: 0.82}, "dyt": {0: 0.70, 1: 0.72, 2: 0.71}, "only_a": {0: 0.5, 1: 0.5}}
B = {"frozen_ln": {0: 0.90, 1: 0.92, 2: 0.94}, "dyt": {0: 0.70, 1: 0.71, 2: 0.73, 3: 0.9}}


def test_each_shared_row_is_b_minus_a_on_the_seeds_both_ran():
    rows = {r.row: r for r in paired_between(A, B, higher_is_better=True)}
    assert set(rows) == {"frozen_ln", "dyt"}  # a row only one study ran has no difference
    assert rows["frozen_ln"].seeds == 3 and rows["frozen_ln"].difference == pytest.approx(0.11)
    assert rows["dyt"].seeds == 3 and rows["dyt"].difference == pytest.approx(0.01 / 3)  # seed 3: b only
    assert "3" in rows["dyt"].note  # the unmatched seed is named
    assert rows["frozen_ln"].p_adjusted >= rows["frozen_ln"].p_value  # Holm over the two rows


def test_a_sequential_study_is_not_tested_rather_than_judged_on_seeds_its_looks_chose():
    rows = paired_between(A, B, higher_is_better=True, sequential="not tested: looks")
    assert [(r.row, r.difference, r.note) for r in rows] == [
        ("frozen_ln", None, "not tested: looks"),
        ("dyt", None, "not tested: looks"),
    ]


def test_a_row_with_fewer_than_two_shared_seeds_has_no_difference():
    (row,) = paired_between({"m": {0: 0.1, 1: 0.2}}, {"m": {1: 0.3, 2: 0.4}}, higher_is_better=True)
    assert (row.seeds, row.difference, row.note) == (0, None, "fewer than two shared seeds")
